"""Every reason code admission gives is in the one table (proto.reasons), and what parking and preemption
know of a reason comes from that table."""
from __future__ import annotations

import ast
from pathlib import Path

from proto.reasons import PREEMPTION_LIFTS, REASONS, Reason, WaitsOn
from services.admission import parking
from services.admission.policies import preemption
from services.admission.queue_manager import QueueManager

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


def test_no_admission_module_spells_a_reason_code_as_a_bare_string():
    codes = {r.value for r in Reason}
    hits = []
    for path in sorted((ROOT / "services" / "admission").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in codes:
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not hits, "use proto.reasons.Reason:\n" + "\n".join(hits)
