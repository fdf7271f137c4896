"""The output contract: what every read command prints with ``-o json`` (and ``-o yaml``) is valid against its
checked-in JSON Schema (``proto/schemas/output/<command>.json``, every property required: ``opsched.output.full``
prints them all), run through the real CLI entry point against the services in this process; and every command
that takes ``-o json|yaml`` has an entry in ``proto.outputs.OUTPUTS``."""
from __future__ import annotations

import argparse
import json
from datetime import timedelta

import jsonschema
import msgspec
import pytest
import yaml

from opsched import cli
from opsched.output import FORMATS, full
from opsched.proto import subjects
from opsched.proto.events import OperationSubmitted
from opsched.proto.outputs import OUTPUTS
from opsched.proto.queries import WhyAnswer
from opsched.proto.schedules import ScheduleSpec
from opsched.proto.schema_snapshots import OUTPUT_SCHEMA_DIR
from opsched.proto.summaries import OpSummary
from opsched.rules.version import version
from tests.builders import T0, op
from tests.service.test_verdicts import Cli

BUSES = ["memory"]
QUEUES = "defaultQueue: default\nqueues:\n  - name: default\n    concurrency: 1\n"


def schema_of(command: str) -> dict:
    return json.loads((OUTPUT_SCHEMA_DIR / f"{command}.json").read_text())


def valid(command: str, printed: str, fmt: str = "json") -> dict:
    data = json.loads(printed) if fmt == "json" else yaml.safe_load(printed)
    jsonschema.validate(data, schema_of(command), cls=jsonschema.Draft202012Validator)
    return data


@pytest.fixture
async def opsched(connect, bus_url, tmp_path, capsys, stack_factory) -> Cli:
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    await stack_factory(dispatcher_mode="null", queues_file=queues)
    return Cli(connect, bus_url, tmp_path / "cli", capsys)


async def test_every_read_command_prints_what_its_schema_says(opsched, client, bus, events):
    trials = []
    for i, lr in enumerate((0.1, 0.01)):
        spec = msgspec.structs.replace(op("sweep").gpus(1).params(lr=lr, bs=64).build(), batch="b-1", iteration=i,
                                       tags=["nightly"])
        trials.append(await client.submit(spec))
    for op_id in trials:
        await events.expect(OperationSubmitted, op_id)
    summary = OpSummary(op_id="old-1", status="succeeded", name="old", queue="default", gpus="2", submitted_at=T0,
                        running_since=T0, ended_at=T0 + timedelta(seconds=30), estimate=0.5, outputs={"loss": 0.1})
    kv = await bus.ensure_cache_bucket(subjects.OPS_BUCKET)
    await kv.put("old-1", msgspec.json.encode(summary))

    for fmt in ("json", "yaml"):
        code, out, err = await opsched("ops", "-o", fmt)
        assert code == 0, err
        listed = valid("ops", out, fmt)
        assert listed["type"] == "op_list"
        items = {i["opId"]: i for i in listed["items"]}
        assert set(items) == {*trials, "old-1"}
        assert [items[t]["trialParams"] for t in trials] == [{"lr": 0.1}, {"lr": 0.01}]
        assert items["old-1"]["gpus"] == 2 and items["old-1"]["durationS"] == 30.0
    for op_id in (trials[1], "old-1", "nosuch"):
        code, out, err = await opsched("why", op_id, "-o", "json")
        assert valid("why", out)["opId"] == op_id
        code, out, err = await opsched("notifications", op_id, "-o", "json")
        assert valid("notifications", out)["opId"] == op_id
    for command in ("queues", "cost"):
        code, out, err = await opsched(command, "-o", "yaml")
        assert code == 0, err
        valid(command, out, "yaml")
    await client.create_schedule(ScheduleSpec(kind="interval", frequency_s=3600, max_runs=2), op("nightly").build(),
                                 schedule_id="nightly")
    await events.expect(OperationSubmitted, "nightly-1")  # its first run: fired (and folded) before it was submitted
    code, out, err = await opsched("schedules", "-o", "json")
    [nightly] = valid("schedules", out)["schedules"]
    assert (nightly["scheduleId"], nightly["state"], nightly["runs"], nightly["maxRuns"]) == ("nightly", "active", 1, 2)
    assert nightly["lastRuns"][0]["runOpId"] == "nightly-1" and nightly["nextRunAt"].endswith("Z")
    code, out, err = await opsched("schedules", "nosuch")
    assert code == 2 and "no schedule nosuch" in err
    code, out, err = await opsched("stop", trials[0], "nosuch", "-o", "yaml")  # a verdict per op, typed
    stopped = {v["opId"]: v for v in valid("stop", out, "yaml")["items"]}
    assert code == 2 and stopped["nosuch"]["refused"] and stopped[trials[0]]["outcome"] in ("stop_requested", "stopped")
    for verb in ("approve", "reject"):
        code, out, err = await opsched(verb, "nosuch", "--timeout", "5", "-o", "json")
        assert code == 2 and valid(verb, out)["items"][0]["outcome"] == "unknown_op"
    code, out, err = await opsched("version", "-o", "json")
    info = valid("version", out)
    assert code == 0 and info["server"] == info["client"] == version() and len(info["wireSchemas"]) == 64


def _prints_output(p: argparse.ArgumentParser) -> bool:
    """``p``, or one of its own subcommands (``tokens list``), takes ``--output`` json|yaml|table."""
    for action in p._actions:
        if "--output" in action.option_strings and action.choices is not None and set(action.choices) == set(FORMATS):
            return True
        if isinstance(action, argparse._SubParsersAction) and any(map(_prints_output, action.choices.values())):
            return True
    return False


def _output_commands() -> set[str]:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name for name, p in sub.choices.items() if _prints_output(p)}


def test_every_command_with_json_and_yaml_output_has_its_type_and_schema():
    assert _output_commands() == set(OUTPUTS)
    assert {p.stem for p in OUTPUT_SCHEMA_DIR.glob("*.json")} == set(OUTPUTS)


def test_a_schema_would_refuse_an_output_missing_a_field():
    printed = full(WhyAnswer(op_id="a", found=True))
    jsonschema.validate(printed, schema_of("why"))
    del printed["position"]
    with pytest.raises(jsonschema.ValidationError, match="'position' is a required property"):
        jsonschema.validate(printed, schema_of("why"))
