"""What admission counts as it happens, for ``/metrics`` (``services.runtime.metrics``), named after Kueue's
where one matches. Kept per instance (``registry=None``: in no global registry).

Of the decisions, by the leader that decides:

- ``opsched_admission_decisions_total{result}``: the cycles' decisions by event (admitted, preempt_requested,
  rejected, ...);
- ``opsched_admission_cycle_duration_seconds``: one cycle's decide (Kueue's admission attempt duration);
- ``opsched_admission_wait_seconds{queue}``: submitted -> admitted, per admitted op.

Of the op stream as it moves (every instance follows it, so each counts the same; events replayed at a
start are not counted):

- ``opsched_ops_submitted_total{queue}``;
- ``opsched_ops_ended_total{queue,status,reason}``: ops reaching an end (succeeded, failed, stopped, ...);
- ``opsched_preemptions_total{queue,reason}``: preemptions asked for, by the preemptor's queue and reason
  (``within_queue``, ``reclaim``; Kueue's ``preempted_workloads_total``);
- ``opsched_retries_total{queue,reason}``: attempts that failed and will be retried;
- ``opsched_admitted_to_running_seconds{queue}``: admitted -> running, per attempt."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Histogram

from opsched.proto import codec
from opsched.proto.events import Event, OperationRunning, OperationSubmitted, PreemptRequested, RetryScheduled
from opsched.proto.lifecycle import Status

CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
START_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
REASON = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")  # a reason code; free text would grow the series without end
OTHER = "other"


def reason_label(reason: str) -> str:
    """``reason`` when it is a code (``OOMKilled``, ``rate_limited``), else ``other``: labels stay few."""
    return reason if REASON.fullmatch(reason or "") else OTHER


class Measures:
    def __init__(self) -> None:
        self.decisions = Counter("opsched_admission_decisions", "Decisions of admission cycles, by event",
                                 ["result"], registry=None)
        self.cycle = Histogram("opsched_admission_cycle_duration_seconds", "One admission cycle's decide",
                               buckets=CYCLE_BUCKETS, registry=None)
        self.wait = Histogram("opsched_admission_wait_seconds", "Submitted to admitted, per admitted op",
                              ["queue"], buckets=WAIT_BUCKETS, registry=None)
        self.submitted = Counter("opsched_ops_submitted", "Ops submitted", ["queue"], registry=None)
        self.ended = Counter("opsched_ops_ended", "Ops that reached an end", ["queue", "status", "reason"],
                             registry=None)
        self.preemptions = Counter("opsched_preemptions", "Preemptions asked for, by the preemptor's queue",
                                   ["queue", "reason"], registry=None)
        self.retries = Counter("opsched_retries", "Failed attempts that will be retried", ["queue", "reason"],
                               registry=None)
        self.to_running = Histogram("opsched_admitted_to_running_seconds", "Admitted to running, per attempt",
                                    ["queue"], buckets=START_BUCKETS, registry=None)

    def decided(self, decisions: list, seconds: float, ops: dict, now: datetime) -> None:
        self.cycle.observe(seconds)
        for decision in decisions:
            kind = codec.type_of(decision)
            self.decisions.labels(kind).inc()
            op = ops.get(decision.op_id)
            if kind == "admitted" and op is not None:
                self.wait.labels(op.queue).observe(max(0.0, (now - op.submitted_at).total_seconds()))

    def saw(self, event: Event, ops: dict, was: Status | None) -> None:
        """A live event of the op stream, just folded; ``was``: its op's status before (None: a new op)."""
        op = ops.get(event.op_id)
        if op is None:
            return
        if isinstance(event, OperationSubmitted) and was is None:
            self.submitted.labels(op.queue).inc()
        elif isinstance(event, PreemptRequested):
            preemptor = ops.get(event.preemptor)
            self.preemptions.labels(preemptor.queue if preemptor else op.queue, reason_label(event.reason)).inc()
        elif isinstance(event, RetryScheduled):
            self.retries.labels(op.queue, reason_label(event.reason)).inc()
        elif isinstance(event, OperationRunning) and op.admitted_at is not None:
            self.to_running.labels(op.queue).observe(max(0.0, (event.at - op.admitted_at).total_seconds()))
        if op.status.terminal and (was is None or not was.terminal):
            self.ended.labels(op.queue, op.status.label, reason_label(op.reason)).inc()

    def families(self) -> list[Any]:
        out: list[Any] = []
        for metric in (self.decisions, self.cycle, self.wait, self.submitted, self.ended, self.preemptions,
                       self.retries, self.to_running):
            out += metric.collect()
        return out
