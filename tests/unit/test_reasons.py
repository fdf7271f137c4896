"""Every reason code admission gives is in the one table (proto.reasons), what parking and preemption
know of a reason comes from that table, and every message is its reason's template filled in."""
from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path
from string import Formatter

import msgspec
import pytest

from opsched.proto.queries import PendingReason
from opsched.proto.reasons import PREEMPTION_LIFTS, REASONS, Reason, Rule, WaitsOn, message, pending
from opsched.services.admission import cycle, parking, queries
from opsched.services.admission.policies import preemption
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.admission.state.queue_manager import QueueManager
from tests.builders import GPU, book, fold, op, queue, queued, running, submitted, succeeded, t
from tests.builders import node as node_observed
from tests.unit import preemption_scenarios as preempting

ROOT = Path(__file__).resolve().parents[2]


def test_every_reason_has_a_rule_and_preemption_reads_the_table():
    assert set(REASONS) == set(Reason)
    assert preemption.RESOLVABLE == PREEMPTION_LIFTS
    assert Reason.NO_CAPACITY in PREEMPTION_LIFTS and Reason.BUDGET_EXHAUSTED not in PREEMPTION_LIFTS


def test_parking_waits_on_what_the_table_says():
    class Op:
        queue = "q"

        class spec:
            batch = "b"

    expected = {WaitsOn.SCOPE: "scope:q", WaitsOn.CAPACITY: "capacity", WaitsOn.BUDGET: "budget",
                WaitsOn.BATCH: "batch:b", WaitsOn.TIME_OR_CONFIG: "", None: None}
    for reason, rule in REASONS.items():
        assert parking._dependency(reason, Op, QueueManager({})) == expected[rule.waits_on], reason


def test_the_manuals_table_has_every_reason_as_the_table_says_it():
    """docs/queues.md's reason codes: one row per code, with what it means and whether preemption may lift it."""
    text = (ROOT / "docs" / "queues.md").read_text()
    section = text.split("## Why an op waits: the reason codes\n", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `"):
            rows[cells[0].strip("`")] = tuple(cells[1:])
    assert rows == {r.value: (rule.means, "yes" if rule.preemption_lifts else "no") for r, rule in REASONS.items()}


def test_no_admission_module_spells_a_reason_code_as_a_bare_string():
    codes = {r.value for r in Reason}
    hits = []
    for path in sorted((ROOT / "services" / "admission").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in codes:
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not hits, "use proto.reasons.Reason:\n" + "\n".join(hits)


# ---- message templates ------------------------------------------------------------------------

SAMPLES: dict[Reason, dict[str, object]] = {  # fields that fill each reason's template
    Reason.QUEUE_CONCURRENCY: dict(queue="q", running=2, limit=2),
    Reason.MAX_SERVICES: dict(queue="q", running=2, limit=2),
    Reason.COST_QUOTA: dict(queue="q", used=6.0, estimate=6.0, flavor=" on flavor a100", quota=10.0),
    Reason.QUOTA_EXHAUSTED: dict(resource="nvidia.com/gpu", flavor="h100", used=2.0, nominal=2.0, amount=1.0,
                                 borrowing="; no cohort to borrow from", cohort=""),
    Reason.QUOTA_LENT_OUT: dict(resource="nvidia.com/gpu", flavor="h100", amount=3.0, nominal=4.0, free=2.0),
    Reason.COHORT_LENDER_WAITING: dict(lender="b", cohort="lab"),
    Reason.BORROW_LATER: {},
    Reason.NONPREEMPTIBLE_OVER_NOMINAL: dict(queue="q", resource="nvidia.com/gpu", flavor="h100", cohort="lab",
                                             used=2.0, amount=1.0, nominal=2.0, never=""),
    Reason.NO_CAPACITY: dict(what="1 x nvidia.com/gpu"),
    Reason.UNFITTABLE: dict(what="4 x nvidia.com/gpu"),
    Reason.BUDGET_EXHAUSTED: dict(scope="queue", name="a", period="daily", spent=6.0, unit="", running="",
                                  estimate=3.0, flavor="", limit=8.0, resets_at="2026-01-02T00:00:00+00:00"),
    Reason.BATCH_CONCURRENCY: dict(batch="sweep", running=2, limit=2),
    Reason.BACKOFF: dict(after="pods_not_ready", until=datetime(2026, 1, 1, 12, 2, 10, tzinfo=timezone.utc)),
    Reason.QUEUE_REMOVED: dict(queue="old"),
    Reason.NO_MATCHING_FLAVOR: dict(queue="b", selector={"nvidia.com/gpu.product": "H100"}),
    Reason.WAITING_FOR_VICTIMS: dict(count=2, victims="a, b"),
    Reason.NEXT_CYCLE: dict(ready="fits now", step="admits"),
    Reason.QUEUE_POSITION: dict(ahead=1, queue="solo"),
    Reason.WAITING_COST_ESTIMATE: {},
    Reason.WAITING_CACHE: {},
    Reason.ON_HOLD: dict(why="waiting for approval"),
    Reason.RETRYING: dict(attempt=1, failure="OOMKilled"),
    Reason.BEING_PREEMPTED: dict(preemptor="hi"),
    Reason.WAITING_FOR_DEPENDENCY: dict(dependency="the Kubernetes API", since=datetime(2026, 1, 1, 12, 0,
                                                                                    tzinfo=timezone.utc),
                                        detail="503 Service Unavailable"),
    Reason.HANDLER_FAILED: dict(service="dispatcher", failed="admitted", error="gave up after 5 deliveries"),
    Reason.UNKNOWN_OP: {},
    Reason.AGENT_SILENT: dict(agent="agent-b", since=datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)),
    Reason.BAD_REQUEST: dict(error="Expected `object`, got `int`"),
    Reason.RESOURCE_NOT_COVERED: dict(queue="cpu", resource="nvidia.com/gpu", covered="cpu, memory", amount=2.0),
    Reason.USER_PENDING_CAP: dict(user="ann", count=1000, queue="default", cap=1000),
    Reason.QUEUE_HELD: dict(queue="gpu", state="held", by="ops-admin", since=datetime(2026, 1, 1, 12, 0,
                                                                                   tzinfo=timezone.utc),
                            comment=" (node upgrade)"),
    Reason.WAITING_FOR_NODE: dict(count=1, pool="a100", since=datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc),
                                  expected=300.0, deadline=datetime(2026, 1, 1, 12, 15, tzinfo=timezone.utc)),
    Reason.POOL_AT_MAX: dict(pool="a100", nodes=4, max=4, leaving=", 1 leaving", what="8 x nvidia.com/gpu"),
    Reason.POOL_BUDGET: dict(pool="a100", period="daily", resets_at=datetime(2026, 1, 2, tzinfo=timezone.utc),
                             nodes=2),
}


