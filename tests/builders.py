"""Fluent builders that keep tests short: ``op("train").queue("gpu-a").gpus(2, product="A100").build()``."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from proto.events import OperationAdmitted, OperationSubmitted
from proto.spec import Cache, Container, EnvVar, Environment, OpSpec, Resources, Termination

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class OpBuilder:
    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: str | None = None
        self._priority = 0
        self._limits: dict[str, str] = {}
        self._requests: dict[str, str] = {}
        self._node_selector: dict[str, str] = {}
        self._env: list[EnvVar] = []
        self._command: list[str] = ["sh", "-c", "sleep 1"]
        self._timeout: int | None = None
        self._max_retries: int | None = None
        self._cache: Cache = Cache()
        self._params: dict = {}
        self._image = "busybox:1.36"

    def queue(self, name: str) -> "OpBuilder":
        self._queue = name
        return self

    def priority(self, value: int) -> "OpBuilder":
        self._priority = value
        return self

    def gpus(self, count: int, product: str | None = None, resource: str = "nvidia.com/gpu") -> "OpBuilder":
        self._limits[resource] = str(count)
        if product:
            self._node_selector["nvidia.com/gpu.product"] = product
        return self

    def cpu(self, value: str) -> "OpBuilder":
        self._requests["cpu"] = value
        return self

    def memory(self, value: str) -> "OpBuilder":
        self._requests["memory"] = value
        return self

    def env(self, name: str, value: str) -> "OpBuilder":
        self._env.append(EnvVar(name=name, value=value))
        return self

    def runs(self, shell: str) -> "OpBuilder":
        """The container runs ``sh -c <shell>`` (the simulated kubelet reads sleep N / exit N)."""
        self._command = ["sh", "-c", shell]
        return self

    def timeout(self, seconds: int) -> "OpBuilder":
        self._timeout = seconds
        return self

    def retries(self, n: int) -> "OpBuilder":
        self._max_retries = n
        return self

    def cached(self, ttl: int | None = None) -> "OpBuilder":
        self._cache = Cache(disable=False, ttl=ttl)
        return self

    def params(self, **values) -> "OpBuilder":
        self._params.update(values)
        return self

    def build(self) -> OpSpec:
        return OpSpec(
            name=self._name, queue=self._queue, priority=self._priority, params=self._params,
            container=Container(image=self._image, command=self._command, env=self._env,
                                resources=Resources(limits=self._limits, requests=self._requests)),
            environment=Environment(node_selector=self._node_selector),
            termination=Termination(timeout=self._timeout, max_retries=self._max_retries),
            cache=self._cache,
        )


def op(name: str = "op") -> OpBuilder:
    return OpBuilder(name)


def at(seconds: float = 0) -> datetime:
    return T0 + timedelta(seconds=seconds)


def submitted(spec: OpSpec, op_id: str, *, seconds: float = 0, queue: str | None = None) -> OperationSubmitted:
    return OperationSubmitted(op_id=op_id, at=at(seconds), spec=spec, queue=queue or spec.queue or "default",
                              submitted_at=at(seconds), priority=spec.priority)


def admitted(spec: OpSpec, op_id: str, *, attempt: int = 0, namespace: str = "opsched",
             queue: str = "default") -> OperationAdmitted:
    return OperationAdmitted(op_id=op_id, at=at(), attempt=attempt, spec=spec, queue=queue,
                             namespace=namespace, pod_name=f"op-{op_id}-{attempt}")
