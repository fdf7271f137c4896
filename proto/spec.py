"""The operation spec as carried on the bus.

This is what the edge (``opsched.polyaxonfile``) produces from a Polyaxon file after validation.
Fields evolve only by adding defaulted fields. Names are camelCase on the wire.
"""
from __future__ import annotations

from typing import Annotated, Any

import msgspec

from opsched.proto import spec_checks
from opsched.proto.limits import (
    MAX_DURATION_S,
    MAX_ENV_PER_CONTAINER,
    MAX_HOOKS,
    MAX_LIST_ITEMS,
    MAX_PRIORITY,
    MAX_REPLICA_GROUPS,
    MAX_RETRIES,
    MAX_TAGS,
)

# Plain numbers and lengths, bounded on decode by msgspec; names, quantities and rules across fields are
# checked on decode and construction by ``OpSpec.__post_init__`` (``proto.spec_checks``).
Seconds = Annotated[int, msgspec.Meta(ge=0, le=MAX_DURATION_S)]
Items = msgspec.Meta(max_length=MAX_LIST_ITEMS)


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


class Termination(Wire, kw_only=True):
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)] | None = None
    timeout: Annotated[int, msgspec.Meta(ge=1, le=MAX_DURATION_S)] | None = None  # seconds of running, then killed
    ttl: Seconds | None = None  # seconds after the end before the pod is deleted


class Cache(Wire, kw_only=True):
    disable: bool | None = None
    ttl: Seconds | None = None
    io: Annotated[list[str], Items] | None = None
    sections: Annotated[list[str], Items] | None = None


class ReplicaGroup(Wire, kw_only=True):
    """Extra pods of a distributed op (e.g. Polyaxon's pytorchjob workers), started as one gang
    with the main container (the master)."""

    name: str
    count: int = 1
    container: Container


class OpSpec(Wire, kw_only=True):
    """One operation: a job with one container, plus its scheduling fields."""

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
    preemptible: bool = True
    replicas: Annotated[list[ReplicaGroup], msgspec.Meta(max_length=MAX_REPLICA_GROUPS)] = []  # gang: admitted and started all-or-nothing with `container`
    batch: str | None = None  # a group submitted together (e.g. a sweep)
    batch_concurrency: Annotated[int, msgspec.Meta(ge=1)] | None = None  # at most this many ops of the batch run at once
    to_env: dict[str, str] = {}  # Polyaxon's toEnv: env var name -> the param/input/output whose value it takes
    iteration: Annotated[int, msgspec.Meta(ge=0)] | None = None  # a sweep trial's index in its batch ({{ globals.iteration }})
    description: str | None = None  # put on its pods as the annotation opsched.io/description
    clean_pod_policy: str | None = None  # a gang's finished pods: "All" deleted at its end, "Running" (default) kept
    ignored: Annotated[list[str], Items] = []  # fields of its file with no effect in opsched (warned by the CLI; shown by ops/why)
    hooks: Annotated[list[Hook], msgspec.Meta(max_length=MAX_HOOKS)] = []  # follow-up ops run when it ends

    def __post_init__(self) -> None:
        spec_checks.check_spec(self)


class Hook(Wire, kw_only=True):
    """Polyaxon's hook: when its op ends as ``trigger`` says (``proto.lifecycle.HOOK_TRIGGERS``), ``spec`` is submitted as a follow-up op (in the same
    queue unless ``spec.queue`` names one). The strings of ``spec.params``/``spec.inputs`` and ``spec.conditions``
    are evaluated in the finished op's context (its ``globals``, params, outputs and ``status``), as Polyaxon does; what
    the follow-up op runs renders in its own. A hook's spec has no hooks: a hook never triggers another."""

    trigger: str
    spec: OpSpec
