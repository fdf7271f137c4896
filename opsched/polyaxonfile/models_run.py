"""Models of the ``run`` section: a job, or a distributed run of one of Polyaxon's Kubeflow kinds.

  * ``run.kind`` ``pytorchjob`` (``master``, ``worker``), ``tfjob`` (``chief``, ``ps``, ``worker``, ``evaluator``),
    ``mpijob`` (``launcher``, ``worker``, ``slotsPerWorker``), ``xgbjob`` (``master``, ``worker``), ``paddlejob``
    (``master``, ``worker``) and ``mxjob`` (``scheduler``, ``server``, ``worker``; ``mode: MXTrain``), with
    Polyaxon's field names (V1PytorchJob, V1TFJob, V1MPIJob, V1XGBoostJob, V1PaddleJob, V1MXJob). Each replica
    section is a V1KFReplica {replicas, container, environment, init, sidecars, connections}; its pods are one
    role (``rules.replica_roles``). The **main pod** (the op's end) is index 0 of the first of its kind's main roles
    the run has: pytorchjob/xgbjob master, mpijob launcher (each required), tfjob chief else worker 0, paddlejob
    master else worker 0, mxjob scheduler else its one worker (an mxjob without a scheduler may only be one worker,
    no server: the operator ends it with nothing else). Its container is ``OpSpec.container`` (``OpSpec.main_role``
    when not its kind's first role); every other section becomes a ``ReplicaGroup`` named for its role (count
    ``replicas``, default 1, at least 1), the main role's own section holding its pods after index 0. A master,
    chief, launcher or scheduler has ``replicas`` 1 (or absent); a paddlejob master may have more. Replica
    containers are validated like a job's, errors located under ``run.<role>.container...``.
    Environment: Polyaxon has no run-level ``environment``/``volumes`` here (they are per replica), and opsched
    honours only ``<role>.environment.restartPolicy`` (Never or OnFailure: that role's pods'), so the rest of a
    replica's ``environment``, its ``volumes`` and the run-level ones are errors; the pods get the default
    environment (admission still adds the flavor's node selector and tolerations). ``init``, ``sidecars`` and
    ``connections`` are per replica (``models_init``); at the run level they are errors, as in Polyaxon.
    ``cleanPodPolicy``: Running (default: pods still running when the job ends are deleted) or All (every pod of
    the gang is deleted once it ends; OpSpec.clean_pod_policy); None is refused. ``schedulingPolicy.minAvailable``:
    the gang's pod count (the default: all or nothing) is honoured; below it (a partial gang) is refused, as are
    its ``queue``, ``priorityClass``, ``minResources`` and ``scheduleTimeoutSeconds`` (opsched's queue, priority
    class and gang timeout say those). ``slotsPerWorker``: an mpijob's hostfile slots (``OpSpec.slots_per_worker``).
    Refused: a tfjob's ``enableDynamicWorker: true`` and ``successPolicy: AllWorkers`` (its end is its chief's, else
    worker 0's), an mxjob's ``mode: MXTune`` and tuner sections, ``elasticPolicy`` and ``nProcPerNode``.
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
from opsched.proto.limits import MAX_PODS_PER_OP, MAX_SERVICE_PORTS, MAX_SLOTS_PER_WORKER
from opsched.rules.replica_roles import KINDS


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
    """Polyaxon's V1KFReplica: one replica section (master, worker, chief, ...) of a distributed run.

    ``environment`` (of which only ``restartPolicy`` is honoured) and ``volumes`` are read to be checked by
    ``check_run``; ``init``, ``sidecars`` and ``connections`` are its pods' own."""

    replicas: Int | None = None
    container: ContainerModel
    environment: Any = None
    volumes: Any = None
    init: Init = []
    sidecars: Sidecars = []
    connections: Connections = []

    def restart_policy(self) -> str | None:
        env = self.environment
        return env.get("restartPolicy") if isinstance(env, dict) else None


