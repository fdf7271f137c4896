"""A stable fingerprint of what determines an operation's result.

Backbone scope: project, run kind, image, command, args, env, params and inputs (sorted).
Issue 6 refines this with Polyaxon's ``cache.io`` and ``cache.sections``.
"""
from __future__ import annotations

import hashlib
import json

from proto.spec import OpSpec


def fingerprint(spec: OpSpec) -> str:
    c = spec.container
    doc = {
        "project": spec.project,
        "kind": spec.run_kind,
        "image": c.image,
        "command": c.command,
        "args": c.args,
        "env": sorted((e.name, e.value) for e in c.env),
        "params": spec.params,
        "inputs": spec.inputs,
    }
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def caching_enabled(spec: OpSpec, in_batch: bool = False) -> bool:
    """Polyaxon's default: on inside a batch/sweep, off for independent ops unless ``cache.disable: false``."""
    if spec.cache.disable is not None:
        return not spec.cache.disable
    return in_batch
