"""Builders that keep tests short: fluent operation specs and events at an injected, fixed time.

    spec = op("train").queue("gpu-a").gpus(2, product="A100").priority(10).timeout(600).build()
    events = [submitted(spec, op_id="a"), cost_estimated("a"), cache_missed("a")]

Every event helper takes ``at=`` (default ``T0``); use ``at=t(5)`` for "five seconds after T0".
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from proto.commands import StopOperation, SubmitOperation
from proto.events import (
    CacheHit, CacheMissed, CostEstimated, Money, OperationAdmitted, OperationDispatched,
    OperationFailed, OperationRejected, OperationRunning, OperationStopped, OperationSubmitted,
    OperationSucceeded, StopRequested,
)
from proto.spec import Cache, Container, EnvVar, Environment, OpSpec, ReplicaGroup, Resources, Termination

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
GPU = "nvidia.com/gpu"
GPU_PRODUCT = "nvidia.com/gpu.product"
NAMESPACE = "opsched"


def t(seconds: float) -> datetime:
    """``seconds`` after ``T0``."""
    return T0 + timedelta(seconds=seconds)


@dataclass(frozen=True)
class Case:
    """One row of a table test; ``name`` is a sentence and becomes the test id."""

    name: str
    args: dict[str, Any]

    def __getattr__(self, key: str) -> Any:
        try:
            return self.args[key]
        except KeyError:
            raise AttributeError(key) from None


def case(name: str, **args: Any) -> Case:
    return Case(name, args)


def case_name(c: Case) -> str:
    return c.name


class OpBuilder:
    """A fluent OpSpec builder. Every method returns the builder; ``build()`` returns a fresh spec."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._image = "python:3.11-slim"
        self._command: list[str] = ["sh", "-c", "true"]
        self._args: list[str] = []
        self._env: list[EnvVar] = []
        self._limits: dict[str, str] = {}
        self._requests: dict[str, str] = {}
        self._security_context: dict[str, Any] | None = None
        self._volume_mounts: list[dict[str, Any]] = []
        self._environment: dict[str, Any] = {}
        self._termination: dict[str, Any] = {}
        self._cache: dict[str, Any] = {}
        self._fields: dict[str, Any] = {}
        self._replicas: list[tuple[str, int]] = []

    # container
    def image(self, image: str) -> OpBuilder:
        self._image = image
        return self

    def command(self, *command: str) -> OpBuilder:
        self._command = list(command)
        return self

    def runs(self, script: str) -> OpBuilder:
        """A shell script as the command: ``runs("sleep 2; exit 1")`` (the simulated kubelet reads it)."""
        return self.command("sh", "-c", script)

    def args(self, *args: str) -> OpBuilder:
        self._args = list(args)
        return self

    def env(self, name: str, value: str = "") -> OpBuilder:
        self._env.append(EnvVar(name=name, value=value))
        return self

    def gpus(self, count: int | str, *, product: str | None = None, resource: str = GPU) -> OpBuilder:
        """Accelerators as a limit (the only accepted way); ``product`` pins the GPU model."""
        self._limits[resource] = str(count)
        if product is not None:
            self.node_selector(GPU_PRODUCT, product)
        return self

    def cpu(self, quantity: str) -> OpBuilder:
        self._requests["cpu"] = quantity
        return self

    def memory(self, quantity: str) -> OpBuilder:
        self._requests["memory"] = quantity
        return self

    def limits(self, **quantities: str) -> OpBuilder:
        """Raw limits; use ``**{"nvidia.com/gpu": "1"}`` for names that are not identifiers."""
        self._limits.update(quantities)
        return self

    def requests(self, **quantities: str) -> OpBuilder:
        self._requests.update(quantities)
        return self

    def security_context(self, **context: Any) -> OpBuilder:
        self._security_context = {**(self._security_context or {}), **context}
        return self

    def privileged(self, value: bool = True) -> OpBuilder:
        return self.security_context(privileged=value)

    def volume(self, name: str, *, host_path: str | None = None, mount_path: str | None = None,
               **source: Any) -> OpBuilder:
        vol = {"name": name, **source}
        if host_path is not None:
            vol["hostPath"] = {"path": host_path}
        self._environment.setdefault("volumes", []).append(vol)
        if mount_path is not None:
            self._volume_mounts.append({"name": name, "mountPath": mount_path})
        return self

    # placement
    def node_selector(self, key: str, value: str) -> OpBuilder:
        self._environment.setdefault("node_selector", {})[key] = value
        return self

    def toleration(self, **toleration: Any) -> OpBuilder:
        self._environment.setdefault("tolerations", []).append(toleration)
        return self

    def affinity(self, affinity: dict[str, Any]) -> OpBuilder:
        self._environment["affinity"] = affinity
        return self

    def label(self, key: str, value: str) -> OpBuilder:
        self._environment.setdefault("labels", {})[key] = value
        return self

    # scheduling fields
    def queue(self, queue: str | None) -> OpBuilder:
        self._fields["queue"] = queue
        return self

    def priority(self, priority: int) -> OpBuilder:
        self._fields["priority"] = priority
        return self

    def project(self, project: str) -> OpBuilder:
        self._fields["project"] = project
        return self

    def params(self, **params: Any) -> OpBuilder:
        self._fields["params"] = {**self._fields.get("params", {}), **params}
        return self

    def inputs(self, **inputs: Any) -> OpBuilder:
        self._fields["inputs"] = {**self._fields.get("inputs", {}), **inputs}
        return self

    def cost(self, amount: float) -> OpBuilder:
        self._fields["cost"] = amount
        return self

    def timeout(self, seconds: int | None) -> OpBuilder:
        self._termination["timeout"] = seconds
        return self

    def max_retries(self, retries: int) -> OpBuilder:
        self._termination["max_retries"] = retries
        return self

    def cache(self, *, disable: bool | None = None, ttl: int | None = None) -> OpBuilder:
        self._cache.update(disable=disable, ttl=ttl)
        return self

    def priority_class(self, name: str | None) -> OpBuilder:
        """A named priority class of the queue config (not the pod's priorityClassName)."""
        self._fields["priority_class"] = name
        return self

    def preemptible(self, value: bool = True) -> OpBuilder:
        self._fields["preemptible"] = value
        return self

    def replicas(self, name: str, count: int = 1) -> OpBuilder:
        """A gang: ``count`` more pods named ``name``, each a copy of the main container (as built)."""
        self._replicas.append((name, count))
        return self

    def build(self) -> OpSpec:
        container = Container(
            image=self._image, command=list(self._command), args=list(self._args), env=list(self._env),
            resources=Resources(limits=dict(self._limits), requests=dict(self._requests)),
            security_context=copy.deepcopy(self._security_context),
            volume_mounts=copy.deepcopy(self._volume_mounts),
        )
        return OpSpec(
            name=self._name, container=container,
            environment=Environment(**copy.deepcopy(self._environment)),
            termination=Termination(**self._termination), cache=Cache(**self._cache),
            replicas=[ReplicaGroup(name=name, count=count, container=copy.deepcopy(container))
                      for name, count in self._replicas],
            **copy.deepcopy(self._fields),
        )


