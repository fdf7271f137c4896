"""Each sink's request for one delivery: the body and headers POSTed to a connection's url.

- webhook: the JSON payload, signed (``signature``), with ``Opsched-Delivery`` (the receiver's
  de-duplication key) and ``Opsched-Event`` (the trigger's event type);
- slack: an incoming-webhook message ``{"text": ...}``;
- cloudevents: structured mode, ``application/cloudevents+json``, ``id`` = the delivery id, built by
  ``proto/cloudevents.structured`` (the one rule for how an op event becomes a CloudEvent)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from opsched.proto import cloudevents
from opsched.services.notifier import signature
from opsched.services.notifier.connections import Connection

SOURCE = "notifier"


@dataclass(frozen=True)
class Delivery:
    """What is delivered: no secret, no url — only names, which may go on the bus."""
    delivery_id: str
    connection: str
    event_type: str
    op_id: str
    time: datetime
    payload: dict[str, object]  # the op event as the CLI's json shows it


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: dict[str, str]


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str).encode()


def slack_text(d: Delivery) -> str:
    return f"opsched: operation {d.op_id} {d.event_type.replace('_', ' ')}"


def request(conn: Connection, d: Delivery, sent_at: datetime | None = None) -> Request:
    """``sent_at``: the attempt's time, the signature's timestamp (a receiver's replay window); default ``d.time``."""
    headers = dict(conn.headers)
    if conn.kind == "webhook":
        body = _dumps({"delivery": d.delivery_id, "event": d.event_type, "op": d.op_id,
                       "time": d.time.isoformat().replace("+00:00", "Z"), "data": d.payload})
        headers.update({
            "Content-Type": "application/json",
            "Opsched-Delivery": d.delivery_id,
            "Opsched-Event": d.event_type,
            signature.HEADER: signature.sign(conn.secret(), body, int((sent_at or d.time).timestamp())),
        })
    elif conn.kind == "slack":
        body = _dumps({"text": slack_text(d)})
        headers["Content-Type"] = "application/json"
    else:
        body = _dumps(cloudevents.structured(f"operation.{d.event_type}", d.delivery_id, SOURCE,
                                             d.op_id, d.time, d.payload))
        headers["Content-Type"] = "application/cloudevents+json"
    return Request(conn.url, body, headers)
