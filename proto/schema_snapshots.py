"""JSON Schema snapshots of the wire contract. Regenerate with ``python -m opsched.proto.schema_snapshots``."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from opsched.proto.cluster import CLUSTER_EVENTS
from opsched.proto.commands import BULK_COMMANDS, COMMANDS
from opsched.proto.config import PricesConfigured, QueuesConfigured, SetQueues
from opsched.proto.events import EVENTS
from opsched.proto.health import HealthAnswer, HealthRequest
from opsched.proto.leases import LeaderClaimed
from opsched.proto.outputs import OUTPUTS
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
from opsched.proto.queue_stops import QueueStopSet, SetQueueStop
from opsched.proto.schedules import SCHEDULE_COMMANDS, SCHEDULE_EVENTS, ScheduleSpec
from opsched.proto.spec import OpSpec
from opsched.proto.summaries import OpSummary

SCHEMA_DIR = Path(__file__).with_name("schemas")
SCHEDULE_SCHEMA_DIR = SCHEMA_DIR / "schedules"  # schedule messages (proto.schedules), kept apart
OUTPUT_SCHEMA_DIR = SCHEMA_DIR / "output"  # what the CLI's read commands print with -o json|yaml (proto.outputs)


def render() -> dict[str, str]:
    """File name -> JSON text, for every message of the contract."""
    out: dict[str, str] = {}
    groups = {"event": EVENTS + CLUSTER_EVENTS + (QueuesConfigured, PricesConfigured, LeaderClaimed, QueueStopSet),
              "command": COMMANDS + (SetQueues, SetQueueStop) + BULK_COMMANDS,
              "query": (WhyRequest, WhyAnswer, QueuesRequest, QueuesAnswer, CostRequest, CostAnswer, HealthRequest,
                        HealthAnswer, SchedulesRequest, SchedulesAnswer, LogsRequest, LogsChunk),
              "record": (OpSummary,)}
    for kind, types in groups.items():
        for cls in types:
            tag = cls.__struct_config__.tag
            out[f"{kind}.{tag}.json"] = _dump(msgspec.json.schema(cls))
    out["spec.json"] = _dump(msgspec.json.schema(OpSpec))
    return out


def render_schedules() -> dict[str, str]:
    """File name (in ``SCHEDULE_SCHEMA_DIR``) -> JSON text, for the schedule messages."""
    out = {f"event.{cls.__struct_config__.tag}.json": _dump(msgspec.json.schema(cls)) for cls in SCHEDULE_EVENTS}
    out |= {f"command.{cls.__struct_config__.tag}.json": _dump(msgspec.json.schema(cls))
            for cls in SCHEDULE_COMMANDS}
    out["schedule_spec.json"] = _dump(msgspec.json.schema(ScheduleSpec))
    return out


def render_outputs() -> dict[str, str]:
    """File name (in ``OUTPUT_SCHEMA_DIR``) -> JSON text: ``<command>.json`` for each command's output."""
    return {f"{command}.json": _dump(required_all(msgspec.json.schema(t))) for command, t in OUTPUTS.items()}


def required_all(schema: Any) -> Any:
    """``schema`` with every property of every object required: ``opsched.output.full`` prints them all."""
    if isinstance(schema, dict):
        out = {k: required_all(v) for k, v in schema.items()}
        if out.get("type") == "object" and isinstance(out.get("properties"), dict):
            out["required"] = sorted(out["properties"])
        return out
    if isinstance(schema, list):
        return [required_all(v) for v in schema]
    return schema


def digest(directory: Path = SCHEMA_DIR) -> str:
    """sha256 of every checked-in schema (path and text, in path order): the wire contract's fingerprint."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(directory.rglob("*.json")):
        h.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _dump(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write() -> list[str]:
    return (_write(SCHEMA_DIR, render()) + [f"schedules/{n}" for n in _write(SCHEDULE_SCHEMA_DIR, render_schedules())]
            + [f"output/{n}" for n in _write(OUTPUT_SCHEMA_DIR, render_outputs())])


def _write(directory: Path, rendered: dict[str, str]) -> list[str]:
    directory.mkdir(exist_ok=True)
    for stale in directory.glob("*.json"):
        if stale.name not in rendered:
            stale.unlink()
    for name, text in rendered.items():
        (directory / name).write_text(text)
    return sorted(rendered)


if __name__ == "__main__":
    names = write()
    print(f"wrote {len(names)} schemas to {SCHEMA_DIR}", file=sys.stderr)