def op(name: str = "train") -> OpBuilder:
    return OpBuilder(name)


# ---- commands ---------------------------------------------------------------------------------

def submit(spec: OpSpec, *, op_id: str = "op-1", at: datetime | None = T0) -> SubmitOperation:
    return SubmitOperation(op_id=op_id, spec=spec, requested_at=at, requested_by="test")


def stop(op_id: str = "op-1", *, reason: str = "stopped by user") -> StopOperation:
    return StopOperation(op_id=op_id, reason=reason)


# ---- events -----------------------------------------------------------------------------------

def submitted(spec: OpSpec, *, op_id: str = "op-1", at: datetime = T0, queue: str | None = None,
              priority: int | None = None, submitted_at: datetime | None = None) -> OperationSubmitted:
    return OperationSubmitted(op_id=op_id, at=at, spec=spec, queue=queue or spec.queue or "default",
                              submitted_at=submitted_at or at,
                              priority=spec.priority if priority is None else priority)


def cost_estimated(op_id: str = "op-1", *, at: datetime = T0, amount: float = 1.0,
                   basis: str = "default") -> CostEstimated:
    return CostEstimated(op_id=op_id, at=at, estimate=Money(amount=amount), basis=basis, duration_s=3600.0)


def cache_missed(op_id: str = "op-1", *, at: datetime = T0, reason: str = "not_found") -> CacheMissed:
    return CacheMissed(op_id=op_id, at=at, fingerprint="f" * 32, reason=reason)


def cache_hit(op_id: str = "op-1", *, original: str = "op-0", at: datetime = T0) -> CacheHit:
    return CacheHit(op_id=op_id, at=at, fingerprint="f" * 32, original_op_id=original)


def gates_cleared(op_id: str = "op-1", *, at: datetime = T0) -> list:
    """Both gates of a miss: the cost estimate and the cache answer."""
    return [cost_estimated(op_id, at=at), cache_missed(op_id, at=at)]


