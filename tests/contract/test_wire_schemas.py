"""The wire contract (c): the checked-in JSON Schemas match the code."""
from __future__ import annotations

import json

import pytest

from opsched.proto.commands import BULK_COMMANDS, COMMANDS
from opsched.proto.events import EVENTS
from opsched.proto.schema_snapshots import SCHEMA_DIR, render
from tests.contract.wire_samples import tag_of

# ---- (c) schema snapshots ---------------------------------------------------------------------

REGENERATE = "the wire contract changed: run `python -m opsched.proto.schema_snapshots` and commit proto/schemas/"


def test_there_is_a_schema_snapshot_for_every_message_and_the_spec():
    from opsched.proto.cluster import CLUSTER_EVENTS
    from opsched.proto.config import PricesConfigured, QueuesConfigured
    from opsched.proto.health import HealthAnswer, HealthRequest
    from opsched.proto.leases import LeaderClaimed
    from opsched.proto.queries import (
        CostAnswer,
        CostRequest,
        LogsChunk,
        LogsRequest,
        QueuesAnswer,
        QueuesRequest,
        SchedulesAnswer,
        SchedulesRequest,
        WhyAnswer,
        WhyRequest,
    )
    from opsched.proto.queue_stops import QueueStopSet

    events = EVENTS + CLUSTER_EVENTS + (QueuesConfigured, PricesConfigured, LeaderClaimed, QueueStopSet)
    expected = {f"event.{tag_of(c)}.json" for c in events} | {f"command.{tag_of(c)}.json" for c in COMMANDS}
    expected |= {"command.set_queues.json", "command.set_queue_stop.json"}
    expected |= {f"command.{tag_of(c)}.json" for c in BULK_COMMANDS}
    expected |= {f"query.{tag_of(c)}.json" for c in (WhyRequest, WhyAnswer, QueuesRequest, QueuesAnswer,
                                                             CostRequest, CostAnswer, HealthRequest, HealthAnswer,
                                                             SchedulesRequest, SchedulesAnswer, LogsRequest, LogsChunk)}
    expected |= {"record.op_summary.json"}  # the summary of an op that left admission's memory (ops bucket)
    assert set(render()) == expected | {"spec.json"}


@pytest.mark.parametrize("name", sorted(render()))
def test_the_checked_in_schema_equals_the_code(name):
    path = SCHEMA_DIR / name
    assert path.exists(), f"{name} is missing; {REGENERATE}"
    assert path.read_text() == render()[name], f"{name} drifted; {REGENERATE}"


def test_no_stale_schema_files_remain():
    stale = sorted(p.name for p in SCHEMA_DIR.glob("*.json") if p.name not in render())
    assert stale == [], f"stale schemas {stale}; {REGENERATE}"


def test_a_schema_snapshot_is_valid_json_naming_the_message():
    doc = json.loads((SCHEMA_DIR / "event.submitted.json").read_text())
    assert "OperationSubmitted" in json.dumps(doc)


def test_the_checked_in_output_schemas_equal_the_code():
    from opsched.proto.outputs import OUTPUTS
    from opsched.proto.schema_snapshots import OUTPUT_SCHEMA_DIR, render_outputs

    rendered = render_outputs()
    assert set(rendered) == {f"{command}.json" for command in OUTPUTS}
    on_disk = {p.name: p.read_text() for p in OUTPUT_SCHEMA_DIR.glob("*.json")}
    assert on_disk == rendered, REGENERATE
