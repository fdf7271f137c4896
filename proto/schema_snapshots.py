"""JSON Schema snapshots of the wire contract. Regenerate with ``python -m opsched.proto.schema_snapshots``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from opsched.proto.cluster import CLUSTER_EVENTS
from opsched.proto.commands import COMMANDS
from opsched.proto.config import PricesConfigured, QueuesConfigured, SetQueues
from opsched.proto.events import EVENTS
from opsched.proto.health import HealthAnswer, HealthRequest
from opsched.proto.leases import LeaderClaimed
from opsched.proto.queries import (
    CostAnswer,
    CostRequest,
    LogsChunk,
    LogsRequest,
    QueuesAnswer,
    QueuesRequest,
    WhyAnswer,
    WhyRequest,
)
from opsched.proto.schedules import SCHEDULE_COMMANDS, SCHEDULE_EVENTS, ScheduleSpec
from opsched.proto.spec import OpSpec
from opsched.proto.summaries import OpSummary

SCHEMA_DIR = Path(__file__).with_name("schemas")
SCHEDULE_SCHEMA_DIR = SCHEMA_DIR / "schedules"  # schedule messages (proto.schedules), kept apart


def render() -> dict[str, str]:
    """File name -> JSON text, for every message of the contract."""
    out: dict[str, str] = {}
    groups = {"event": EVENTS + CLUSTER_EVENTS + (QueuesConfigured, PricesConfigured, LeaderClaimed),
              "command": COMMANDS + (SetQueues,),
              "query": (WhyRequest, WhyAnswer, QueuesRequest, QueuesAnswer, CostRequest, CostAnswer, HealthRequest,
                        HealthAnswer, LogsRequest, LogsChunk),
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


def _dump(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write() -> list[str]:
    return _write(SCHEMA_DIR, render()) + [f"schedules/{n}" for n in _write(SCHEDULE_SCHEMA_DIR, render_schedules())]


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
