"""Required node affinity, evaluated as kube-scheduler evaluates it, so admission never counts capacity on
a node the op's pods cannot go to.

``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``: the terms are
ORed; within a term every ``matchExpressions`` (on labels) and ``matchFields`` (on ``metadata.name``)
requirement must hold; a term with neither matches no node. Operators: ``In`` (the label is one of
``values``), ``NotIn`` (absent, or none of them), ``Exists``, ``DoesNotExist``, ``Gt``/``Lt`` (the label,
read as an integer, is greater/less than the single value; a label that is not an integer fails).
``preferredDuringScheduling…`` never excludes a node and is not evaluated. ``podAffinity`` and
``podAntiAffinity`` depend on other pods and are left to kube-scheduler.
"""
from __future__ import annotations

import json
from typing import Any

Terms = list[dict[str, Any]]


def required_terms(affinity: dict[str, Any] | None) -> Terms | None:
    """The required node selector terms of an affinity, or None when it requires nothing."""
    node = (affinity or {}).get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict):
        return None
    terms = required.get("nodeSelectorTerms")
    return list(terms) if isinstance(terms, list) else []


def key_of(terms: Terms | None) -> str:
    """A canonical text of the terms, to key caches by."""
    return "" if terms is None else json.dumps(terms, sort_keys=True, separators=(",", ":"))


def matches(name: str, labels: dict[str, str], terms: Terms | None) -> bool:
    """Does a node with this name and labels satisfy the required terms (None: no requirement)?"""
    if terms is None:
        return True
    return any(_term(name, labels, term) for term in terms if isinstance(term, dict))


def _term(name: str, labels: dict[str, str], term: dict[str, Any]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return (all(_holds(labels, e) for e in expressions)
            and all(_holds({"metadata.name": name}, f) for f in fields))


def _holds(labels: dict[str, str], requirement: dict[str, Any]) -> bool:
    key, op = str(requirement.get("key")), requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    present = key in labels
    value = labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])  # type: ignore[arg-type]
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def describe(terms: Terms | None) -> str:
    """'node affinity (gpu.tier In [a, b]; zone Exists)' for messages."""
    if not terms:
        return ""
    parts = []
    for term in terms:
        reqs = [*(term.get("matchExpressions") or []), *(term.get("matchFields") or [])]
        parts.append(" and ".join(f"{r.get('key')} {r.get('operator')}" + (f" [{', '.join(map(str, r['values']))}]"
                                  if r.get("values") else "") for r in reqs))
    return "node affinity (" + " or ".join(parts) + ")"
