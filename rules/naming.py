"""Deterministic names: the pods of an op attempt, so a redelivered admission creates nothing twice, and the op a
hook makes, so a leader that submits it twice makes one op."""
from __future__ import annotations

import hashlib

from opsched.proto.spec import OpSpec
from opsched.proto.subjects import valid_token
from opsched.rules import serving
from opsched.rules.replica_roles import pods_of

MAX_OP_ID = 63


def pod_name(op_id: str, attempt: int) -> str:
    """The main pod of an attempt (the master of a gang)."""
    return f"op-{op_id}-{attempt}"


def pod_names(op_id: str, attempt: int, spec: OpSpec) -> list[str]:
    """Every pod of an attempt (``rules.replica_roles.pods_of``): the main pod (then a service's replicas of it:
    ``rules.serving``), then each replica group's pods in order, ``<main>-<role>-<index>``."""
    main = pod_name(op_id, attempt)
    return [main, *serving.replica_names(main, spec)] + [f"{main}-{p.role}-{p.index}" for p in pods_of(spec)
                                                          if not p.is_main]


def hook_op_id(op_id: str, attempt: int, index: int) -> str:
    """The op hook ``index`` of ``op_id`` makes when its attempt ``attempt`` ends: ``<op id>-hook-<index>``
    (``-<attempt>`` after a resume); a hash when that would not be a valid op id."""
    own = f"{op_id}-hook-{index}" + (f"-{attempt}" if attempt else "")
    if valid_token(own) and len(own) <= MAX_OP_ID:
        return own
    return "hook-" + hashlib.sha256(f"{op_id}/{attempt}/{index}".encode()).hexdigest()[:24]
