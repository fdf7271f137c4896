"""JetStream's own advisories that opsched acts on. NATS defines them (JSON, snake_case keys), not
opsched; only the fields opsched reads are declared, the others are ignored."""
from __future__ import annotations

import msgspec


class MaxDeliveries(msgspec.Struct, kw_only=True):
    """JetStream stopped delivering message ``stream_seq`` of ``stream`` to ``consumer``: it reached its
    max_deliver without being acked or terminated (the process holding it died, or it was given back on
    its last delivery). Subject: ``subjects.max_deliveries_advisory(stream, consumer)``."""

    stream: str
    consumer: str
    stream_seq: int
    deliveries: int = 0


def decode_max_deliveries(data: bytes) -> MaxDeliveries:
    return msgspec.json.decode(data, type=MaxDeliveries)
