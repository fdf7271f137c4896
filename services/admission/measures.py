"""What admission counts as it happens, for ``/metrics`` (``services.runtime.metrics``), named as Kueue names its
own where one matches (``kueue_`` -> ``opsched_``, ``cluster_queue`` -> ``queue``, Kueue's histogram buckets). Kept
per instance (``registry=None``: in no global registry).

Of the decisions, by the leader that decides:

- ``opsched_admission_attempts_total{result}`` and ``opsched_admission_attempt_duration_seconds{result}``
  (Kueue's): each cycle, ``success`` when it admitted an op, else ``inadmissible``, and its decide's time;
- ``opsched_admission_decisions_total{result}``: the cycles' decisions by event (admitted, preempt_requested,
  rejected, ...);
- ``opsched_admitted_workloads_total{queue}`` and ``opsched_admission_wait_time_seconds{queue}`` (Kueue's):
  admitted ops, and submitted -> admitted for each.

Of the op stream as it moves (every instance follows it, so each counts the same; events replayed at a
start are not counted):

- ``opsched_ops_submitted_total{queue}``;
- ``opsched_ops_ended_total{queue,status,reason}``: ops reaching an end (succeeded, failed, stopped, ...);
- ``opsched_preempted_workloads_total{preempting_queue,reason}`` (Kueue's): preemptions asked for, by the
  preemptor's queue and reason (``within_queue``, ``reclaim``, ...);
- ``opsched_evicted_workloads_total{queue,reason}`` (Kueue's): attempts released without the op's fault, by the
  op's queue: ``Preempted`` (its preemption done), or the eviction's reason (``gang_timeout``, ``unschedulable``, ...);
- ``opsched_retries_total{queue,reason}``: attempts that failed and will be retried;
- ``opsched_admitted_until_ready_wait_time_seconds{queue}`` (Kueue's): admitted -> running, per attempt, and
  ``opsched_ready_wait_time_seconds{queue}`` (Kueue's): submitted -> running, per attempt."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Histogram

from opsched.proto import codec
from opsched.proto.events import (
    Event,
    OperationEvicted,
    OperationPreempted,
    OperationRunning,
    OperationSubmitted,
    PreemptRequested,
    RetryScheduled,
)
from opsched.proto.lifecycle import Status

# Kueue's: the client library's default buckets for an attempt; 1 s, then 2.5 s doubling 13 times for the waits
ATTEMPT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
WAIT_BUCKETS = (1.0, *(2.5 * 2 ** i for i in range(13)))
REASON = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")  # a reason code; free text would grow the series without end
OTHER = "other"


def reason_label(reason: str) -> str:
    """``reason`` when it is a code (``OOMKilled``, ``rate_limited``), else ``other``: labels stay few."""
    return reason if REASON.fullmatch(reason or "") else OTHER


class Measures:
    def __init__(self) -> None:
        self.attempts = Counter("opsched_admission_attempts", "Admission cycles: success (an op admitted) or "
                                "inadmissible", ["result"], registry=None)
        self.attempt = Histogram("opsched_admission_attempt_duration_seconds", "One admission cycle's decide",
                                 ["result"], buckets=ATTEMPT_BUCKETS, registry=None)
        self.decisions = Counter("opsched_admission_decisions", "Decisions of admission cycles, by event",
                                 ["result"], registry=None)
        self.admitted = Counter("opsched_admitted_workloads", "Ops admitted", ["queue"], registry=None)
        self.wait = Histogram("opsched_admission_wait_time_seconds", "Submitted to admitted, per admitted op",
                              ["queue"], buckets=WAIT_BUCKETS, registry=None)
        self.submitted = Counter("opsched_ops_submitted", "Ops submitted", ["queue"], registry=None)
        self.ended = Counter("opsched_ops_ended", "Ops that reached an end", ["queue", "status", "reason"],
                             registry=None)
        self.preempted = Counter("opsched_preempted_workloads", "Preemptions asked for, by the preemptor's queue",
                                 ["preempting_queue", "reason"], registry=None)
        self.evicted = Counter("opsched_evicted_workloads", "Attempts released without the op's fault, by its queue",
                               ["queue", "reason"], registry=None)
        self.retries = Counter("opsched_retries", "Failed attempts that will be retried", ["queue", "reason"],
                               registry=None)
        self.to_running = Histogram("opsched_admitted_until_ready_wait_time_seconds", "Admitted to running, per "
                                    "attempt", ["queue"], buckets=WAIT_BUCKETS, registry=None)
        self.ready = Histogram("opsched_ready_wait_time_seconds", "Submitted to running, per attempt", ["queue"],
                               buckets=WAIT_BUCKETS, registry=None)

    def decided(self, decisions: list, seconds: float, ops: dict, now: datetime) -> None:
        admitted = False
        for decision in decisions:
            kind = codec.type_of(decision)
            self.decisions.labels(kind).inc()
            op = ops.get(decision.op_id)
            if kind == "admitted" and op is not None:
                admitted = True
                self.admitted.labels(op.queue).inc()
                self.wait.labels(op.queue).observe(max(0.0, (now - op.submitted_at).total_seconds()))
        result = "success" if admitted else "inadmissible"
        self.attempts.labels(result).inc()
        self.attempt.labels(result).observe(seconds)

    def saw(self, event: Event, ops: dict, was: Status | None) -> None:
        """A live event of the op stream, just folded; ``was``: its op's status before (None: a new op)."""
        op = ops.get(event.op_id)
        if op is None:
            return
        if isinstance(event, OperationSubmitted) and was is None:
            self.submitted.labels(op.queue).inc()
        elif isinstance(event, PreemptRequested):
            preemptor = ops.get(event.preemptor)
            self.preempted.labels(preemptor.queue if preemptor else op.queue, reason_label(event.reason)).inc()
        elif isinstance(event, OperationPreempted):
            self.evicted.labels(op.queue, "Preempted").inc()
        elif isinstance(event, OperationEvicted):
            self.evicted.labels(op.queue, reason_label(event.reason)).inc()
        elif isinstance(event, RetryScheduled):
            self.retries.labels(op.queue, reason_label(event.reason)).inc()
        elif isinstance(event, OperationRunning) and op.admitted_at is not None:
            self.to_running.labels(op.queue).observe(max(0.0, (event.at - op.admitted_at).total_seconds()))
            self.ready.labels(op.queue).observe(max(0.0, (event.at - op.submitted_at).total_seconds()))
        if op.status.terminal and (was is None or not was.terminal):
            self.ended.labels(op.queue, op.status.label, reason_label(op.reason)).inc()

    def families(self) -> list[Any]:
        out: list[Any] = []
        for metric in (self.attempts, self.attempt, self.decisions, self.admitted, self.wait, self.submitted,
                       self.ended, self.preempted, self.evicted, self.retries, self.to_running, self.ready):
            out += metric.collect()
        return out
