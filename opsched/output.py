"""The output contract of the CLI's read commands (one rule, one place): ``--output json`` or ``yaml`` prints the
command's typed answer (``opsched.proto.outputs.OUTPUTS``) in full: every field of every struct, defaults included
and absent values as null (unlike the wire, which omits defaults), names in camelCase, times in RFC 3339 UTC with a
``Z``, and a struct's ``type`` tag first (the output's kind). ``table`` is each command's own text."""
from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from typing import Any

import msgspec

from opsched.proto.outputs import OUTPUTS

TABLE, JSON, YAML = "table", "json", "yaml"
FORMATS = (TABLE, JSON, YAML)

__all__ = ["FORMATS", "JSON", "OUTPUTS", "TABLE", "YAML", "add_output", "emit", "full", "render", "timestamp"]


def add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", "-o", choices=FORMATS, default=TABLE,
                   help="table for people (default); json or yaml for scripts (every field, camelCase)")


def timestamp(at: datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` (a naive time is taken as UTC)."""
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return at.isoformat().replace("+00:00", "Z")


def full(value: Any) -> Any:
    """``value`` as JSON builtins, every struct field printed (see the module docstring)."""
    if isinstance(value, msgspec.Struct):
        config = value.__struct_config__
        out: dict[str, Any] = {}
        if isinstance(config.tag_field, str) and config.tag is not None:
            out[config.tag_field] = config.tag
        for f in msgspec.structs.fields(value):
            out[f.encode_name] = full(getattr(value, f.name))
        return out
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, dict):
        return {str(k): full(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [full(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return msgspec.to_builtins(value)


def render(value: Any, fmt: str) -> str:
    """``value`` printed as ``fmt`` (json: one document; yaml: the same data)."""
    data = full(value)
    if fmt == JSON:
        return json.dumps(data, ensure_ascii=False)
    if fmt == YAML:
        import yaml

        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n")
    raise ValueError(f"no such output format {fmt!r} (json, yaml)")


def emit(value: Any, fmt: str) -> None:
    print(render(value, fmt))