def test_every_reason_has_a_template_whose_fields_are_all_named():
    for reason, rule in REASONS.items():
        assert rule.template.strip(), reason
        names = [name for _, name, _, _ in Formatter().parse(rule.template) if name is not None]
        assert all(name.isidentifier() for name in names), (reason, names)
        assert rule.fields == frozenset(names), reason


@pytest.mark.parametrize("template", ["{} ops", "{0} ops", "{op.id}", "{ops[0]}"])
def test_a_template_with_a_positional_or_dotted_field_is_refused(template):
    with pytest.raises(ValueError, match="fields must be named"):
        Rule("means", template)


def test_every_template_is_filled_by_exactly_its_fields():
    assert set(SAMPLES) == set(Reason)
    for reason, fields in SAMPLES.items():
        assert set(fields) == REASONS[reason].fields, reason
        text = message(reason, **fields)
        assert text == REASONS[reason].template.format(**fields), reason  # the compiled template says the same
        assert text.strip(), reason
        assert pending(reason, **fields) == PendingReason(code=reason, message=text)


def test_the_sample_messages_read_as_users_see_them():
    said = {reason: message(reason, **fields) for reason, fields in SAMPLES.items()}
    assert said[Reason.QUOTA_EXHAUSTED] == "quota of nvidia.com/gpu flavor h100 exhausted (2/2 used, needs 1; " \
                                          "no cohort to borrow from)"
    assert said[Reason.COST_QUOTA] == "queue q cost quota: 6.00 in use + 6.00 estimated on flavor a100 > 10.00"
    assert said[Reason.BACKOFF] == "backing off after pods_not_ready until 12:02:10"
    assert said[Reason.QUEUE_REMOVED] == "queue 'old' is no longer configured"
    assert said[Reason.WAITING_FOR_VICTIMS] == "waiting for 2 preempted op(s) to terminate: a, b"


@pytest.mark.parametrize("fields, says", [
    (dict(count=2), r"missing fields \['victims'\], unexpected fields \[\]"),
    (dict(count=2, victims="a, b", op="x"), r"missing fields \[\], unexpected fields \['op'\]"),
    ({}, r"missing fields \['count', 'victims'\]"),
])
def test_a_missing_or_unexpected_field_is_a_programming_error(fields, says):
    with pytest.raises(TypeError, match=says):
        message(Reason.WAITING_FOR_VICTIMS, **fields)
    with pytest.raises(TypeError, match="waiting_for_victims"):
        pending(Reason.WAITING_FOR_VICTIMS, **fields)


def test_a_template_without_fields_takes_none():
    assert message(Reason.WAITING_CACHE) == "waiting for the cache service's answer"
    with pytest.raises(TypeError, match=r"unexpected fields \['op_id'\]"):
        message(Reason.UNKNOWN_OP, op_id="x")


# ---- what the cycle and `why` say is the template filled in -----------------------------------

def gpu_op(op_id: str, gpus: int, *, queue: str, at: float = 0, amount: float = 1.0) -> list:
    return queued(op(op_id).gpus(gpus).build(), op_id=op_id, queue=queue, at=t(at), amount=amount)


