"""A queue's defaults for its service ops (``OpSpec.run_kind`` ``service``: notebooks, TensorBoard, ...), applied
once: when admission accepts the op at submit, so its recorded spec (its ``submitted`` event) says what it runs
with, and a later change of the queue's configuration does not change an op already accepted.

Accepts an op's spec as submitted and the queue it was routed to (``proto.queues.Queue``); an op that is not a
service comes back as it is. For a service op, from its queue's ``services``:

- ``defaultPriorityClass``: its ``priority_class`` when it names neither a class nor a priority (then
  ``policies.priority`` reads it as any named class, bounded by the queue's ``maxPriorityClass``);
- ``defaultPreemptible``: its ``preemptible`` when it does not set it. An op's own ``preemptible`` is honoured
  either way (a user may run a preemptible notebook, which may then borrow and be reclaimed).

The cap on services running at once (``maxServices``) is a fit check (``policies.admit``).
"""
from __future__ import annotations

import msgspec

from opsched.proto.queues import Queue
from opsched.proto.spec import SERVICE_KIND, OpSpec


def with_defaults(spec: OpSpec, queue: Queue) -> OpSpec:
    """``spec`` with its queue's service defaults filled in where it says nothing (a service op only)."""
    if spec.run_kind != SERVICE_KIND:
        return spec
    settings = queue.services
    changes: dict[str, object] = {}
    if spec.priority_class is None and not spec.priority and settings.default_priority_class is not None:
        changes["priority_class"] = settings.default_priority_class
    if spec.preemptible is None:
        changes["preemptible"] = settings.default_preemptible
    return msgspec.structs.replace(spec, **changes) if changes else spec
