"""Deterministic pod names: one set per op attempt, so a redelivered admission creates nothing twice."""
from __future__ import annotations

from opsched.proto.spec import OpSpec


def pod_name(op_id: str, attempt: int) -> str:
    """The main pod of an attempt (the master of a gang)."""
    return f"op-{op_id}-{attempt}"


def pod_names(op_id: str, attempt: int, spec: OpSpec) -> list[str]:
    """Every pod of an attempt: the main pod, then each replica group's pods in order."""
    main = pod_name(op_id, attempt)
    return [main] + [f"{main}-{group.name}-{i}" for group in spec.replicas for i in range(group.count)]
