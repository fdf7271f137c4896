"""Models of the ``run`` section: a job, or a pytorchjob (a master and a worker replica section).

  * ``run.kind: pytorchjob`` (Polyaxon's V1PytorchJob): ``master`` and ``worker`` are V1KFReplica
    sections {replicas, container}. The master's container is ``OpSpec.container`` (a master is
    required; its ``replicas`` must be 1 or absent); the worker section, if any, becomes
    ``OpSpec.replicas = [ReplicaGroup(name="worker", count=replicas (default 1, must be >= 1),
    container)]``, one gang with the master. Replica containers are validated like a job's, and
    errors are located under ``run.master.container...`` / ``run.worker.container...``.
    Environment: Polyaxon has no run-level ``environment``/``volumes`` for a pytorchjob (they are
    per replica), and OpSpec has no per-replica environment yet, so both ``run.environment`` and
    ``run.<replica>.environment``/``volumes`` are errors, and a pytorchjob gets the default
    environment (admission still adds its flavor's node selector and tolerations). ``init``,
    ``sidecars`` and ``connections`` are per replica (``models_init``): the master's are the main
    pod's (``OpSpec.init``, ...), the worker's its group's (``ReplicaGroup.init``, ...); at the run
    level of a pytorchjob they are errors, as in Polyaxon.
    ``cleanPodPolicy``: Running (default: workers still running when the job ends are deleted) or All
    (every pod of the gang is deleted once it ends; OpSpec.clean_pod_policy); None is refused.
    ``schedulingPolicy``, ``elasticPolicy`` and ``nProcPerNode`` are errors (not supported yet).
  * ``run.kind: service`` (Polyaxon's V1Service): a job's fields (container, environment, volumes, init, sidecars,
    connections) plus ``ports`` (required: the ports it serves, each once), ``replicas`` (identical pods, default
    1), ``rewritePath`` (warned: opsched has no gateway adding a base URL, so requests reach the service at its
    root whatever it says) and ``isExternal`` (false, the default, is what opsched does; true is refused: no
    exposure outside the cluster). Its ``environment.restartPolicy`` is ``Always`` (the default for a service:
    its containers restart until it is stopped); Never and OnFailure are refused. → ``OpSpec.service``.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import Int, Model
from opsched.polyaxonfile.models_container import (
    ContainerModel,
    EnvironmentModel,
    check_metadata,
    check_resources,
)
from opsched.polyaxonfile.models_init import Connections, Init, Sidecars, container_of, pod_parts_problems
from opsched.proto.limits import MAX_PODS_PER_OP, MAX_SERVICE_PORTS


class JobRunModel(Model):
    kind: Literal["job"]
    container: ContainerModel
    environment: EnvironmentModel = EnvironmentModel()
    volumes: list[dict[str, Any]] = []
    init: Init = []
    sidecars: Sidecars = []
    connections: Connections = []


def _service_restart_policy(value: Any) -> Any:
    if value in ("Never", "OnFailure"):
        raise ValueError(f"restartPolicy: {value} would let a service end on its own; a service runs until it is "
                         "stopped (or culled), its containers restarted Always (the default: leave it out)")
    return value


class ServiceEnvironmentModel(EnvironmentModel):
    """A service's environment: a job's, but its pods restart Always."""

    restart_policy: Annotated[Literal["Always"], BeforeValidator(_service_restart_policy)] | None = None  # type: ignore[assignment]


def _external(value: Any) -> Any:
    if value is True:
        raise ValueError("isExternal: true would expose the service outside the cluster without authentication; "
                         "opsched gives a service a ClusterIP Service only, reached with `kubectl port-forward` "
                         "(leave it out, or false)")
    return value


class ServiceRunModel(JobRunModel):
    """Polyaxon's V1Service: a job's pod (``JobRunModel``) served on ``ports`` by ``replicas`` pods."""

    kind: Literal["service"]  # type: ignore[assignment]
    environment: ServiceEnvironmentModel = ServiceEnvironmentModel()  # type: ignore[assignment]
    ports: Annotated[list[Annotated[Int, Field(ge=1, le=65535)]], Field(min_length=1, max_length=MAX_SERVICE_PORTS)]
    replicas: Annotated[Int, Field(ge=1, le=MAX_PODS_PER_OP)] | None = None
    rewrite_path: bool | None = None
    is_external: Annotated[bool, BeforeValidator(_external)] | None = None


class KFReplicaModel(Model):
    """Polyaxon's V1KFReplica: one replica section (master, worker) of a distributed run.

    ``environment`` and ``volumes`` are read only to be rejected by ``check_run`` (per-replica
    placement is not supported yet); ``init``, ``sidecars`` and ``connections`` are its pods' own.
    """

    replicas: Int | None = None
    container: ContainerModel
    environment: Any = None
    volumes: Any = None
    init: Init = []
    sidecars: Sidecars = []
    connections: Connections = []


def _clean_pod_policy(value: Any) -> Any:
    if value == "None":
        raise ValueError("cleanPodPolicy: None would leave the workers of an ended job running, holding GPUs "
                         "their quota no longer counts; use Running (the default) or All")
    return value


class PytorchJobRunModel(Model):
    """Polyaxon's V1PytorchJob. It has no run-level environment or volumes (they are per
    replica); both are read only to be rejected by ``check_run`` with a clear message."""

    kind: Literal["pytorchjob"]
    clean_pod_policy: Annotated[Literal["All", "Running"], BeforeValidator(_clean_pod_policy)] | None = None
    master: KFReplicaModel
    worker: KFReplicaModel | None = None
    environment: Any = None
    volumes: Any = None
    init: Any = None
    sidecars: Any = None
    connections: Any = None


_REPLICA_UNSUPPORTED = {
    "environment": ("per-replica environment is not supported yet; leave it out (admission still "
                    "adds the flavor's node selector and tolerations)"),
    "volumes": "per-replica volumes are not supported yet; leave them out",
}
_PER_REPLICA = ("init", "sidecars", "connections")  # a pytorchjob's: set in master and worker, not at its run level


def check_run(run: JobRunModel | PytorchJobRunModel, loc: Loc) -> list[Problem]:
    """Resources of every container of the run, and the pytorchjob's replica rules."""
    if isinstance(run, JobRunModel):
        ports = run.ports if isinstance(run, ServiceRunModel) else []
        twice = [(loc + ("ports", i), f"port {p} is named twice") for i, p in enumerate(ports) if p in ports[:i]]
        return (check_resources(run.container.resources, loc + ("container", "resources"))
                + check_metadata(run.environment, loc + ("environment",)) + _pod_problems(run, loc) + twice)
    problems: list[Problem] = []
    for key, unsupported in _REPLICA_UNSUPPORTED.items():
        if key in run.model_fields_set:
            msg = (f"a pytorchjob has no run-level {key} in Polyaxon (only per replica), "
                   f"and {unsupported}")
            problems.append((loc + (key,), msg))
    problems += [(loc + (key,), f"a pytorchjob has no run-level {key} in Polyaxon: set it per replica "
                                f"(master.{key}, worker.{key})") for key in _PER_REPLICA if key in run.model_fields_set]
    problems += _replica_counts(run, loc)
    for section, replica in (("master", run.master), ("worker", run.worker)):
        if replica is None:
            continue
        for key, msg in _REPLICA_UNSUPPORTED.items():
            if key in replica.model_fields_set:
                problems.append((loc + (section, key), msg))
        problems += check_resources(replica.container.resources,
                                    loc + (section, "container", "resources"))
        problems += _pod_problems(replica, loc + (section,))
    return problems