def _clean_pod_policy(value: Any) -> Any:
    if value == "None":
        raise ValueError("cleanPodPolicy: None would leave the workers of an ended job running, holding GPUs "
                         "their quota no longer counts; use Running (the default) or All")
    return value


class SchedulingPolicyModel(Model):
    """Polyaxon's V1SchedulingPolicy: ``minAvailable`` equal to the gang's pods is honoured (all or nothing, the
    default); everything else is refused by ``check_run``."""

    min_available: Int | None = None
    queue: Any = None
    min_resources: Any = None
    priority_class: Any = None
    schedule_timeout_seconds: Any = None


class DistributedRunModel(Model):
    """What every distributed kind has: cleanPodPolicy, schedulingPolicy; and the run-level sections Polyaxon
    does not have for them (read only to be refused by ``check_run`` with a clear message)."""

    kind: str  # each kind's own Literal
    clean_pod_policy: Annotated[Literal["All", "Running"], BeforeValidator(_clean_pod_policy)] | None = None
    scheduling_policy: SchedulingPolicyModel | None = None
    environment: Any = None
    volumes: Any = None
    init: Any = None
    sidecars: Any = None
    connections: Any = None

    def sections(self) -> dict[str, KFReplicaModel]:
        """The replica sections it has, by role, in its kind's order."""
        roles = KINDS[self.kind].roles
        return {role: section for role in roles if (section := getattr(self, role, None)) is not None}


class PytorchJobRunModel(DistributedRunModel):
    """Polyaxon's V1PytorchJob."""

    kind: Literal["pytorchjob"]
    master: KFReplicaModel
    worker: KFReplicaModel | None = None


class TFJobRunModel(DistributedRunModel):
    """Polyaxon's V1TFJob."""

    kind: Literal["tfjob"]
    enable_dynamic_worker: bool | None = None
    success_policy: str | None = None
    chief: KFReplicaModel | None = None
    ps: KFReplicaModel | None = None
    worker: KFReplicaModel | None = None
    evaluator: KFReplicaModel | None = None


class MPIJobRunModel(DistributedRunModel):
    """Polyaxon's V1MPIJob."""

    kind: Literal["mpijob"]
    slots_per_worker: Annotated[Int, Field(ge=1, le=MAX_SLOTS_PER_WORKER)] | None = None
    launcher: KFReplicaModel
    worker: KFReplicaModel | None = None


class XGBoostJobRunModel(DistributedRunModel):
    """Polyaxon's V1XGBoostJob."""

    kind: Literal["xgbjob"]
    master: KFReplicaModel
    worker: KFReplicaModel | None = None


class PaddleJobRunModel(DistributedRunModel):
    """Polyaxon's V1PaddleJob (``elasticPolicy`` is refused: ``keys.UNSUPPORTED``)."""

    kind: Literal["paddlejob"]
    master: KFReplicaModel | None = None
    worker: KFReplicaModel | None = None


class MXJobRunModel(DistributedRunModel):
    """Polyaxon's V1MXJob: training mode (scheduler, server, worker); its tuning mode is refused."""

    kind: Literal["mxjob"]
    mode: str | None = None
    scheduler: KFReplicaModel | None = None
    server: KFReplicaModel | None = None
    worker: KFReplicaModel | None = None
    tuner: Any = None
    tuner_tracker: Any = None
    tuner_server: Any = None


DISTRIBUTED_RUNS: tuple[type[DistributedRunModel], ...] = (
    PytorchJobRunModel, TFJobRunModel, MPIJobRunModel, XGBoostJobRunModel, PaddleJobRunModel, MXJobRunModel)
RunModel = JobRunModel | DistributedRunModel
SINGLE = ("master", "chief", "launcher", "scheduler")  # roles of one pod (a paddlejob's master may have more)
_PER_REPLICA = ("init", "sidecars", "connections")  # set per replica, not at the run level
_TUNE = {"tuner": "tuner", "tuner_tracker": "tunerTracker", "tuner_server": "tunerServer"}


