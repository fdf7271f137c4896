"""Admission's metrics at a scrape (``services.admission.metrics``): ops per queue and status, quota used,
nominal and borrowed per queue, flavor and resource, cost, and the decisions of its cycles."""
from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from services.admission import cycle, metrics
from services.runtime.metrics import exposition
from tests.builders import GPU, book, fold, op, queue, queued, t


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
    measures = metrics.Measures()
    decisions = cycle.decide(state, b, t(5), "opsched")
    measures.decided(decisions, 0.002, state.ops, t(5))

    got = scrape(lambda: [*metrics.families(state, b), *measures.families()])
    assert got[("opsched_ops", (("queue", "a"), ("status", "admitted")))] == 1
    assert got[("opsched_ops", (("queue", "a"), ("status", "queued")))] == 1
    assert got[("opsched_ops", (("queue", "b"), ("status", "running")))] == 0
    key = (("flavor", "h100"), ("queue", "a"), ("resource", GPU))
    assert (got[("opsched_queue_quota_used", key)], got[("opsched_queue_quota_nominal", key)],
            got[("opsched_queue_quota_borrowed", key)]) == (3, 2, 1)
    assert (got[("opsched_queue_cost_used", (("queue", "a"),))],
            got[("opsched_queue_cost_quota", (("queue", "a"),))]) == (2.5, 10.0)
    assert ("opsched_queue_cost_quota", (("queue", "b"),)) not in got
    assert got[("opsched_admission_decisions_total", (("result", "admitted"),))] == 1
    assert got[("opsched_admission_wait_seconds_count", (("queue", "a"),))] == 1
    assert got[("opsched_admission_wait_seconds_sum", (("queue", "a"),))] == 5.0
    assert got[("opsched_admission_cycle_duration_seconds_count", ())] == 1
