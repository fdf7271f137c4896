"""CloudEvents in (the HTTP binding: binary, structured and batch mode, read with the CloudEvents SDK): an
``io.opsched.operation.submit`` event (``proto.cloudevents.SUBMIT_TYPE``) is a submit. Its data is a polyaxonfile
(YAML text; ``datacontenttype`` a YAML type, or a string) or the contract's ``OpSpec`` (a JSON object). Its op id
is the extension ``opschedopid``, else one made from the event's ``source`` and ``id`` (deterministic: a retried
delivery of the same event is the same op, submitted once); its queue the extension ``opschedqueue``, else the
spec's. Any other type: 400 naming it."""
from __future__ import annotations

import hashlib
import json
import warnings
from typing import Any

from opsched.proto import cloudevents, subjects
from opsched.proto.spec import OpSpec
from opsched.services.gateway import submits
from opsched.services.gateway.errors import ApiError

BATCH = "application/cloudevents-batch+json"
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")


def _sdk() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from cloudevents.v1 import http
    return http


def op_id_of(source: str, event_id: str) -> str:
    """A valid op id (one subject token) for the event ``(source, id)``: the same event, the same op."""
    return "ce-" + hashlib.sha256(f"{source}\0{event_id}".encode()).hexdigest()[:16]


def parsed(headers: dict[str, str], body: bytes) -> list[Any]:
    """The events of a request (the SDK's ``CloudEvent``s): a batch's each, else the one."""
    http = _sdk()
    lowered = {k.lower(): v for k, v in headers.items()}
    kind = lowered.get("content-type", "").split(";")[0].strip().lower()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if kind == BATCH:
                items = json.loads(body)
                if not isinstance(items, list):
                    raise ApiError(400, "invalid_cloudevent", "a batch is a JSON array of structured events")
                return [http.from_dict(item) for item in items]
            return [http.from_http(lowered, body)]
        except ApiError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK's own errors (missing attributes, bad JSON...)
            raise ApiError(400, "invalid_cloudevent", f"not a CloudEvent: {exc}") from None


def submits_of(event: Any, index: int) -> list[tuple[str, OpSpec]]:
    where = f"event {index}" if index else "the event"
    kind = event["type"]
    if kind != cloudevents.SUBMIT_TYPE:
        raise ApiError(400, "unsupported_event_type", f"{where}: type {kind!r}: only {cloudevents.SUBMIT_TYPE!r} "
                       "is taken", field="type")
    attributes = event.get_attributes()
    op_id = attributes.get(cloudevents.OP_ID_EXTENSION) or op_id_of(event["source"], event["id"])
    if not subjects.valid_token(op_id):
        raise ApiError(400, "invalid_op_id", f"{where}: {cloudevents.OP_ID_EXTENSION} {op_id!r} is not a valid op "
                       "id (lowercase letters, digits and dashes)", field=cloudevents.OP_ID_EXTENSION)
    queue = attributes.get(cloudevents.QUEUE_EXTENSION)
    data, content = event.data, (attributes.get("datacontenttype") or "").split(";")[0].strip().lower()
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "invalid_cloudevent", f"{where}: data is not UTF-8 text", field="data") from None
        if content not in YAML_TYPES:  # JSON bytes: the OpSpec
            try:
                data = json.loads(data)
            except ValueError:
                pass
    if isinstance(data, str):
        return submits.from_yaml(data, {"queue": queue} if queue else None, op_id, where)
    if isinstance(data, dict):
        if queue:
            data = {**data, "queue": queue}
        return submits.from_json(json.dumps(data).encode(), op_id)
    raise ApiError(400, "invalid_cloudevent", f"{where}: data must be a polyaxonfile (YAML text) or an OpSpec "
                   "(a JSON object)", field="data")


def ops_of(headers: dict[str, str], body: bytes) -> list[tuple[str, OpSpec]]:
    """Every op the request's events submit (all checked before any is sent)."""
    events = parsed(headers, body)
    batch = len(events) > 1
    return [op for i, event in enumerate(events) for op in submits_of(event, i + 1 if batch else 0)]
