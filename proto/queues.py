"""Queue configuration as carried on the bus (and read from YAML by admission and the CLI).

Kueue's quota model in Polyaxon's words: each queue has a concurrency, a priority, optional
resource quota per resource and per *flavor* (an ordered list an op may fall back through), an
optional cost quota, and may join a cohort whose members lend unused quota to each other. Cohorts nest
(``Cohort.parent``: team → dept → org), each with its own quota and limits (Kueue's hierarchical cohorts).
Quantities are Kubernetes quantities ("8", "500m", "256Gi") or numbers. Unknown fields are refused:
a misspelt quota must not silently mean "no quota".
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from opsched.proto.access import Access
from opsched.proto.resources import is_accelerator
from opsched.proto.spec import EnvVar, Wire

Quantity = str | int | float
NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
DEFAULT_INIT_IMAGE = "alpine/git:v2.36.1"  # runs the git and file init steps (git and sh), unless configured
DEFAULT_MAX_PENDING_PER_USER = 1000  # a queue's maxPendingPerUser unless it sets one (0: no cap)
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
# A queue's pods' Pod Security Standards level, checked by ``rules.pod_security``, and the volume kinds a queue may
# allow them (refused otherwise, at baseline and restricted)
Level = Literal["privileged", "baseline", "restricted"]
DEFAULT_LEVEL: Level = "baseline"
AllowableVolume = Literal["persistentVolumeClaim", "nfs"]


# Where admission puts an accelerator pod among the nodes it fits (``services.admission.policies.placement``):
# ``binpack`` the fullest node (big ops find whole nodes free), ``spread`` the emptiest, ``firstFit`` the first by
# name. binpack and spread are carried to the pod as a preferred node affinity, so kube-scheduler agrees.
Placement = Literal["binpack", "spread", "firstFit"]


class NodePool(Wire, kw_only=True, forbid_unknown_fields=True):
    """The node pool behind a flavor that an autoscaler (cluster-autoscaler, Karpenter, the simulated one) grows from
    ``min_nodes`` to ``max_nodes``: the shape of one new node and how long one takes to come. Admission counts the
    nodes the pool may still add as room (``rules.node_pools.reach``), so an op onto an empty pool is admitted and
    its pending pods make the autoscaler add nodes; a node that has not come by ``provisioning_timeout_seconds``
    releases the attempt, which is retried (``node_not_provisioned``)."""

    name: str  # unique among the configuration's pools; what `why` and `cost` name
    # the pool's own labels (e.g. karpenter.sh/nodepool: gpu): a node is of the pool when its labels hold the
    # flavor's nodeLabels AND these
    node_labels: dict[str, str] = {}
    allocatable: Annotated[dict[str, Quantity], msgspec.Meta(min_length=1)]  # one new node: {nvidia.com/gpu: 8, ...}
    taints: list[dict[str, Any]] = []  # a new node's taints (the flavor's tolerations must tolerate them)
    min_nodes: NonNegInt = 0
    max_nodes: PositiveInt
    provisioning_seconds: Annotated[float, msgspec.Meta(gt=0)] = 300.0  # expected time to a Ready node
    provisioning_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 900.0  # no node by then: released, retried
    # the simulated autoscaler's only (a real cluster's autoscaler has its own --scale-down-unneeded-time)
    scale_down_unneeded_seconds: Annotated[float, msgspec.Meta(gt=0)] = 600.0


class Flavor(Wire, kw_only=True, forbid_unknown_fields=True):
    """A kind of node: what labels select it, what taints its pods must tolerate, and how its pods are placed
    (``placement``; unset: the configuration's; ``topology_key``: a gang kept within one domain)."""

    name: str
    node_labels: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    placement: Placement | None = None
    # a node label whose value names a topology domain (a rack, an NVLink domain): a gang's pods are placed
    # within one domain when one can take them all (Kueue's topology-aware scheduling, preferred mode)
    topology_key: str | None = None
    agent: str | None = None  # the agent (a dispatcher with its own cluster) whose nodes it selects; None: the queue's
    pool: NodePool | None = None  # the autoscaled pool behind it; None: the nodes that exist are all it has


class FlavorQuota(Wire, kw_only=True, forbid_unknown_fields=True):
    name: str  # a Flavor's name, or "default" for a resource without flavors
    nominal: Quantity
    borrowing_limit: Quantity | None = None  # None: may borrow all the cohort can lend
    lending_limit: Quantity | None = None  # None: may lend everything above `guaranteed`
    guaranteed: Quantity | None = None  # never lent; default 0


class ResourceQuota(Wire, kw_only=True, forbid_unknown_fields=True):
    resource: str  # "nvidia.com/gpu", "cpu", "memory", ...
    flavors: list[FlavorQuota]


class Cohort(Wire, kw_only=True, forbid_unknown_fields=True):
    """A cohort declared with a ``parent`` cohort and quota of its own (Kueue's Cohort object). Its quota lines are a
    queue's: ``nominal`` is shared by every queue under it, ``borrowingLimit`` caps what the subtree may borrow from
    the parent's, ``lendingLimit``/``guaranteed`` what the subtree's unused quota the parent may lend elsewhere
    (limits need a parent). A queue's ``cohort`` may name a cohort nobody declares: a root with no quota of its own.
    """

    name: str
    parent: str | None = None  # None: a root
    resources: list[ResourceQuota] = []
    description: str = ""


class PriorityClass(Wire, kw_only=True, forbid_unknown_fields=True):
    """A named op priority (queueing and preemption), separate from the pod's priorityClassName.
    ``value`` is within +-``proto.limits.MAX_PRIORITY`` (checked when the configuration is loaded)."""

    name: str
    value: int
    description: str = ""


class Preemption(Wire, kw_only=True, forbid_unknown_fields=True):
    """When an op that does not fit may take room from running ops (Kueue's policies)."""

    within_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "LowerPriority"
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "LowerPriority"  # from borrowers of its quota
    cooldown_seconds: Annotated[float, msgspec.Meta(ge=0)] = 60.0  # a victim is not preempted again sooner
    min_runtime_seconds: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # a just-started op is protected


class Aging(Wire, kw_only=True, forbid_unknown_fields=True):
    """A waiting op's effective priority grows by ``per_minute`` per minute waited, up to ``cap``."""

    per_minute: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    cap: Annotated[float, msgspec.Meta(ge=0)] | None = None  # None: no cap


class ApprovalPolicy(Wire, kw_only=True, forbid_unknown_fields=True):
    """Hold an op for `opsched approve` when it would cost or use more than this (no peer has it)."""

    cost_above: Annotated[float, msgspec.Meta(ge=0)] | None = None
    gpus_above: Annotated[float, msgspec.Meta(ge=0)] | None = None  # accelerators of all its pods


class RetryBackoff(Wire, kw_only=True, forbid_unknown_fields=True):
    """Delay before retry n (n = 1, 2, ...): min(max, base * factor ** (n - 1)) seconds."""

    base_seconds: Annotated[float, msgspec.Meta(ge=0)] = 10.0
    factor: Annotated[float, msgspec.Meta(ge=1)] = 2.0
    max_seconds: Annotated[float, msgspec.Meta(ge=0)] = 600.0


class Budget(Wire, kw_only=True, forbid_unknown_fields=True):
    """Spend allowed per calendar UTC window (day from 00:00, week from Monday, month from the 1st)
    for one queue, one project or one node pool (its nodes, busy or idle): money, GPU-hours, or both. Admission
    stops admitting an op when the window's spend plus the op's estimate would exceed it (``proto.windows``); a
    spent pool budget adds no new nodes of the pool (only its existing nodes take ops)."""

    scope: Literal["queue", "project", "pool"]  # pool: money (and GPU-hours) spent on a node pool's nodes
    name: str
    window: Literal["day", "week", "month"]
    money: Annotated[float, msgspec.Meta(ge=0)] | None = None
    gpu_hours: Annotated[float, msgspec.Meta(ge=0)] | None = None


class ConnectionSecret(Wire, kw_only=True, forbid_unknown_fields=True):
    """The Kubernetes Secret (in the namespace of the queue's pods) holding a connection's credentials: only its
    name is ever on the bus. A container that gets the connection has it mounted read-only at ``mount_path``;
    else each key of ``items`` as an env var of that name (``secretKeyRef``); else every key (``envFrom``).
    A git step mounts it for ``git`` whatever these say (keys ``username`` and ``password``, or
    ``ssh-privatekey`` and optionally ``known_hosts``: Kubernetes' basic-auth and ssh-auth secret types)."""

    name: str
    items: list[str] = []
    mount_path: str | None = None


class GitSchema(Wire, kw_only=True, forbid_unknown_fields=True):
    """A git connection's repository: what a git init step naming the connection clones, unless it says otherwise."""

    url: str
    revision: str | None = None
    flags: list[str] = []


class Connection(Wire, kw_only=True, forbid_unknown_fields=True):
    """Polyaxon's connection, declared by the admin: a name ops refer to (``connections:`` of a run, or an init
    step's ``connection:``), and what a container that names it gets: ``env`` and the ``secret``. A ``git``
    connection also names a repository (``schema``) that a git init step clones with its credentials; a
    ``custom`` one only gives credentials. ``queues``: the queues whose ops may name it (empty: every queue)."""

    name: str
    kind: Literal["git", "custom"]
    schema_: GitSchema | None = msgspec.field(default=None, name="schema")
    secret: ConnectionSecret | None = None
    env: list[EnvVar] = []
    description: str = ""
    queues: list[str] = []


class Services(Wire, kw_only=True, forbid_unknown_fields=True):
    """A queue's settings for its service ops (``OpSpec.run_kind`` ``service``: notebooks, TensorBoard, ...).
    ``default_priority_class``: the class of a service op that names neither a class nor a priority (before the
    queue's own ``default_priority_class``); ``default_preemptible``: the ``preemptible`` of a service op that does
    not set it (an op's own value is honoured); both applied once, when admission accepts the op (its recorded
    spec says them). ``max_services``: at most this many of its service ops admitted and not ended at once (the
    next waits, ``max_services``); None: no cap beyond the queue's concurrency."""

    max_services: PositiveInt | None = None
    default_priority_class: str | None = None
    default_preemptible: bool = True


class Queue(Wire, kw_only=True, forbid_unknown_fields=True):
    """One queue. ``default_priority_class``: the priority of its ops that name neither a class nor a number.
    ``max_priority_class``: the highest priority an op of this queue may have, by its own number
    (``priority``) or by the class it names (``priorityClass``): that class's value; unset, the highest
    class of the configuration, else ``proto.limits.MAX_PRIORITY``. An op above it is rejected at submit
    (``priority_too_high``, naming the field, its value and the bound). Both must name a class of
    ``priorityClasses`` (checked when the configuration is loaded), the default no higher than the maximum."""

    name: str
    concurrency: PositiveInt | None = None  # None: unlimited
    priority: int = 0
    cohort: str | None = None
    max_queued: NonNegInt | None = None  # None: unlimited
    namespace: str | None = None
    artifacts_root: str | None = None  # {{ globals.run_artifacts_path }} = <root>/<op id>; None: the config's
    # a pod kube-scheduler reports Unschedulable this long is deleted and its op requeued (with back-off)
    pending_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    cost_quota: Annotated[float, msgspec.Meta(ge=0)] | None = None
    resources: list[ResourceQuota] = []
    default_priority_class: str | None = None
    max_priority_class: str | None = None  # the highest priority of its ops; None: the highest class, else MAX_PRIORITY
    preemption: Preemption = msgspec.field(default_factory=Preemption)
    aging: Aging = msgspec.field(default_factory=Aging)
    weight: Annotated[float, msgspec.Meta(gt=0)] = 1.0  # fair-sharing weight within its cohort
    approval: ApprovalPolicy = msgspec.field(default_factory=ApprovalPolicy)
    pod_security: Level = DEFAULT_LEVEL  # its pods' Pod Security Standards level (``rules.pod_security``)
    allow_secret_volumes: bool = False  # `secret` volumes (and projected secrets) in its pods; refused unless set
    # What its pods may name (at baseline and restricted; ``rules.pod_security``): each unset, none
    service_accounts: list[str] = []  # serviceAccountName
    allow_service_account_token: bool = False  # automountServiceAccountToken true (or unset with an account named)
    priority_class_names: list[str] = []  # the pods' priorityClassName (Kubernetes', not priorityClasses above)
    allow_volumes: list[AllowableVolume] = []  # persistentVolumeClaim, nfs volumes
    image_pull_secrets: list[str] = []  # imagePullSecrets
    agent: str | None = None  # the agent that runs its ops (flavors may name their own); None: the default agent
    # its order within equal (effective) priority: requesters interleaved round-robin, or first come first served
    ordering: Literal["fair-by-user", "fifo"] = "fair-by-user"
    max_pending_per_user: NonNegInt = DEFAULT_MAX_PENDING_PER_USER  # a requester's waiting ops in it; 0: no cap
    init_image: str | None = None  # the image of its ops' git and file init steps; None: the configuration's
    services: Services = msgspec.field(default_factory=Services)  # its service ops' defaults and cap


def not_covered(queue: Queue, request: dict[str, float]) -> list[str]:
    """The accelerators (``proto.resources.is_accelerator``: GPUs, TPUs, any extended resource) ``request`` asks
    for that ``queue`` sets no quota for, as Kueue refuses what a ClusterQueue does not cover. A queue that lists no
    ``resources`` at all sets no quota and limits nothing (the built-in ``default``): none is refused there."""
    if not queue.resources:
        return []
    covered = {q.resource for q in queue.resources}
    return sorted(r for r, amount in request.items() if amount > 0 and is_accelerator(r) and r not in covered)


class FairSharing(Wire, kw_only=True, forbid_unknown_fields=True):
    """Order the queues of a cohort by weighted dominant-resource share (current use plus decayed
    past use) instead of by queue priority."""

    enabled: bool = False
    half_life_seconds: Annotated[float, msgspec.Meta(gt=0)] = 3600.0
    history_weight: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # 0: current usage only


class Agent(Wire, kw_only=True, forbid_unknown_fields=True):
    """A dispatcher deployment with its own cluster (or a namespace of one): Polyaxon's agent. Its dispatcher runs
    with ``OPSCHED_AGENT=<name>``; queues and flavors name it (``agent: <name>``), polyaxonfiles as ``agent/queue``."""

    name: str
    heartbeat_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0  # silent longer: no new ops for it
    lost_after_seconds: Annotated[float, msgspec.Meta(gt=0)] = 120.0  # silent longer: its running ops are lost


class QueuesConfig(Wire, kw_only=True, forbid_unknown_fields=True):
    queues: list[Queue] = msgspec.field(default_factory=lambda: [Queue(name="default", concurrency=10)])
    cohorts: list[Cohort] = []  # nested cohorts (parent, quota); a queue's cohort needs no entry here
    default_queue: str = "default"
    project_queues: dict[str, str] = {}  # project -> its default queue
    flavors: list[Flavor] = []
    placement: Placement = "binpack"  # for accelerator pods whose flavor sets none (and queues without flavors)
    agents: list[Agent] = []  # besides the default agent (the dispatcher without OPSCHED_AGENT)
    default_agent: str | None = None  # the default agent's name, as polyaxonfiles write it (``<name>/<queue>``)
    reject_unfittable: bool = True  # reject ops that no node could ever fit (once nodes are known)
    priority_classes: list[PriorityClass] = []
    fair_sharing: FairSharing = msgspec.field(default_factory=FairSharing)
    retry_backoff: RetryBackoff = msgspec.field(default_factory=RetryBackoff)
    budgets: list[Budget] = []
    artifacts_root: str = "/plx-context/artifacts"  # Polyaxon's; a queue may set its own
    access: Access = msgspec.field(default_factory=Access)  # who may act on which project's ops (proto.access)
    connections: list[Connection] = []  # what ops may name for credentials and repositories (Polyaxon's connections)
    init_image: str = DEFAULT_INIT_IMAGE  # the image of the git and file init steps; a queue may set its own
