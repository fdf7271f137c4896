"""`why` of any op, as the CLI and the web view ask it: admission's answer, completed from the op's summary (the
ops bucket, ``proto.summaries``) when the op ended and left admission's memory (admission then knows only its
status, or nothing once its tombstone is gone): its queue, name, how it ended and its history. ``client`` is an
``opsched.client.Client`` (its ``why`` and ``summary``)."""
from __future__ import annotations

from typing import Any

from opsched.proto.lifecycle import TERMINAL_LABELS
from opsched.proto.queries import WhyAnswer
from opsched.proto.summaries import OpSummary


async def why(client: Any, op_id: str, timeout: float = 5.0) -> WhyAnswer:
    answer: WhyAnswer = await client.why(op_id, timeout=timeout)
    left = answer.status in TERMINAL_LABELS and not (answer.end_reason or answer.end_message)
    if left or not answer.found:
        summary = await client.summary(op_id)
        if summary is not None:
            return with_summary(answer, summary)
    return answer


def with_summary(answer: WhyAnswer, summary: OpSummary) -> WhyAnswer:
    """``answer`` completed from the op's summary: status, queue, name, end reason and message, history."""
    answer.found, answer.reasons = True, []
    answer.status = answer.status or summary.status
    answer.queue, answer.name = answer.queue or summary.queue, answer.name or summary.name
    answer.end_reason, answer.end_message = summary.reason or summary.status, summary.message
    if not answer.history:
        answer.history, answer.history_dropped = list(summary.history), summary.history_dropped
    return answer
