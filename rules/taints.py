"""Taints and tolerations, as kube-scheduler judges them: a pod goes on a node only when it tolerates each of the
node's taints with a blocking effect (``NoSchedule``, ``NoExecute``). One rule for admission's node matching and for
the queue file's check that a flavor tolerates its node pool's taints."""
from __future__ import annotations

from typing import Any

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def blocking(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in taints if t.get("effect") in BLOCKING_EFFECTS]


def untolerated(taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocking taints ``tolerations`` do not tolerate."""
    return [t for t in blocking(taints) if not tolerated(t, tolerations)]


def tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for tol in tolerations:
        if tol.get("effect") not in (None, "", taint.get("effect")):
            continue
        if tol.get("operator") == "Exists" and tol.get("key") in (None, "", taint.get("key")):
            return True
        if tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False
