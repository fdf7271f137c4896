"""What a submit body becomes: the op specs and their ids. A polyaxonfile (YAML) is read by the CLI's loader
(``opsched.polyaxonfile``: overrides as ``opsched submit``'s ``-P``/``--queue``/``--priority``, a sweep's several
ops); a JSON body is the contract's ``OpSpec`` (msgspec, the field named). References to other files (``pathRef``,
``hubRef``) cannot be resolved from an HTTP body: refused, naming the field."""
from __future__ import annotations

from typing import Any

import msgspec
import yaml

from opsched.client import new_op_ids
from opsched.polyaxonfile import SpecError, parse_polyaxonfile_batch
from opsched.polyaxonfile.schedule import parse_polyaxonfile_with_schedule
from opsched.proto import codec
from opsched.proto.schedules import MAX_SCHEDULE_ID, ScheduleSpec
from opsched.proto.spec import OpSpec
from opsched.proto.subjects import valid_token
from opsched.services.gateway.errors import ApiError

REFERENCES = ("pathRef", "hubRef")


def _reference(node: Any, path: str = "") -> str | None:
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key in REFERENCES:
                return here
            found = _reference(value, here)
            if found:
                return found
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found = _reference(value, f"{path}[{i}]")
            if found:
                return found
    return None


def _document(text: str, source: str) -> None:
    """Refuses what is not YAML, and references to other files (naming the first)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ApiError(400, "invalid_yaml", f"{source}: not YAML: {exc}") from None
    ref = _reference(doc)
    if ref is not None:
        raise ApiError(400, "reference_not_allowed", f"{source}: {ref}: a reference to another file cannot be "
                       "resolved from an HTTP body; send the component inline", field=ref)


def _invalid(exc: SpecError) -> ApiError:
    first = exc.errors[0] if exc.errors else None
    return ApiError(400, "invalid_polyaxonfile", str(exc), field=first.loc if first else None,
                    errors=[{"field": e.loc, "message": e.msg, "line": e.line} for e in exc.errors])


def scheduled(text: str, overrides: dict[str, Any] | None, schedule_id: str | None,
              source: str) -> tuple[OpSpec, ScheduleSpec]:
    """The op and the schedule of a polyaxonfile with a ``schedule`` section (as ``opsched schedule FILE``)."""
    if schedule_id is not None and (not valid_token(schedule_id) or len(schedule_id) > MAX_SCHEDULE_ID):
        raise ApiError(400, "invalid_id", f"id {schedule_id!r}: use lowercase letters, digits and '-', at most "
                       f"{MAX_SCHEDULE_ID}", field="id")
    _document(text, source)
    try:
        spec, schedule = parse_polyaxonfile_with_schedule(text, source=source, overrides=overrides or None)
    except SpecError as exc:
        raise _invalid(exc) from None
    if schedule is None:
        raise ApiError(400, "no_schedule", f"{source} has no schedule section (kind: cron, interval or datetime); "
                       "POST /v1/ops runs it once", field="schedule")
    return spec, schedule


def from_yaml(text: str, overrides: dict[str, Any] | None, op_id: str | None, source: str) -> list[tuple[str, OpSpec]]:
    """The ops of a polyaxonfile, each with its id (``op_id``: as ``opsched submit --id``)."""
    _document(text, source)
    try:
        specs = parse_polyaxonfile_batch(text, source=source, overrides=overrides or None, salt=op_id)
    except SpecError as exc:
        raise _invalid(exc) from None
    return list(zip(new_op_ids(op_id, specs), specs))


def from_json(body: bytes, op_id: str | None) -> list[tuple[str, OpSpec]]:
    """The contract's ``OpSpec``, checked as a service will decode it."""
    try:
        spec = msgspec.json.decode(body, type=OpSpec)
        unknown = _unknown_fields(msgspec.json.decode(body), OpSpec)
    except msgspec.ValidationError as exc:
        raise ApiError(400, "invalid_spec", f"OpSpec refused: {exc}", field=_path_of(str(exc))) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, "invalid_json", f"not JSON: {exc}") from None
    if unknown:  # never a field ignored: refused, named
        raise ApiError(400, "unknown_field", f"OpSpec has no field {unknown!r}", field=unknown)
    try:
        spec = codec.checked(spec)
    except codec.Refused as exc:
        raise ApiError(400, "invalid_spec", str(exc), field=_path_of(str(exc))) from None
    return list(zip(new_op_ids(op_id, [spec]), [spec]))


def _unknown_fields(value: Any, kind: type) -> str | None:
    """The first key of ``value`` (an object of the struct ``kind``, recursively through nested structs) that
    ``kind`` has no field for (its wire names), or None."""
    if not isinstance(value, dict) or not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
        return None
    info = msgspec.inspect.type_info(kind)
    fields = {f.encode_name: f for f in info.fields}  # type: ignore[attr-defined]
    for key, item in value.items():
        if key not in fields:
            return key
        inner = getattr(fields[key].type, "cls", None)
        found = _unknown_fields(item, inner) if inner is not None else None
        if found:
            return f"{key}.{found}"
    return None


def _path_of(message: str) -> str | None:
    """msgspec names the field ``at `$.a.b[0]``` (a missing one: ``field `x```): that path, without ``$.``."""
    missing = message.partition("missing required field `")[2].partition("`")[0]
    _, sep, rest = message.rpartition("at `$")
    at = rest.rstrip("`").lstrip(".") if sep else ""
    return ".".join(p for p in (at, missing) if p) or None
