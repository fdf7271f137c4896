"""What each pod of an op asks the scheduler for, as Kubernetes counts it (``proto.resources.effective``: its
init containers against the sum of its main container and sidecars), and how many such pods the op has: the main
pod (a service's replicas of it), then each replica group's. Admission's quota and placement, the cost estimate, approval's GPU count and the
``GPUS`` column all count an op through this module, so they agree with kube-scheduler."""
from __future__ import annotations

from typing import NamedTuple

from opsched.proto.resources import GPU_MEMORY, effective, gpus_label, is_device, limited, requested
from opsched.proto.spec import Container, OpSpec, ReplicaGroup


class PodShape(NamedTuple):
    """One kind of pod of an op: its regular containers (main, then sidecars), its user init containers, and how
    many pods have it. opsched's own init containers (git and file steps) ask for nothing."""

    containers: list[Container]
    init: list[Container]
    pods: int


def shapes(spec: OpSpec) -> list[PodShape]:
    pods: list[tuple[OpSpec | ReplicaGroup, int]] = [(spec, spec.main_pods)]
    pods += [(g, g.count) for g in spec.replicas]
    return [PodShape([pod.container, *pod.sidecars], [s.container for s in pod.init if s.container is not None], n)
            for pod, n in pods]


def pod_requests(spec: OpSpec) -> list[tuple[dict[str, float], int]]:
    """Each kind of pod's request (``proto.resources.requested`` of its containers, counted as Kubernetes does),
    with how many pods have it."""
    def request(c: Container) -> dict[str, float]:
        return requested(c.resources.limits, c.resources.requests)
    return [(effective(map(request, s.containers), map(request, s.init)), s.pods) for s in shapes(spec)]


def pod_limits(spec: OpSpec) -> list[tuple[dict[str, float], int]]:
    """Each kind of pod's limits, counted the same way (accelerators are set as limits)."""
    def limit(c: Container) -> dict[str, float]:
        return limited(c.resources.limits)
    return [(effective(map(limit, s.containers), map(limit, s.init)), s.pods) for s in shapes(spec)]


def gpus_of(spec: OpSpec) -> str:
    """The op's accelerators as ``opsched ops`` shows them (``proto.resources.gpus_label``)."""
    return gpus_label(pod_limits(spec))


def accelerators_of(spec: OpSpec) -> dict[str, float]:
    """The op's accelerators over all its pods: each device resource's count and shared GPU memory (GiB)."""
    out: dict[str, float] = {}
    for limits, count in pod_limits(spec):
        for resource, n in limits.items():
            if (is_device(resource) or resource == GPU_MEMORY) and n:
                out[resource] = out.get(resource, 0.0) + n * count
    return out
