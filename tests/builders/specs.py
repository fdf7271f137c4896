"""A fluent OpSpec builder: ``op("train").queue("gpu-a").gpus(2, product="A100").build()``."""
from __future__ import annotations

import copy
from typing import Any

from opsched.proto.spec import (
    Cache,
    Container,
    Environment,
    EnvVar,
    OpSpec,
    ReplicaGroup,
    Resources,
    Termination,
)

GPU = "nvidia.com/gpu"
GPU_PRODUCT = "nvidia.com/gpu.product"


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

    def environment(self, **fields: Any) -> OpBuilder:
        """Any other field of ``run.environment`` by its Python name: ``environment(service_account_name="x")``."""
        self._environment.update(fields)
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
