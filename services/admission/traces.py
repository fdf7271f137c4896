"""An op's trace in admission (``bus.tracing``). Admission decides in cycles, so a decision is not
the result of one message: the trace context of the op's ``submitted`` event is kept with its record while the op
is not finished (taken from the event's headers as the op stream is folded, so a replay rebuilds it), and each
decision about the op is a span, child of that context, inside which the decision is published: the dispatcher's
span for an ``admitted`` is the child of the span that admitted it."""
from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

from opsched.bus import tracing
from opsched.proto import codec
from opsched.proto.events import Event, OperationSubmitted
from opsched.services.admission.model.records import OpRecord


def remember(ops: Mapping[str, OpRecord], event: Event, headers: Mapping[str, str]) -> None:
    """Fold one event's trace context (tracing on): a ``submitted``'s is kept with its op, until the op ends."""
    op = ops.get(event.op_id)
    if op is None:
        return
    if isinstance(event, OperationSubmitted):
        op.history.trace = tracing.carrier_of(headers)
    elif op.history.trace is not None and op.status.terminal:
        op.history.trace = None


def deciding(tracer: Any, decision: Event, op: OpRecord | None, began_ns: int, decisions: int) -> Any:
    """The span of one decision of a cycle (from the cycle's start to its publish; none while tracing is off)."""
    if tracer is None:
        return nullcontext()
    kind = codec.type_of(decision)
    attributes = {
        "opsched.op_id": decision.op_id, "opsched.attempt": decision.attempt, "opsched.decision": kind,
        "opsched.queue": op.queue if op is not None else None, "opsched.reason": getattr(decision, "reason", None),
        "opsched.preemptor": getattr(decision, "preemptor", None), "opsched.cycle.decisions": decisions,
    }
    return tracing.span(tracer, f"decide {kind}", parent=op.history.trace if op is not None else None,
                        attributes=attributes, start_time=began_ns)
