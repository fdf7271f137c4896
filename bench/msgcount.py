"""Messages per op, from nats-server's own counters: its monitoring endpoint's ``/varz`` (``in_msgs``: every
message a client sent the server, ``out_msgs``: every message the server sent a client) and ``/jsz`` (JetStream:
the messages each stream stored, each consumer delivered and had acknowledged, the JetStream API requests),
snapshot before and after a stretch of work, the difference divided by the ops.

The breakdown, per op:

- ``publishes``: messages stored on the streams (events, commands, key-value puts), each a client's publish
  (and a publish acknowledgement back: ``pub_acks``, the same number);
- ``deliveries``: messages JetStream consumers delivered (pulls, ordered consumers' follows alike);
- ``follows``: of those, what the ordered consumers delivered (no ack policy: the follows that rebuild each
  service's state, paid once per instance that folds);
- ``acks``: deliveries acknowledged (consumers with an ack policy: an ordered consumer's are not acks);
- ``js_api``: JetStream API requests (consumer and stream info and creates; not direct gets, which nats-server
  does not count as API requests);
- ``other_in`` / ``other_out``: the rest of what clients sent (pull-fetch requests, direct gets of key-value
  reads, core requests such as the queries, heartbeats) and of what the server sent (their replies, core
  subscriptions' deliveries).

``msgs`` is ``in + out``: every message nats-server handled for the ops, both ways. A bench connection that only
watches (the observer) is not the system's work: its deliveries are subtracted (``exclude_out``).

By connection (``/connz``, each service's connection is named for it): the messages each one sent and was sent
(``by_connection``): which service the messages per op go to. Subjects are not counted by nats-server.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSZ_QUERY = "/jsz?accounts=true&streams=true&consumers=true&config=true"
CONNZ_QUERY = "/connz?limit=10000"
PARTS = ("publishes", "pub_acks", "deliveries", "follows", "acks", "js_api", "other_in", "other_out")


@dataclass(frozen=True)
class Snapshot:
    """The counters of one moment: server totals, and per consumer (``stream/name``) delivered and acked."""

    in_msgs: int
    out_msgs: int
    js_api: int
    stored: dict[str, int] = field(default_factory=dict)  # stream -> last sequence (every message it ever stored)
    delivered: dict[str, int] = field(default_factory=dict)  # consumer -> delivered consumer sequence
    acked: dict[str, int] = field(default_factory=dict)  # consumer (with an ack policy) -> ack floor
    connections: dict[int, tuple[str, int]] = field(default_factory=dict)  # cid -> (name, in + out messages)


def snapshot(varz: dict[str, Any], jsz: dict[str, Any], connz: dict[str, Any] | None = None) -> Snapshot:
    """A ``Snapshot`` from the decoded ``/varz``, ``/jsz`` (``JSZ_QUERY``) and ``/connz`` answers."""
    stored: dict[str, int] = {}
    delivered: dict[str, int] = {}
    acked: dict[str, int] = {}
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            name = f"{account.get('name', '')}/{stream['name']}"
            stored[name] = int((stream.get("state") or {}).get("last_seq", 0))
            for consumer in stream.get("consumer_detail") or []:
                key = f"{name}/{consumer['name']}"
                delivered[key] = int((consumer.get("delivered") or {}).get("consumer_seq", 0))
                if (consumer.get("config") or {}).get("ack_policy", "explicit") != "none":
                    acked[key] = int((consumer.get("ack_floor") or {}).get("consumer_seq", 0))
    connections = {int(c["cid"]): (c.get("name") or "unnamed", int(c.get("in_msgs", 0)) + int(c.get("out_msgs", 0)))
                   for c in (connz or {}).get("connections") or []}
    return Snapshot(in_msgs=int(varz["in_msgs"]), out_msgs=int(varz["out_msgs"]),
                    js_api=int((jsz.get("api") or {}).get("total", 0)), stored=stored, delivered=delivered,
                    acked=acked, connections=connections)


def _grown(before: dict[str, int], after: dict[str, int]) -> int:
    """What the counters grew by: a consumer or stream born in between counts from zero; one gone in between
    (an ordered consumer recreated) counts what it had at the first snapshot as already spent."""
    return sum(max(0, value - before.get(key, 0)) for key, value in after.items())


def counts(before: Snapshot, after: Snapshot, exclude_out: int = 0, exclude_in: int = 0) -> dict[str, int]:
    """The messages between two snapshots, by kind (``PARTS``), with ``in``, ``out`` and ``msgs`` (their sum);
    ``exclude_out`` / ``exclude_in``: messages of the bench's own watching connections, taken off."""
    total_in = after.in_msgs - before.in_msgs - exclude_in
    total_out = after.out_msgs - before.out_msgs - exclude_out
    publishes = _grown(before.stored, after.stored)
    deliveries = _grown(before.delivered, after.delivered)
    follows = _grown(before.delivered, {k: v for k, v in after.delivered.items() if k not in after.acked})
    acks = _grown(before.acked, after.acked)
    api = after.js_api - before.js_api
    return {"in": total_in, "out": total_out, "msgs": total_in + total_out,
            "publishes": publishes, "pub_acks": publishes, "deliveries": deliveries, "follows": follows, "acks": acks,
            "js_api": api,
            "other_in": total_in - publishes - acks - api, "other_out": total_out - publishes - deliveries - api}


def by_connection(before: Snapshot, after: Snapshot, skip: tuple[str, ...] = ()) -> dict[str, int]:
    """The messages (in + out) of each connection name between two snapshots, summed over the connections of a
    name, those of ``skip`` left out; a connection opened in between counts from zero (one closed in between,
    not at all: nats-server forgets it)."""
    out: dict[str, int] = {}
    for cid, (name, msgs) in after.connections.items():
        if name in skip:
            continue
        out[name] = out.get(name, 0) + msgs - before.connections.get(cid, (name, 0))[1]
    return out


def by_consumer(before: Snapshot, after: Snapshot) -> dict[str, int]:
    """What each consumer (``account/stream/name``; ordered consumers by their random names) delivered between two
    snapshots, and each stream (``account/stream``) stored: where the deliveries and publishes per op go."""
    grown = {f"delivered {k}": v - before.delivered.get(k, 0) for k, v in after.delivered.items()}
    grown |= {f"stored {k}": v - before.stored.get(k, 0) for k, v in after.stored.items()}
    return {k: v for k, v in grown.items() if v > 0}


def per_op(counted: dict[str, int], ops: int) -> dict[str, float]:
    """``msgs_per_op`` and each part ``<part>_per_op`` (NaN without ops)."""
    if ops <= 0:
        return {f"{k}_per_op": float("nan") for k in ("msgs", "in", "out", *PARTS)}
    return {f"{k}_per_op": counted[k] / ops for k in ("msgs", "in", "out", *PARTS)}


class Monitor:
    """Snapshots of a nats-server's monitoring endpoint (``NatsServer.monitor_url``)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def take(self) -> Snapshot:
        from opsched.natsserver import get_json

        return snapshot(get_json(self.url + "/varz", timeout=5.0), get_json(self.url + JSZ_QUERY, timeout=5.0),
                        get_json(self.url + CONNZ_QUERY, timeout=5.0))
