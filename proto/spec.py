"""The operation spec as carried on the bus.

This is what the edge (``opsched.polyaxonfile``) produces from a Polyaxon file after validation.
Fields evolve only by adding defaulted fields. Names are camelCase on the wire.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import msgspec

from opsched.proto import spec_checks
from opsched.proto.limits import (
    MAX_CONNECTIONS,
    MAX_DURATION_S,
    MAX_ENV_PER_CONTAINER,
    MAX_HOOKS,
    MAX_INIT_STEPS,
    MAX_LIST_ITEMS,
    MAX_PRIORITY,
    MAX_REPLICA_GROUPS,
    MAX_RETRIES,
    MAX_SERVICE_PORTS,
    MAX_SIDECARS,
    MAX_SLOTS_PER_WORKER,
    MAX_TAGS,
)

# Plain numbers and lengths, bounded on decode by msgspec; names, quantities and rules across fields are
# checked on decode and construction by ``OpSpec.__post_init__`` (``proto.spec_checks``).
Seconds = Annotated[int, msgspec.Meta(ge=0, le=MAX_DURATION_S)]
Items = msgspec.Meta(max_length=MAX_LIST_ITEMS)

# Polyaxon's context: an emptyDir mounted at CONTEXT_ROOT in every container of a pod that has init steps or
# sidecars; init steps write under ARTIFACTS_PATH unless they name a ``path`` ({{ globals.context_path }},
# {{ globals.artifacts_path }}).
CONTEXT_ROOT = "/plx-context"
ARTIFACTS_PATH = f"{CONTEXT_ROOT}/artifacts"
DEFAULT_FILENAME = "file"  # an init file step's file when it names none


class Wire(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, forbid_unknown_fields=False):
    """Base of every struct on the wire."""


class EnvVar(Wire, kw_only=True):
    name: str
    value: str = ""


class Resources(Wire, kw_only=True):
    """Kubernetes quantities as strings, e.g. {"nvidia.com/gpu": "1", "memory": "4Gi", "cpu": "500m"}."""

    limits: dict[str, str] = {}
    requests: dict[str, str] = {}


class Container(Wire, kw_only=True):
    image: str
    name: str = "main"
    command: Annotated[list[str], Items] = []
    args: Annotated[list[str], Items] = []
    env: Annotated[list[EnvVar], msgspec.Meta(max_length=MAX_ENV_PER_CONTAINER)] = []
    resources: Resources = msgspec.field(default_factory=Resources)
    working_dir: str | None = None
    security_context: dict[str, Any] | None = None
    volume_mounts: Annotated[list[dict[str, Any]], Items] = []
    image_pull_policy: str | None = None
    lifecycle: dict[str, Any] | None = None  # postStart / preStop handlers
    ports: Annotated[list[dict[str, Any]], Items] = []
    liveness_probe: dict[str, Any] | None = None
    readiness_probe: dict[str, Any] | None = None
    startup_probe: dict[str, Any] | None = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None


class Environment(Wire, kw_only=True):
    """Polyaxon's ``run.environment``: where and how the pod is placed."""

    node_selector: Annotated[dict[str, str], Items] = {}
    tolerations: Annotated[list[dict[str, Any]], Items] = []
    affinity: dict[str, Any] | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    priority_class_name: str | None = None
    service_account_name: str | None = None
    automount_service_account_token: bool | None = None  # None: false, unless a service account is named
    volumes: Annotated[list[dict[str, Any]], Items] = []
    image_pull_secrets: Annotated[list[str], Items] = []
    security_context: dict[str, Any] | None = None  # the pod's (runAsUser, fsGroup, ...)
    dns_policy: str | None = None
    dns_config: dict[str, Any] | None = None
    host_aliases: Annotated[list[dict[str, Any]], Items] = []
    restart_policy: str | None = None  # Never (default) or OnFailure


class Culling(Wire, kw_only=True):
    """Polyaxon's ``termination.culling`` (a service's): stopped once nobody used it for ``timeout`` seconds, from
    its start (``running``) or its last ``opsched touch`` (``touched``)."""

    timeout: Annotated[int, msgspec.Meta(ge=1, le=MAX_DURATION_S)]


class Termination(Wire, kw_only=True):
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)] | None = None
    timeout: Annotated[int, msgspec.Meta(ge=1, le=MAX_DURATION_S)] | None = None  # seconds of running, then killed
    ttl: Seconds | None = None  # seconds after the end before the pod is deleted
    culling: Culling | None = None  # a service's idle limit


SERVICE_KIND = "service"  # ``OpSpec.run_kind`` of a service (Polyaxon's ``run.kind: service``)
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]