def check_run(run: RunModel, loc: Loc) -> list[Problem]:
    """Resources of every container of the run, and the distributed kinds' replica rules."""
    if isinstance(run, JobRunModel):
        ports = run.ports if isinstance(run, ServiceRunModel) else []
        twice = [(loc + ("ports", i), f"port {p} is named twice") for i, p in enumerate(ports) if p in ports[:i]]
        return (check_resources(run.container.resources, loc + ("container", "resources"))
                + check_metadata(run.environment, loc + ("environment",)) + _pod_problems(run, loc) + twice)
    kind = run.kind
    problems: list[Problem] = []
    for key in ("environment", "volumes"):
        if key in run.model_fields_set:
            problems.append((loc + (key,), f"a {kind} has no run-level {key} in Polyaxon (only per replica), and "
                                           f"opsched honours only a replica's environment.restartPolicy"))
    problems += [(loc + (key,), f"a {kind} has no run-level {key} in Polyaxon: set it per replica "
                                f"({', '.join(f'{r}.{key}' for r in KINDS[kind].roles)})")
                 for key in _PER_REPLICA if key in run.model_fields_set]
    problems += _kind_problems(run, loc)
    sections = run.sections()
    problems += _replica_counts(run, sections, loc)
    for role, replica in sections.items():
        problems += _replica_environment(replica, loc + (role,))
        problems += check_resources(replica.container.resources, loc + (role, "container", "resources"))
        problems += _pod_problems(replica, loc + (role,))
    return problems + _scheduling_policy(run, sections, loc)


def main_role(run: DistributedRunModel) -> str | None:
    """The role of the main pod: the first of its kind's main roles the run has (None: it has none)."""
    sections = run.sections()
    return next((role for role in KINDS[run.kind].main_roles if role in sections), None)


def pods_in(sections: dict[str, KFReplicaModel]) -> int:
    return sum(r.replicas if r.replicas is not None else 1 for r in sections.values())


def _kind_problems(run: DistributedRunModel, loc: Loc) -> list[Problem]:
    """What one kind refuses: a run without its main pod, a tfjob's dynamic workers and success policy, an mxjob's
    tuning mode and one without a scheduler that is more than one worker."""
    problems: list[Problem] = []
    sections = run.sections()
    if main_role(run) is None:
        roles = KINDS[run.kind].main_roles
        problems.append((loc + (roles[0],), f"a {run.kind} needs a {' or a '.join(roles)}: its pod 0 is the main "
                                            "one, whose end is the op's"))
    if isinstance(run, TFJobRunModel):
        if run.enable_dynamic_worker:
            problems.append((loc + ("enableDynamicWorker",), "enableDynamicWorker: true is not supported: a gang "
                                                             "is admitted and runs all or nothing"))
        if run.success_policy not in (None, ""):
            problems.append((loc + ("successPolicy",), f"successPolicy {run.success_policy!r} is not supported: a "
                                                       "tfjob ends with its chief, else with worker 0 (the default)"))
    if isinstance(run, MXJobRunModel):
        if run.mode not in (None, "MXTrain"):
            problems.append((loc + ("mode",), f"mode {run.mode!r} is not supported: only MXTrain (scheduler, "
                                              "server, worker); MXTune has no end the operator defines"))
        problems += [(loc + (alias,), f"{alias} belongs to MXTune, which is not supported: only MXTrain "
                                      "(scheduler, server, worker)")
                     for key, alias in _TUNE.items() if key in run.model_fields_set]
        if run.scheduler is None and ("server" in sections or pods_in(sections) > 1):
            problems.append((loc + ("scheduler",), "an mxjob without a scheduler may only be one worker (the "
                                                   "operator ends such a job with it); add a scheduler"))
    return problems