def blocked_after_a_cycle(b, *ops: list, nodes: tuple = ()) -> AdmissionState:
    state = fold(*nodes, *ops)
    cycle.decide(state, b, t(60), "opsched")
    return state


def test_the_cycle_keeps_the_templates_filled_in():
    state = blocked_after_a_cycle(book(queue("gpu", gpus={"h100": 2})), gpu_op("a", 2, queue="gpu"),
                                  gpu_op("b", 1, queue="gpu", at=1))
    assert state.ops["b"].blocked == [pending(Reason.QUOTA_EXHAUSTED, resource=GPU, flavor="h100", used=2,
                                              nominal=2, amount=1, borrowing="; no cohort to borrow from", cohort="")]
    state = blocked_after_a_cycle(book(queue("q", cost_quota=10.0)), gpu_op("a", 0, queue="q", amount=6.0),
                                  gpu_op("b", 0, queue="q", at=1, amount=6.0))
    assert state.ops["b"].blocked == [pending(Reason.COST_QUOTA, queue="q", used=6.0, estimate=6.0, quota=10.0,
                                              flavor="")]
    state = blocked_after_a_cycle(book(queue("gpu", gpus={"h100": 8})), gpu_op("a", 1, queue="gpu"),
                                  gpu_op("b", 1, queue="gpu", at=1), nodes=(node_observed("h-1", gpus=1, product="H100"),))
    assert state.ops["b"].blocked == [pending(Reason.NO_CAPACITY, what="1 x nvidia.com/gpu of product H100")]


def test_a_lender_and_its_borrower_are_told_with_the_templates():
    b = book(queue("a", cohort="lab", gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 4}))
    state = blocked_after_a_cycle(b, gpu_op("x", 4, queue="a"))  # x borrows 2 of b's idle quota
    fold(gpu_op("y", 3, queue="b", at=1), gpu_op("z", 1, queue="a", at=2), state=state)
    cycle.decide(state, b, t(61), "opsched")
    assert state.ops["y"].blocked == [pending(Reason.QUOTA_LENT_OUT, resource=GPU, flavor="h100", amount=3,
                                              nominal=4, free=2)]
    assert state.ops["z"].blocked == [pending(Reason.COHORT_LENDER_WAITING, lender="b", cohort="lab")]


def test_a_preemptor_waits_for_its_victims_with_the_template():
    state = fold(preempting.gpu_op("lo", 1, priority=0), preempting.gpu_op("peer", 1, priority=10, at=1))
    preempting.start(state, preempting.Q2, 2, "peer", "lo")
    fold(preempting.gpu_op("hi", 1, priority=10, at=10), state=state)
    said = [pending(Reason.WAITING_FOR_VICTIMS, count=1, victims="lo")]
    preempting.decide(state, preempting.Q2, t(20))  # the cycle that plans the preemption
    assert state.ops["hi"].blocked == said
    preempting.decide(state, preempting.Q2, t(25))  # a later one, while the victim's pods still run
    assert state.ops["hi"].blocked == said == queries.why(state, preempting.Q2, "hi", t(25)).reasons


def test_why_answers_with_the_templates_filled_in():
    b = book(queue("solo", concurrency=1))
    state = blocked_after_a_cycle(b, *[gpu_op(i, 0, queue="solo", at=n) for n, i in enumerate("abc")])
    assert queries.why(state, b, "c", t(60)).reasons == [
        pending(Reason.QUEUE_CONCURRENCY, queue="solo", running=1, limit=1),
        pending(Reason.QUEUE_POSITION, ahead=1, queue="solo")]
    fold(running("a", at=t(61)), succeeded("a", at=t(62)), state=state)
    assert queries.why(state, b, "c", t(63)).reasons == [  # c was not looked at: its queue was full
        pending(Reason.NEXT_CYCLE, ready="fits now", step="admits"),
        pending(Reason.QUEUE_POSITION, ahead=1, queue="solo")]
    swept = msgspec.structs.replace(op("s").build(), batch="sweep-1")  # an op of a batch: it uses the cache
    state = fold(gpu_op("g", 0, queue="solo"), submitted(op("p").build(), op_id="p", queue="solo"),
                 queued(swept, op_id="s", queue="solo"), submitted(swept, op_id="w", queue="solo"))
    assert queries.why(state, b, "g").reasons == [
        pending(Reason.NEXT_CYCLE, ready="its estimate is in (caching is off)", step="queues")]
    assert queries.why(state, b, "s").reasons == [
        pending(Reason.NEXT_CYCLE, ready="its estimate and cache answer are in", step="queues")]
    assert queries.why(state, b, "p").reasons == [pending(Reason.WAITING_COST_ESTIMATE)]  # caching off
    assert queries.why(state, b, "w").reasons == [pending(Reason.WAITING_COST_ESTIMATE), pending(Reason.WAITING_CACHE)]
    assert queries.why(state, b, "ghost").reasons == [pending(Reason.UNKNOWN_OP)]
