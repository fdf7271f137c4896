"""CloudEvents binary content mode over NATS: ``ce-*`` headers beside the JSON body, so any
CloudEvents consumer (Knative, Argo Events, ...) can read opsched events without knowing msgspec."""
from __future__ import annotations

from datetime import datetime

SPEC_VERSION = "1.0"
TYPE_PREFIX = "io.opsched."
# what the gateway takes in (CloudEvents HTTP binding, ``services.gateway.events``): a submit, its data a
# polyaxonfile (YAML text) or the contract's ``OpSpec`` (JSON); the op id from the extension, else from the event's
# id (a retried delivery of one event is one op); the queue from the extension, else the spec's
SUBMIT_TYPE = TYPE_PREFIX + "operation.submit"
OP_ID_EXTENSION = "opschedopid"
QUEUE_EXTENSION = "opschedqueue"


def headers(kind: str, msg_id: str, source: str, subject: str | None, time: datetime | None) -> dict[str, str]:
    out = {
        "ce-specversion": SPEC_VERSION,
        "ce-id": msg_id,
        "ce-type": TYPE_PREFIX + kind,
        "ce-source": f"opsched/{source}",
        "content-type": "application/json",
    }
    if subject:
        out["ce-subject"] = subject
    if time is not None:
        out["ce-time"] = time.isoformat().replace("+00:00", "Z")
    return out


def structured(kind: str, msg_id: str, source: str, subject: str | None, time: datetime | None,
               data: object) -> dict[str, object]:
    """The same attributes in structured content mode (``application/cloudevents+json``): one JSON
    object with the attributes beside ``data`` — what the notifier's CloudEvents sink POSTs."""
    attrs: dict[str, object] = {k.removeprefix("ce-"): v for k, v in
                                headers(kind, msg_id, source, subject, time).items() if k.startswith("ce-")}
    attrs["datacontenttype"] = "application/json"
    attrs["data"] = data
    return attrs