def _replica_environment(replica: KFReplicaModel, loc: Loc) -> list[Problem]:
    """A replica's environment: only ``restartPolicy`` (Never or OnFailure); its volumes: refused."""
    problems: list[Problem] = []
    if "volumes" in replica.model_fields_set:
        problems.append((loc + ("volumes",), "per-replica volumes are not supported yet; leave them out"))
    env = replica.environment
    if env is None:
        return problems
    if not isinstance(env, dict):
        return [*problems, (loc + ("environment",), "expected a mapping")]
    for key in env:
        if key != "restartPolicy":
            problems.append((loc + ("environment", key), f"per-replica environment.{key} is not supported yet "
                                                         "(only restartPolicy); leave it out (admission still adds "
                                                         "the flavor's node selector and tolerations)"))
    policy = env.get("restartPolicy")
    if policy is not None and policy not in ("Never", "OnFailure"):
        why = ("Always never lets a job end (its pod restarts forever)" if policy == "Always"
               else f"{policy!r} is not a restart policy")
        problems.append((loc + ("environment", "restartPolicy"), f"restartPolicy: {why}; use Never (the default) "
                                                                 "or OnFailure"))
    return problems


def _pod_problems(pod: JobRunModel | KFReplicaModel, loc: Loc) -> list[Problem]:
    """A pod's init steps, sidecars and connections (``models_init``)."""
    return pod_parts_problems(container_of(pod.container, "main"), pod.init, pod.sidecars, pod.connections, loc)


def _replica_counts(run: DistributedRunModel, sections: dict[str, KFReplicaModel], loc: Loc) -> list[Problem]:
    """One pod for a master/chief/launcher/scheduler (a paddlejob's master may have more); at least one per
    section; all of them within the pods an op may have."""
    problems: list[Problem] = []
    for role, replica in sections.items():
        n = replica.replicas
        if n is None:
            continue
        if role in SINGLE and n != 1 and not (run.kind == "paddlejob" and n >= 1):
            problems.append((loc + (role, "replicas"), f"{role}.replicas must be 1, got {n} (set worker.replicas "
                                                       "for more pods)"))
        elif n < 1:
            problems.append((loc + (role, "replicas"), f"{role}.replicas must be at least 1, got {n} (leave the "
                                                       f"{role} section out for none)"))
    total = pods_in(sections)
    if total > MAX_PODS_PER_OP and not problems:
        last = list(sections)[-1]
        problems.append((loc + (last, "replicas"), f"{total} pods in all is above the limit of {MAX_PODS_PER_OP} "
                                                   "pods per op"))
    return problems


_POLICY_REFUSED = {
    "queue": "set the op's queue (queue:) instead",
    "min_resources": "opsched admits a gang when every pod's resources fit its queue",
    "priority_class": "set the op's priorityClass (opsched's, from the queue config) or environment's "
                      "priorityClassName instead",
    "schedule_timeout_seconds": "a gang not all running within the dispatcher's gang timeout is evicted and "
                                "retried; a queue's pendingTimeout bounds unschedulable pods",
}


def _scheduling_policy(run: DistributedRunModel, sections: dict[str, KFReplicaModel], loc: Loc) -> list[Problem]:
    policy = run.scheduling_policy
    if policy is None:
        return []
    at = loc + ("schedulingPolicy",)
    problems = [(at + (SchedulingPolicyModel.model_fields[key].alias or key,),
                 f"schedulingPolicy.{SchedulingPolicyModel.model_fields[key].alias or key} is not supported: {why}")
                for key, why in _POLICY_REFUSED.items() if key in policy.model_fields_set]
    total = pods_in(sections)
    if policy.min_available is not None and policy.min_available != total:
        what = ("a partial gang (some pods admitted before the rest) is not supported"
                if policy.min_available < total else "a gang cannot need more pods than it has")
        problems.append((at + ("minAvailable",), f"schedulingPolicy.minAvailable {policy.min_available} is not the "
                                                 f"gang's {total} pods: {what}; leave it out or set {total}"))
    return problems