def admitted(spec: OpSpec | OperationSubmitted, *, op_id: str | None = None, at: datetime = T0,
             attempt: int = 0, queue: str | None = None, namespace: str = NAMESPACE,
             pod_name: str | None = None) -> OperationAdmitted:
    if isinstance(spec, OperationSubmitted):
        op_id, queue, spec = op_id or spec.op_id, queue or spec.queue, spec.spec
    op_id = op_id or "op-1"
    return OperationAdmitted(op_id=op_id, at=at, attempt=attempt, spec=spec,
                             queue=queue or spec.queue or "default", namespace=namespace,
                             pod_name=pod_name or f"op-{op_id}-{attempt}")


def dispatched(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0,
               namespace: str = NAMESPACE) -> OperationDispatched:
    return OperationDispatched(op_id=op_id, at=at, attempt=attempt, pod_name=f"op-{op_id}-{attempt}",
                               namespace=namespace)


def running(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0,
            node: str | None = "gpu-node-1") -> OperationRunning:
    return OperationRunning(op_id=op_id, at=at, attempt=attempt, pod_name=f"op-{op_id}-{attempt}", node=node)


def succeeded(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, node: str | None = None,
              reason: str = "Completed") -> OperationSucceeded:
    return OperationSucceeded(op_id=op_id, at=at, attempt=attempt, node=node, reason=reason)


def failed(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, reason: str = "Error",
           message: str = "", node: str | None = None, exit_code: int | None = 1) -> OperationFailed:
    return OperationFailed(op_id=op_id, at=at, attempt=attempt, reason=reason, message=message,
                           node=node, exit_code=exit_code)


def rejected(op_id: str = "op-1", *, at: datetime = T0, reason: str = "unknown_queue",
             message: str = "unknown queue") -> OperationRejected:
    return OperationRejected(op_id=op_id, at=at, reason=reason, message=message)


def stopped(op_id: str = "op-1", *, at: datetime = T0, message: str = "") -> OperationStopped:
    return OperationStopped(op_id=op_id, at=at, message=message)


def stop_requested(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0,
                   namespace: str = NAMESPACE) -> StopRequested:
    return StopRequested(op_id=op_id, at=at, attempt=attempt, pod_name=f"op-{op_id}-{attempt}",
                         namespace=namespace)


# ---- queues, flavors and nodes (Kueue-style admission) ----------------------------------------
#
#     b = book(queue("a", cohort="lab", gpus={"h100": 4}),
#              queue("b", cohort="lab", gpus=[quota("h100", 2, guaranteed=1)]))
#     state = fold(*queued(op("x").gpus(2).build(), op_id="x"))
#     observe(state, node("gpu-a", gpus=2, product="A100"))

from proto.cluster import NodeObserved, NodeRemoved  # noqa: E402
from proto.queues import Flavor, FlavorQuota, PriorityClass, Queue, QueuesConfig, ResourceQuota  # noqa: E402


def gpu_flavor(name: str, product: str | None = None, *, tolerations: list[dict[str, Any]] | None = None,
               **labels: str) -> Flavor:
    """A flavor selecting GPU nodes of one product: ``gpu_flavor("h100")`` selects product H100."""
    node_labels = {GPU_PRODUCT: product or name.upper(), **labels}
    return Flavor(name=name, node_labels=node_labels, tolerations=list(tolerations or []))


def quota(name: str, nominal: int | float | str, *, borrow: int | float | str | None = None,
          lend: int | float | str | None = None, guaranteed: int | float | str | None = None) -> FlavorQuota:
    """The quota of one flavor: ``quota("h100", 4, borrow=2, lend=1, guaranteed=1)``."""
    return FlavorQuota(name=name, nominal=nominal, borrowing_limit=borrow, lending_limit=lend,
                       guaranteed=guaranteed)


def resource_quota(resource: str, flavors: dict[str, Any] | list[FlavorQuota]) -> ResourceQuota:
    """``{"h100": 4, "a100": quota("a100", 2, borrow=0)}`` or a list of quotas, in preference order."""
    if isinstance(flavors, dict):
        flavors = [v if isinstance(v, FlavorQuota) else quota(k, v) for k, v in flavors.items()]
    return ResourceQuota(resource=resource, flavors=list(flavors))


def queue(name: str, *, gpus: dict[str, Any] | list[FlavorQuota] | None = None,
          resources: dict[str, dict[str, Any] | list[FlavorQuota]] | None = None, **fields: Any) -> Queue:
    """A queue config in one line: ``queue("a", cohort="lab", concurrency=2, gpus={"h100": 4})``."""
    quotas = [resource_quota(GPU, gpus)] if gpus is not None else []
    quotas += [resource_quota(r, f) for r, f in (resources or {}).items()]
    return Queue(name=name, resources=quotas, **fields)


