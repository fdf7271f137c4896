"""The component hash: a stable id of a component's run section, for cache and cost history.

``component_hash``: first 16 hex chars of the sha256 of the canonical JSON (sorted keys) of the
normalized run section (kind, container, environment, the main pod's init steps, sidecars and
connections when it has any, and for a pytorchjob its replica groups, theirs included).
A plain job hashes exactly as before replicas existed. Params and scheduling fields are not part
of it.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from opsched.proto.spec import Container, Environment, ReplicaGroup


def component_hash(container: Container, environment: Environment,
                   replicas: list[ReplicaGroup] | tuple[()] = (), run_kind: str = "job",
                   pod: dict[str, Any] | None = None) -> str:
    """Stable id of a component's run section, for cache and cost history.

    Recompute it from a spec with ``component_hash(spec.container, spec.environment, spec.replicas,
    spec.run_kind, {"init": spec.init, "sidecars": spec.sidecars, "connections": spec.connections})``.
    A plain job hashes as it always did; other kinds add their kind and replica groups, and the main
    pod's init steps, sidecars and connections are added when it has any.
    """
    payload: dict[str, Any] = {"kind": "job", "container": msgspec.to_builtins(container),
                               "environment": msgspec.to_builtins(environment)}
    payload.update({k: msgspec.to_builtins(v) for k, v in (pod or {}).items() if v})
    if run_kind != "job" or replicas:
        payload["kind"] = run_kind
        payload["replicas"] = [msgspec.to_builtins(group) for group in replicas]
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
