"""The cache key of an operation (Polyaxon's semantics, made stricter; whether an op uses the cache at all is the
rule ``rules.caching``).

Polyaxon keys a run by ``uuid5(project, component_state + state)``: the component's content, then its
state: the inputs sorted by name (filtered by ``cache.io``), the non-null outputs (same filter) and the
sections named in ``cache.sections`` (default ``init``, ``connections``, ``containers``; containers add
only their command and args). opsched keeps that and, unlike Polyaxon, also keys on everything else
that changes the result: the run kind (which is also the runtime), every container's image,
environment variables, working directory and mounts, the volumes, and the replica groups (name,
count, and their containers under the same rules as the main one). The project is part of the key,
so results are never shared across projects.

What does not change the result stays out: the op's name, queue, priority, resources, placement
(node selector, tolerations, affinity), termination, cost, tags and the cache settings themselves
other than ``io`` and ``sections``.

Notes on the sections: ``init`` (every pod's init steps, every field: a git step's url, revision and
flags, a file's content; Polyaxon computes the non-container ``init`` fields, e.g. git refs, and then forgets
to add them) and ``connections`` (the names every pod's containers and steps use) are in the key unless
``cache.sections`` leaves them out; the sidecars are containers (under the same rules as the main one). A pod
without init steps, sidecars or connections keys exactly as before they existed. Leaving ``containers`` out of
``cache.sections`` means the user declares that the command and args do not change the result: only then are
they left out.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from opsched.proto.spec import Container, OpSpec

DEFAULT_SECTIONS = ("init", "connections", "containers")
KEY_VERSION = 2  # bump when the key's content changes, so old results are not reused by mistake


def fingerprint(spec: OpSpec) -> str:
    """The cache key: 32 hex characters of a sha256 over the canonical JSON of ``key_document``."""
    canonical = json.dumps(key_document(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def key_document(spec: OpSpec) -> dict[str, Any]:
    """What the key is a hash of (exposed for tests and for explaining a miss)."""
    io = set(spec.cache.io) if spec.cache.io is not None else None
    sections = set(spec.cache.sections) if spec.cache.sections is not None else set(DEFAULT_SECTIONS)
    with_commands = "containers" in sections
    component: dict[str, Any] = {
        "main": _container(spec.container, with_commands),
        "replicas": [{"name": g.name, "count": g.count, "container": _container(g.container, with_commands),
                      **_pod_extras(g, sections, with_commands)} for g in spec.replicas],
        "volumes": _canonical(spec.environment.volumes),
        **_pod_extras(spec, sections, with_commands),
        # a distributed kind's shape (``rules.replica_roles``): the main pod's role, an mpijob's slots; when set only
        **{k: v for k, v in (("mainRole", spec.main_role), ("slotsPerWorker", spec.slots_per_worker)) if v is not None},
    }
    return {
        "v": KEY_VERSION,
        "project": spec.project,
        "kind": spec.run_kind,
        "runtime": spec.run_kind,  # opsched's run kind names its runtime too (job, pytorchjob)
        "component": component,
        "state": {
            "inputs": _io(spec.inputs, io),
            "params": _io(spec.params, io),  # params fill the component's inputs and {{ templates }}
            "outputs": _io({k: v for k, v in spec.outputs.items() if v is not None}, io),
        },
    }


def _pod_extras(pod: Any, sections: set[str], with_commands: bool) -> dict[str, Any]:
    """A pod's sidecars, init steps (section ``init``) and connections (section ``connections``), each only when it
    has some (an OpSpec or a ReplicaGroup)."""
    out: dict[str, Any] = {}
    if pod.sidecars:
        out["sidecars"] = [_container(c, with_commands) for c in pod.sidecars]
    if pod.init and "init" in sections:
        out["init"] = [{**_canonical(msgspec.structs.replace(s, container=None)),
                        **({"container": _container(s.container, with_commands)} if s.container else {})}
                       for s in pod.init]
    if pod.connections and "connections" in sections:
        out["connections"] = list(pod.connections)
    return out


def _container(c: Container, with_commands: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": c.name,
        "image": c.image,
        "env": sorted([e.name, e.value] for e in c.env),
        "working_dir": c.working_dir,
        "volume_mounts": _canonical(c.volume_mounts),
    }
    if with_commands:
        doc["command"], doc["args"] = list(c.command), list(c.args)
    return doc


def _io(values: dict[str, Any], names: set[str] | None) -> list[list[Any]]:
    """Sorted by name (a list of pairs, so the order of the mapping never matters), filtered by ``io``."""
    return [[k, _canonical(values[k])] for k in sorted(values) if names is None or k in names]


def _canonical(value: Any) -> Any:
    return msgspec.to_builtins(value)

