"""Refuse pod specs that bypass the scheduler's GPU accounting (managed-Kubernetes GPU guidance).

Every container of the attempt is checked: the main one, each replica group's (a gang), and every pod's init
containers and sidecars."""
from __future__ import annotations

from opsched.proto.resources import QuantityError, is_accelerator, parse_quantity
from opsched.proto.spec import Container, OpSpec

DRIVER_PATH_HINTS = ("nvidia", "/dev/dri", "libcuda", "/usr/lib/x86_64-linux-gnu", "/usr/local/cuda")


def containers(spec: OpSpec) -> list[tuple[str, Container]]:
    """(prefix for messages, container): the main pod's (its init containers, main container and sidecars), then
    each replica group's."""
    pods = [("", spec)] + [(f"replica {g.name!r}: ", g) for g in spec.replicas]
    out: list[tuple[str, Container]] = []
    for prefix, pod in pods:
        out += [(f"{prefix}init[{i}]: ", s.container) for i, s in enumerate(pod.init) if s.container is not None]
        out.append((prefix, pod.container))
        out += [(f"{prefix}sidecars[{i}]: ", c) for i, c in enumerate(pod.sidecars)]
    return out


def violations(spec: OpSpec) -> list[str]:
    """Every reason this spec may not run; empty when it is acceptable."""
    problems: list[str] = []
    for prefix, container in containers(spec):
        problems += [prefix + p for p in _container_problems(container)]
    problems += _tpu_problems(spec)
    for vol in spec.environment.volumes:
        path = str((vol.get("hostPath") or {}).get("path", ""))
        if path and any(h in path for h in DRIVER_PATH_HINTS):
            problems.append(f"hostPath volume {vol.get('name', '?')!r} mounts driver files ({path}); it is refused")
    return problems


def _container_problems(c: Container) -> list[str]:
    problems: list[str] = []
    for env in c.env:
        if env.name == "NVIDIA_VISIBLE_DEVICES":
            problems.append("env NVIDIA_VISIBLE_DEVICES bypasses GPU accounting; request GPUs "
                            "with resources.limits (e.g. nvidia.com/gpu: 1) instead")
    if (c.security_context or {}).get("privileged") not in (None, False):  # "true", 1: as true to a runtime
        problems.append("securityContext.privileged: true exposes every GPU on the node; it is refused")
    return problems + _resource_problems(c)


def _resource_problems(c: Container) -> list[str]:
    """Accelerators set only as limits (a request, if any, equal to it). That every quantity is valid (whole
    devices, whole GiB of shared GPU memory) is the contract's rule (``proto.spec_checks``), checked on decode."""
    problems: list[str] = []
    limits, requests = c.resources.limits, c.resources.requests
    for name, value in requests.items():
        if not is_accelerator(name):
            continue
        if name not in limits:
            problems.append(f"{name} is requested without a limit; accelerators must be set in "
                            f"resources.limits (requests, if given, must equal limits)")
        elif _q(value) != _q(limits[name]):
            problems.append(f"{name}: request {value} differs from limit {limits[name]}; they must be equal")
    return problems


TPU_PREFIX = "cloud-tpus.google.com/"
TPU_ANNOTATION = "tf-version.cloud-tpus.google.com"


def _tpu_problems(spec: OpSpec) -> list[str]:
    """GKE schedules TPU pods only with the TensorFlow-version annotation (Polyaxon's TPU docs)."""
    wants_tpu = any(r.startswith(TPU_PREFIX) for _, c in containers(spec) for r in c.resources.limits)
    if wants_tpu and TPU_ANNOTATION not in spec.environment.annotations:
        return [f"TPU resources need the annotation {TPU_ANNOTATION} in environment.annotations "
                f"(e.g. \"2.12\")"]
    return []


def _q(value: str):
    try:
        return parse_quantity(value)
    except QuantityError:
        return None
