"""The operation spec as carried on the bus.

This is what the edge (``opsched.polyaxonfile``) produces from a Polyaxon file after validation.
Fields evolve only by adding defaulted fields. Names are camelCase on the wire.
"""
from __future__ import annotations

from typing import Any

import msgspec


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
    command: list[str] = []
    args: list[str] = []
    env: list[EnvVar] = []
    resources: Resources = msgspec.field(default_factory=Resources)
    working_dir: str | None = None
    security_context: dict[str, Any] | None = None
    volume_mounts: list[dict[str, Any]] = []
    image_pull_policy: str | None = None
    lifecycle: dict[str, Any] | None = None  # postStart / preStop handlers
    ports: list[dict[str, Any]] = []
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

    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    affinity: dict[str, Any] | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    priority_class_name: str | None = None
    service_account_name: str | None = None
    automount_service_account_token: bool | None = None  # None: false, unless a service account is named
    volumes: list[dict[str, Any]] = []
    image_pull_secrets: list[str] = []
    security_context: dict[str, Any] | None = None  # the pod's (runAsUser, fsGroup, ...)
    dns_policy: str | None = None
    dns_config: dict[str, Any] | None = None
    host_aliases: list[dict[str, Any]] = []
    restart_policy: str | None = None  # Never (default) or OnFailure


class Termination(Wire, kw_only=True):
    max_retries: int | None = None
    timeout: int | None = None  # seconds of running before the op is killed
    ttl: int | None = None  # seconds after the end before the pod is deleted


class Cache(Wire, kw_only=True):
    disable: bool | None = None
    ttl: int | None = None
    io: list[str] | None = None
    sections: list[str] | None = None


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
    priority: int = 0
    params: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    environment: Environment = msgspec.field(default_factory=Environment)
    termination: Termination = msgspec.field(default_factory=Termination)
    cache: Cache = msgspec.field(default_factory=Cache)
    is_approved: bool | None = None
    conditions: str | None = None
    cost: float | None = None
    tags: list[str] = []
    run_kind: str = "job"
    component_hash: str | None = None
    priority_class: str | None = None  # a named class from the queue config; not the pod's priorityClassName
    preemptible: bool = True
    replicas: list[ReplicaGroup] = []  # gang: admitted and started all-or-nothing with `container`
    batch: str | None = None  # a group submitted together (e.g. a sweep)
    batch_concurrency: int | None = None  # at most this many ops of the batch run at once
    to_env: dict[str, str] = {}  # Polyaxon's toEnv: env var name -> the param/input/output whose value it takes
    iteration: int | None = None  # a sweep trial's index in its batch ({{ globals.iteration }})
    description: str | None = None  # put on its pods as the annotation opsched.io/description
    clean_pod_policy: str | None = None  # a gang's finished pods: "All" deleted at its end, "Running" (default) kept
    ignored: list[str] = []  # fields of its file with no effect in opsched (warned by the CLI; shown by ops/why)
