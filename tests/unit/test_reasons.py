"""Every reason code admission gives is in the one table (proto.reasons), what parking and preemption
know of a reason comes from that table, and every message is its reason's template filled in."""
from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path
from string import Formatter

import pytest

from proto.queries import PendingReason
from proto.reasons import PREEMPTION_LIFTS, REASONS, Reason, Rule, WaitsOn, message, pending
from services.admission import parking
from services.admission.policies import preemption

ROOT = Path(__file__).resolve().parents[2]


def test_every_reason_has_a_rule_and_preemption_reads_the_table():
    assert set(REASONS) == set(Reason)
    assert preemption.RESOLVABLE == PREEMPTION_LIFTS
    assert Reason.NO_CAPACITY in PREEMPTION_LIFTS and Reason.BUDGET_EXHAUSTED not in PREEMPTION_LIFTS


def test_parking_waits_on_what_the_table_says():
    class State:
        def scope_key(self, queue):
            return f"scope:{queue}"

    class Op:
        queue = "q"

        class spec:
            batch = "b"

    expected = {WaitsOn.SCOPE: "scope:q", WaitsOn.CAPACITY: "capacity", WaitsOn.BUDGET: "budget",
                WaitsOn.BATCH: "batch:b", WaitsOn.TIME_OR_CONFIG: "", None: None}
    for reason, rule in REASONS.items():
        assert parking._dependency(reason, Op, State()) == expected[rule.waits_on], reason


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
    Reason.COST_QUOTA: dict(queue="q", used=6.0, estimate=6.0, quota=10.0),
    Reason.QUOTA_EXHAUSTED: dict(resource="nvidia.com/gpu", flavor="h100", used=2.0, nominal=2.0, amount=1.0,
                                 borrowing="; no cohort to borrow from", cohort=""),
    Reason.QUOTA_LENT_OUT: dict(resource="nvidia.com/gpu", flavor="h100", amount=3.0, nominal=4.0, free=2.0),
    Reason.COHORT_LENDER_WAITING: dict(lender="b", cohort="lab"),
    Reason.BORROW_LATER: {},
    Reason.NO_CAPACITY: dict(what="1 x nvidia.com/gpu"),
    Reason.UNFITTABLE: dict(what="4 x nvidia.com/gpu"),
    Reason.BUDGET_EXHAUSTED: dict(scope="queue", name="a", period="daily", spent=6.0, unit="", running="",
                                  estimate=3.0, limit=8.0, resets_at="2026-01-02T00:00:00+00:00"),
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
    Reason.UNKNOWN_OP: {},
    Reason.BAD_REQUEST: dict(error="Expected `object`, got `int`"),
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
        assert text.strip(), reason
        assert pending(reason, **fields) == PendingReason(code=reason, message=text)


def test_the_sample_messages_read_as_users_see_them():
    said = {reason: message(reason, **fields) for reason, fields in SAMPLES.items()}
    assert said[Reason.QUOTA_EXHAUSTED] == "quota of nvidia.com/gpu flavor h100 exhausted (2/2 used, needs 1; " \
                                          "no cohort to borrow from)"
    assert said[Reason.COST_QUOTA] == "queue q cost quota: 6.00 in use + 6.00 estimated > 10.00"
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

