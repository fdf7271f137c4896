"""The output contract (``opsched.output``): every field printed, defaults and nulls included, camelCase names,
RFC 3339 UTC times with a Z, the ``type`` tag first; YAML is the same data as JSON."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from opsched.output import full, render, timestamp
from opsched.proto.queries import BudgetLine, CostAnswer, PendingReason, QueuesAnswer, QueueStatus, WhyAnswer


def test_full_prints_every_field_with_its_default_and_nulls_in_camel_case_the_type_tag_first():
    out = full(WhyAnswer(op_id="a", found=True))
    assert list(out)[0] == "type" and out["type"] == "why_answer"
    assert out["opId"] == "a" and out["position"] is None and out["queuedTotal"] == 0 and out["reasons"] == []
    assert out["endReason"] == "" and "op_id" not in out


def test_nested_structs_are_printed_in_full_too():
    out = full(QueuesAnswer(queues=[QueueStatus(name="q")]))
    [q] = out["queues"]
    assert q["cohort"] is None and q["maxServices"] is None and q["usage"] == [] and q["costUsed"] == 0.0


@pytest.mark.parametrize("at, text", [
    (datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "2026-01-02T03:04:05Z"),
    (datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2))), "2026-01-02T03:04:05Z"),
    (datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05Z"),  # naive: taken as UTC
])
def test_times_are_rfc3339_utc_with_a_z(at, text):
    assert timestamp(at) == text
    assert full(BudgetLine(scope="queue", name="q", window="day", resets_at=at))["resetsAt"] == text


def test_yaml_is_the_same_data_as_json():
    answer = CostAnswer(at=datetime(2026, 1, 2, tzinfo=timezone.utc), budgets=[BudgetLine(scope="q", name="n",
                                                                                            window="day")])
    why = WhyAnswer(op_id="a", found=True, reasons=[PendingReason(code="no_capacity", message="full: ünïcode")])
    for value in (answer, why):
        assert yaml.safe_load(render(value, "yaml")) == json.loads(render(value, "json")) == full(value)


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="no such output format 'xml'"):
        render(WhyAnswer(op_id="a", found=False), "xml")
