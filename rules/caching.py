"""Whether an op uses the cache, the rule (Polyaxon's defaults): the cache service looks up only such ops, and
admission waits for the cache's answer (a hit, a miss or a wait) only for them. For every other op the answer is
known from its ``submitted`` alone, so the cache says nothing at submit and admission counts its cache gate as
answered there (issue 36: fewer messages per op). Pure: it reads only the spec and the ``submitted`` event."""
from __future__ import annotations

from opsched.proto.events import OperationSubmitted
from opsched.proto.spec import OpSpec


def caching_enabled(spec: OpSpec, *, clone: bool = False) -> bool:
    """Polyaxon's defaults: ``cache.disable: true`` always wins and ``disable: false`` always turns it on;
    otherwise it is on for an op inside a batch (a sweep: ``spec.batch``) and off for independent ops,
    schedules and clones (a restart or a copy)."""
    if spec.cache.disable is not None:
        return not spec.cache.disable
    if clone:
        return False
    return spec.batch is not None


def uses_cache(event: OperationSubmitted) -> bool:
    """Whether the op ``event`` submits uses the cache: its spec's setting, a restart or copy of another op
    (``relation``) being a clone."""
    return caching_enabled(event.spec, clone=event.relation is not None)