def book(*queues: Queue, flavors: list[Flavor] | None = None, default: str | None = None,
         projects: dict[str, str] | None = None, reject_unfittable: bool = True,
         priority_classes: dict[str, int] | None = None, fair_sharing: Any = None):
    """A compiled queue book. Flavors a quota names but ``flavors`` does not define are defined as
    GPU-product flavors (``"a100"`` selects ``nvidia.com/gpu.product: A100``)."""
    from services.admission.queues import DEFAULT_FLAVOR, compile_book

    defined = {f.name: f for f in flavors or []}
    for q in queues:
        for rq in q.resources:
            for fq in rq.flavors:
                if fq.name != DEFAULT_FLAVOR and fq.name not in defined:
                    defined[fq.name] = gpu_flavor(fq.name)
    config = QueuesConfig(queues=list(queues), default_queue=default or queues[0].name,
                          project_queues=dict(projects or {}), flavors=list(defined.values()),
                          reject_unfittable=reject_unfittable,
                          priority_classes=[PriorityClass(name=n, value=v)
                                            for n, v in (priority_classes or {}).items()],
                          **({"fair_sharing": fair_sharing} if fair_sharing is not None else {}))
    return compile_book(config)


def node(name: str = "gpu-node-1", *, gpus: int = 0, product: str | None = None, cpu: str = "64",
         memory: str = "256Gi", taints: list[dict[str, Any]] | None = None, schedulable: bool = True,
         labels: dict[str, str] | None = None, resource: str = GPU, at: datetime = T0) -> NodeObserved:
    """A node as the dispatcher reports it: ``node("gpu-a", gpus=2, product="A100")``."""
    node_labels = {**({GPU_PRODUCT: product} if product else {}), **(labels or {})}
    allocatable = {"cpu": cpu, "memory": memory, **({resource: str(gpus)} if gpus else {})}
    return NodeObserved(node=name, at=at, labels=node_labels, allocatable=allocatable,
                        taints=list(taints or []), schedulable=schedulable)


def node_removed(name: str = "gpu-node-1", *, at: datetime = T0) -> NodeRemoved:
    return NodeRemoved(node=name, at=at)


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, Any]:
    return {"key": key, "value": value, "effect": effect}


def queued(spec: OpSpec, *, op_id: str = "op-1", at: datetime = T0, amount: float = 1.0,
           queue: str | None = None) -> list:
    """An op submitted at ``at`` whose gates both cleared (cost ``amount``, a cache miss)."""
    return [submitted(spec, op_id=op_id, at=at, queue=queue), cost_estimated(op_id, at=at, amount=amount),
            cache_missed(op_id, at=at)]


def fold(*events: Any, state: Any = None):
    """Fold events (lists are flattened; NodeObserved/NodeRemoved are observed) into an AdmissionState."""
    from services.admission.state import AdmissionState

    state = state if state is not None else AdmissionState()
    for event in events:
        if isinstance(event, (list, tuple)):
            fold(*event, state=state)
        elif isinstance(event, (NodeObserved, NodeRemoved)):
            state.observe(event)
        else:
            state.apply(event)
    return state


# ---- preemption, eviction and aging -----------------------------------------------------------
#
#     fold(preempt_requested("lo", preemptor="hi"), preempted("lo", at=t(30)), state=state)
#     fold(evicted("g", at=t(100), retry_after_s=30), state=state)

from proto.events import OperationEvicted, OperationPreempted, PreemptRequested  # noqa: E402


def preempt_requested(op_id: str = "op-1", *, preemptor: str = "op-2", at: datetime = T0, attempt: int = 0,
                      namespace: str = NAMESPACE, reason: str = "within_queue",
                      pod_names: list[str] | None = None, message: str = "") -> PreemptRequested:
    return PreemptRequested(op_id=op_id, at=at, attempt=attempt, pod_names=pod_names or [f"op-{op_id}-{attempt}"],
                            namespace=namespace, preemptor=preemptor, reason=reason, message=message)


def preempted(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, preemptor: str = "",
              reason: str = "within_queue") -> OperationPreempted:
    return OperationPreempted(op_id=op_id, at=at, attempt=attempt, preemptor=preemptor, reason=reason)


def evicted(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, reason: str = "pods_not_ready",
            retry_after_s: float = 0.0) -> OperationEvicted:
    return OperationEvicted(op_id=op_id, at=at, attempt=attempt, reason=reason, retry_after_s=retry_after_s)


def configure_aging(state: Any, b: Any, now: datetime = T0):
    """Give ``state`` the aging settings of book ``b`` (as the service does on a config change)."""
    state.configure_aging({q.name: (q.aging.per_minute, q.aging.cap) for q in b.config.queues}, now)
    return state
