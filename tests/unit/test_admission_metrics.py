"""Admission's metrics at a scrape (``services.admission.metrics``), Kueue's names where one matches: pending and
admitted-active ops per queue, ops per status, quota used, nominal and borrowed per cohort, queue, flavor and
resource, the queue's status, cost, and the attempts and decisions of its cycles."""
from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from opsched.proto.events import RetryScheduled
from opsched.services.admission import cycle, metrics
from opsched.services.admission.measures import OTHER, Measures, reason_label
from opsched.services.runtime.metrics import exposition
from tests.builders import GPU, book, fold, op, queue, queued, t
from tests.builders.events import admitted, dispatched, failed, running, succeeded
from tests.builders.preemption import evicted, preempt_requested, preempted


class Families:
    def __init__(self, produce) -> None:
        self.produce = produce

    def collect(self):
        return self.produce()


def scrape(produce) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families(produce))  # type: ignore[arg-type]
    text = exposition(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def gpu_op(op_id: str, gpus: int, *, queue: str, at: float = 0, amount: float = 1.0) -> list:
    return queued(op(op_id).gpus(gpus).build(), op_id=op_id, queue=queue, at=t(at), amount=amount)


def test_ops_quota_and_cost_per_queue_and_the_decisions_of_a_cycle():
    b = book(queue("a", cohort="lab", cost_quota=10.0, gpus={"h100": 2}),
             queue("b", cohort="lab", gpus={"h100": 2}), default="a")
    state = fold(gpu_op("x", 3, queue="a", amount=2.5), gpu_op("y", 4, queue="a", at=1))
    measures = Measures()
    decisions = cycle.decide(state, b, t(5), "opsched")
    measures.decided(decisions, 0.002, state.ops, t(5))

    got = scrape(lambda: [*metrics.families(state, b), *measures.families()])
    assert got[("opsched_ops", (("queue", "a"), ("status", "admitted")))] == 1
    assert got[("opsched_ops", (("queue", "a"), ("status", "queued")))] == 1
    assert got[("opsched_ops", (("queue", "b"), ("status", "running")))] == 0
    assert got[("opsched_pending_workloads", (("queue", "a"), ("status", "active")))] == 1
    assert got[("opsched_pending_workloads", (("queue", "a"), ("status", "inadmissible")))] == 0
    assert got[("opsched_admitted_active_workloads", (("queue", "a"),))] == 1
    assert got[("opsched_admitted_active_workloads", (("queue", "b"),))] == 0
    key = (("cohort", "lab"), ("flavor", "h100"), ("queue", "a"), ("resource", GPU))
    assert (got[("opsched_queue_resource_usage", key)], got[("opsched_queue_nominal_quota", key)],
            got[("opsched_queue_resource_borrowed", key)]) == (3, 2, 1)
    assert ("opsched_queue_borrowing_limit", key) not in got   # none set: no limit
    assert got[("opsched_queue_status", (("queue", "a"), ("status", "active")))] == 1
    assert got[("opsched_queue_status", (("queue", "a"), ("status", "pending")))] == 0
    assert (got[("opsched_queue_cost_used", (("queue", "a"),))],
            got[("opsched_queue_cost_quota", (("queue", "a"),))]) == (2.5, 10.0)
    assert ("opsched_queue_cost_quota", (("queue", "b"),)) not in got
    assert got[("opsched_admission_decisions_total", (("result", "admitted"),))] == 1
    assert got[("opsched_admitted_workloads_total", (("queue", "a"),))] == 1
    assert got[("opsched_admission_wait_time_seconds_count", (("queue", "a"),))] == 1
    assert got[("opsched_admission_wait_time_seconds_sum", (("queue", "a"),))] == 5.0
    assert got[("opsched_admission_wait_time_seconds_bucket", (("le", "1.0"), ("queue", "a")))] == 0   # Kueue's
    assert got[("opsched_admission_wait_time_seconds_bucket", (("le", "5.0"), ("queue", "a")))] == 1   # buckets
    assert got[("opsched_admission_attempts_total", (("result", "success"),))] == 1
    assert got[("opsched_admission_attempt_duration_seconds_count", (("result", "success"),))] == 1
    measures.decided([], 0.001, state.ops, t(6))   # a cycle that admits nothing
    got = scrape(measures.families)
    assert got[("opsched_admission_attempts_total", (("result", "inadmissible"),))] == 1


def live(state, measures: Measures, *events) -> None:
    """Fold as admission does once it follows the op stream live: the op's status before, then ``saw``."""
    for event in events:
        before = state.ops.get(event.op_id)
        was = before.status if before is not None else None
        state.apply(event)
        measures.saw(event, state.ops, was)


def test_the_op_streams_moves_are_counted_per_queue_submitted_ends_retries_preemptions_and_start_latency():
    measures, state = Measures(), fold()
    spec = op("x").gpus(1).build()
    live(state, measures, *queued(spec, op_id="x", queue="a"), *queued(spec, op_id="y", queue="b", at=1))
    live(state, measures, admitted(spec, op_id="x", queue="a", at=t(2)), dispatched("x", at=t(2)),
         running("x", at=t(5)), preempt_requested("x", preemptor="y", reason="reclaim", at=t(6)),
         RetryScheduled(op_id="y", at=t(6), attempt=0, retry_after_s=1.0, reason="OOMKilled", retries_used=1),
         succeeded("x", at=t(9)), succeeded("x", at=t(10)))
    got = scrape(measures.families)
    assert got[("opsched_ops_submitted_total", (("queue", "a"),))] == 1
    assert got[("opsched_ops_submitted_total", (("queue", "b"),))] == 1
    assert got[("opsched_admitted_until_ready_wait_time_seconds_sum", (("queue", "a"),))] == 3.0
    assert got[("opsched_ready_wait_time_seconds_sum", (("queue", "a"),))] == 5.0
    assert got[("opsched_preempted_workloads_total", (("preempting_queue", "b"), ("reason", "reclaim")))] == 1
    assert got[("opsched_retries_total", (("queue", "b"), ("reason", "OOMKilled")))] == 1
    ended = ("opsched_ops_ended_total", (("queue", "a"), ("reason", "Completed"), ("status", "succeeded")))
    assert got[ended] == 1  # once, though the end was told twice


def test_a_failure_ends_its_op_once_and_free_text_reasons_become_other():
    measures, state = Measures(), fold()
    spec = op("x").build()
    live(state, measures, *queued(spec, op_id="x"), admitted(spec, op_id="x", at=t(1)),
         failed("x", at=t(2), reason="exit code 1: see the logs"))
    got = scrape(measures.families)
    assert got[("opsched_ops_ended_total", (("queue", "default"), ("reason", OTHER), ("status", "failed")))] == 1
    assert [reason_label(r) for r in ("OOMKilled", "rate_limited", "a b", "", "x" * 41)] == \
        ["OOMKilled", "rate_limited", OTHER, OTHER, OTHER]


def test_evictions_are_counted_per_queue_by_reason_a_preemption_once_it_is_done():
    measures, state = Measures(), fold()
    spec = op("x").gpus(1).build()
    live(state, measures, *queued(spec, op_id="x", queue="a"), admitted(spec, op_id="x", queue="a", at=t(1)),
         dispatched("x", at=t(1)), running("x", at=t(2)), preempt_requested("x", preemptor="y", at=t(3)))
    assert ("opsched_evicted_workloads_total", (("queue", "a"), ("reason", "Preempted"))) not in scrape(measures.families)
    live(state, measures, preempted("x", at=t(4), attempt=0, preemptor="y"))
    live(state, measures, admitted(spec, op_id="x", queue="a", at=t(6), attempt=1), dispatched("x", at=t(6), attempt=1),
         evicted("x", at=t(8), attempt=1, reason="gang_timeout"))
    got = scrape(measures.families)
    assert got[("opsched_evicted_workloads_total", (("queue", "a"), ("reason", "Preempted")))] == 1
    assert got[("opsched_evicted_workloads_total", (("queue", "a"), ("reason", "gang_timeout")))] == 1