class ServiceSpec(Wire, kw_only=True):
    """A service's own fields (Polyaxon's V1Service): ``replicas`` identical pods that run until stopped, behind a
    ClusterIP Service on ``ports`` (``rules.serving``)."""

    ports: Annotated[list[Port], msgspec.Meta(min_length=1, max_length=MAX_SERVICE_PORTS)]
    replicas: Annotated[int, msgspec.Meta(ge=1)] = 1


class Cache(Wire, kw_only=True):
    disable: bool | None = None
    ttl: Seconds | None = None
    io: Annotated[list[str], Items] | None = None
    sections: Annotated[list[str], Items] | None = None


class GitInit(Wire, kw_only=True):
    """Clone ``url`` (else its connection's) at ``revision`` (else its connection's, else the default branch) into
    ``<path>/<name>``: the connection's name, else the repository's (the URL's last segment without ``.git``).
    ``flags`` are passed to ``git clone``, each split like a shell would (``"--depth 1"`` is two arguments)."""

    url: str | None = None
    revision: str | None = None
    flags: Annotated[list[str], Items] = []


class FileInit(Wire, kw_only=True):
    """Write ``content`` to ``<path>/<filename>`` (default ``file``), then ``chmod`` it if set (``+x``, ``755``)."""

    content: str
    filename: str | None = None
    chmod: str | None = None


class InitStep(Wire, kw_only=True):
    """One of Polyaxon's ``init`` entries: an init container run before the pod's containers, in order. Exactly one
    of ``git``, ``file`` (both run opsched's init image) or ``container`` (the user's own). ``connection``: an
    admin-declared connection (``proto.queues.Connection``) whose credentials the step gets (a git step: its
    repository too). ``path``: where it writes (absolute; default ``ARTIFACTS_PATH``); a path outside
    ``CONTEXT_ROOT`` gets its own emptyDir, mounted there in every container of the pod."""

    git: GitInit | None = None
    file: FileInit | None = None
    container: Container | None = None
    connection: str | None = None
    path: str | None = None

    def container_name(self, index: int) -> str:
        """The name of its init container: the user's own, else ``init-git-<index>``/``init-file-<index>``."""
        if self.container is not None:
            return self.container.name
        return f"init-{'git' if self.git is not None else 'file'}-{index}"

    def target(self) -> str:
        """The directory it writes into."""
        return self.path or ARTIFACTS_PATH

    def destination(self) -> str | None:
        """What a git or file step writes: ``<target>/<name>`` (a clone: the connection's name, else the
        repository's; a file: its filename); None for a container step, or a git step it cannot name."""
        if self.file is not None:
            name = self.file.filename or DEFAULT_FILENAME
        elif self.git is not None:
            name = self.connection or repo_name(self.git.url or "")
        else:
            return None
        return f"{self.target().rstrip('/')}/{name}" if name else None


def repo_name(url: str) -> str:
    """A repository's name from its URL, as Polyaxon names a clone without a connection (``…/models.git`` →
    ``models``); "" when the URL has none."""
    last = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return last[:-4] if last.endswith(".git") else last


class ReplicaGroup(Wire, kw_only=True):
    """Extra pods of a distributed op (a replica role of Polyaxon's tfjob, mpijob, pytorchjob, ...: ``name`` is the
    role), started as one gang with the main pod. Its pods are indexed from 0, or from 1 when ``name`` is the main
    pod's role (the main pod is index 0: ``rules.replica_roles``). ``init``, ``sidecars`` and ``connections``: its
    pods' own, as ``OpSpec``'s are the main pod's. ``restart_policy``: its pods' (Never when None)."""

    name: str
    count: int = 1
    container: Container
    restart_policy: str | None = None
    init: Annotated[list[InitStep], msgspec.Meta(max_length=MAX_INIT_STEPS)] = []
    sidecars: Annotated[list[Container], msgspec.Meta(max_length=MAX_SIDECARS)] = []
    connections: Annotated[list[str], msgspec.Meta(max_length=MAX_CONNECTIONS)] = []