def _pod_problems(pod: JobRunModel | KFReplicaModel, loc: Loc) -> list[Problem]:
    """A pod's init steps, sidecars and connections (``models_init``)."""
    return pod_parts_problems(container_of(pod.container, "main"), pod.init, pod.sidecars, pod.connections, loc)


def _replica_counts(run: PytorchJobRunModel, loc: Loc) -> list[Problem]:
    """One master; workers at least one, and with it within the pods an op may have."""
    problems: list[Problem] = []
    if run.master.replicas not in (None, 1):
        msg = (f"master.replicas must be 1, got {run.master.replicas} "
               "(set worker.replicas for more pods)")
        problems.append((loc + ("master", "replicas"), msg))
    if run.worker is not None and run.worker.replicas is not None and run.worker.replicas < 1:
        msg = (f"worker.replicas must be at least 1, got {run.worker.replicas} "
               "(leave the worker section out for a master-only job)")
        problems.append((loc + ("worker", "replicas"), msg))
    elif run.worker is not None and run.worker.replicas is not None and run.worker.replicas >= MAX_PODS_PER_OP:
        msg = (f"worker.replicas {run.worker.replicas} is above the limit of {MAX_PODS_PER_OP} pods per op "
               f"(the master and {MAX_PODS_PER_OP - 1} workers at most)")
        problems.append((loc + ("worker", "replicas"), msg))
    return problems