class OpSpec(Wire, kw_only=True):
    """One operation: a job with one main container (and its pod's init steps and sidecars), plus its scheduling
    fields."""

    name: str
    container: Container
    project: str = "default"
    queue: str | None = None
    agent: str | None = None  # Polyaxon's ``agent/queue``: the agent its queue must run on ("": the default one)
    priority: Annotated[int, msgspec.Meta(ge=-MAX_PRIORITY, le=MAX_PRIORITY)] = 0
    params: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    environment: Environment = msgspec.field(default_factory=Environment)
    termination: Termination = msgspec.field(default_factory=Termination)
    cache: Cache = msgspec.field(default_factory=Cache)
    is_approved: bool | None = None
    conditions: str | None = None
    cost: float | None = None
    tags: Annotated[list[str], msgspec.Meta(max_length=MAX_TAGS)] = []
    run_kind: str = "job"
    component_hash: str | None = None
    priority_class: str | None = None  # a named class from the queue config; not the pod's priorityClassName
    # None: not said. Admission writes its queue's services.defaultPreemptible into a service op's spec at submit
    # (``services.admission.policies.service_ops``) and reads any other None as true (``OpRecord.preemptible``)
    preemptible: bool | None = None
    replicas: Annotated[list[ReplicaGroup], msgspec.Meta(max_length=MAX_REPLICA_GROUPS)] = []  # gang: admitted and started all-or-nothing with `container`
    batch: str | None = None  # a group submitted together (e.g. a sweep)
    batch_concurrency: Annotated[int, msgspec.Meta(ge=1)] | None = None  # at most this many ops of the batch run at once
    to_env: dict[str, str] = {}  # Polyaxon's toEnv: env var name -> the param/input/output whose value it takes
    iteration: Annotated[int, msgspec.Meta(ge=0)] | None = None  # a sweep trial's index in its batch ({{ globals.iteration }})
    description: str | None = None  # put on its pods as the annotation opsched.io/description
    clean_pod_policy: str | None = None  # a gang's finished pods: "All" deleted at its end, "Running" (default) kept
    main_role: str | None = None  # the main pod's replica role (None: its run kind's first: ``rules.replica_roles``)
    slots_per_worker: Annotated[int, msgspec.Meta(ge=1, le=MAX_SLOTS_PER_WORKER)] | None = None  # an mpijob's hostfile slots
    ignored: Annotated[list[str], Items] = []  # fields of its file with no effect in opsched (warned by the CLI; shown by ops/why)
    hooks: Annotated[list[Hook], msgspec.Meta(max_length=MAX_HOOKS)] = []  # follow-up ops run when it ends
    # the main pod's init containers (in order, before its containers), its sidecars (after the main container) and
    # the connections its main container gets (their env and secret: ``proto.queues.Connection``)
    init: Annotated[list[InitStep], msgspec.Meta(max_length=MAX_INIT_STEPS)] = []
    sidecars: Annotated[list[Container], msgspec.Meta(max_length=MAX_SIDECARS)] = []
    connections: Annotated[list[str], msgspec.Meta(max_length=MAX_CONNECTIONS)] = []
    service: ServiceSpec | None = None  # set exactly when ``run_kind`` is ``SERVICE_KIND``
    notifications: Annotated[list[Notification], msgspec.Meta(max_length=MAX_HOOKS)] = []  # delivered by the notifier

    def __post_init__(self) -> None:
        spec_checks.check_spec(self)

    @property
    def main_pods(self) -> int:
        """How many pods run the main container: a service's replicas, else one (a gang's replica groups apart)."""
        return self.service.replicas if self.service is not None else 1


class Notification(Wire, kw_only=True):
    """Polyaxon's ``plugins.notifications`` entry: when the op's event fires ``trigger``
    (``proto.lifecycle.HOOK_TRIGGERS``), the notifier delivers it to each of ``connections`` — names of the admin's
    connections (docs/notifications.md), never urls or secrets."""

    trigger: str = "done"
    connections: Annotated[list[str], msgspec.Meta(max_length=MAX_CONNECTIONS)]


class Hook(Wire, kw_only=True):
    """Polyaxon's hook: when its op ends as ``trigger`` says (``proto.lifecycle.HOOK_TRIGGERS``), ``spec`` is submitted as a follow-up op (in the same
    queue unless ``spec.queue`` names one). The strings of ``spec.params``/``spec.inputs`` and ``spec.conditions``
    are evaluated in the finished op's context (its ``globals``, params, outputs and ``status``), as Polyaxon does; what
    the follow-up op runs renders in its own. A hook's spec has no hooks: a hook never triggers another."""

    trigger: str
    spec: OpSpec


def all_containers(spec: OpSpec) -> Iterator[tuple[tuple[str | int, ...], Container]]:
    """(path, container) of every container of the op's pods: each pod's main container, its init steps' and its
    sidecars (the main pod's, then each replica group's)."""
    pods: list[tuple[tuple[str | int, ...], OpSpec | ReplicaGroup]] = [((), spec)]
    pods += [(("replicas", i), g) for i, g in enumerate(spec.replicas)]
    for at, pod in pods:
        yield (*at, "container"), pod.container
        for i, step in enumerate(pod.init):
            if step.container is not None:
                yield (*at, "init", i, "container"), step.container
        for i, sidecar in enumerate(pod.sidecars):
            yield (*at, "sidecars", i), sidecar
