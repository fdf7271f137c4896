"""The notifier on a real nats-server (TLS + per-service users): an op's end reaches a real local HTTP receiver as a
signed webhook (verified with the documented scheme) and as a structured CloudEvent (parsed with the ``cloudevents``
SDK); a receiver that is down gets it once back, every attempt recorded; past the bounded time, a dead letter and a
final ``notification_failed``; a hanging receiver does not delay admission (dispatcher in null mode: the test
publishes the op's end itself)."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timezone

import msgspec
import pytest
from cloudevents.v1.http import from_http

from opsched.proto import subjects
from opsched.proto.events import (
    NotificationAttempted,
    NotificationDue,
    NotificationFailed,
    OperationAdmitted,
    OperationSucceeded,
)
from opsched.proto.outputs import NotificationsAnswer
from opsched.proto.spec import Notification
from opsched.rules.op_history import entry_of
from opsched.services.notifier import signature
from opsched.tables import notifications_text
from tests.builders import op
from tests.http_receiver import SECRET, Receiver, connections_file, serving
from tests.waiting import eventually

BUSES = ["nats"]  # JetStream's delayed redelivery is the retry mechanism: on the real server alone
SERVICES = ("admission", "cost", "cache", "dispatcher", "notifier")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from serving()


async def notifier_stack(stack_factory, tmp_path, port: int, subscriptions: str = "", **overrides):
    settings = {"notify_backoff_base_s": 0.05, "notify_backoff_cap_s": 0.2, "notify_timeout_s": 2.0} | overrides
    return await stack_factory(SERVICES, dispatcher_mode="null",
                               connections_file=connections_file(tmp_path, port, subscriptions), **settings)


def notifying(name: str, *connections: str, trigger: str = "done"):
    spec = op(name).build()
    return msgspec.structs.replace(spec, notifications=[Notification(trigger=trigger, connections=list(connections))])


async def ended(bus, op_id: str) -> None:
    await bus.publish(OperationSucceeded(op_id=op_id, at=datetime.now(timezone.utc), pod_name=f"op-{op_id}-0"))


async def test_an_ops_end_reaches_the_receiver_as_a_signed_webhook_and_a_cloudevent(stack_factory, bus, client,
                                                                                    events, receiver, tmp_path):
    await notifier_stack(stack_factory, tmp_path, receiver.port)
    op_id = await client.submit(notifying("train", "ops-hook", "ce", trigger="succeeded"))
    await events.expect(OperationAdmitted, op_id)
    await ended(bus, op_id)
    await eventually(lambda: _true(len(receiver.at("/hook")) == 1 and len(receiver.at("/ce")) == 1),
                     "a webhook and a CloudEvent", 20)

    headers, body = receiver.at("/hook")[0]
    now = datetime.now(timezone.utc).timestamp()
    assert abs(signature.verify(SECRET, body, headers["opsched-signature"], now) - now) < 60  # the documented check
    with pytest.raises(signature.SignatureError, match="no v1 signature matches"):
        signature.verify(b"another secret", body, headers["opsched-signature"], now)
    with pytest.raises(signature.SignatureError, match="replay window"):  # replayed an hour later
        signature.verify(SECRET, body, headers["opsched-signature"], now + 3600)
    payload = json.loads(body)
    assert payload["event"] == headers["opsched-event"] == "succeeded" and payload["op"] == op_id
    assert payload["data"]["opId"] == op_id and payload["delivery"] == headers["opsched-delivery"]

    ce_headers, ce_body = receiver.at("/ce")[0]
    assert ce_headers["content-type"] == "application/cloudevents+json"
    event = from_http(ce_headers, ce_body)
    assert event["type"] == "io.opsched.operation.succeeded" and event["subject"] == op_id
    assert event["specversion"] == "1.0" and event.data["opId"] == op_id
    dues = events.of(op_id, NotificationDue)
    assert {d.connection for d in dues} == {"ops-hook", "ce"}
    assert event["id"] == next(d.delivery_id for d in dues if d.connection == "ce")
    assert headers["opsched-delivery"] == next(d.delivery_id for d in dues if d.connection == "ops-hook")

    attempts = [await events.expect(NotificationAttempted, op_id, where=lambda e, c=c: e.connection == c)
                for c in ("ops-hook", "ce")]
    assert all(a.delivered and a.status == 200 and a.delivery_attempt == 1 for a in attempts)
    shown = [entry_of(a) for a in attempts]
    assert all(e is not None and e.reason == "delivered" and e.message == "succeeded #1: 200" for e in shown)


async def test_a_redelivered_trigger_is_one_delivery(stack_factory, bus, client, events, receiver, tmp_path):
    await notifier_stack(stack_factory, tmp_path, receiver.port)
    op_id = await client.submit(notifying("twice", "ops-hook"))
    await events.expect(OperationAdmitted, op_id)
    at = datetime.now(timezone.utc)
    end = OperationSucceeded(op_id=op_id, at=at, pod_name=f"op-{op_id}-0")
    await bus.publish(end)
    await events.expect(NotificationAttempted, op_id)
    await bus.publish(end, msg_id=f"{op_id}.again")  # the same trigger stored again: matched again
    await eventually(lambda: _true(len(events.of(op_id, OperationSucceeded)) == 2), "stored twice", 10)
    await eventually(lambda: matched_all(bus), "the notifier matched both", 10)
    # the second match computes the same delivery id: JetStream stores its notification_due once
    assert len(events.of(op_id, NotificationDue)) == 1
    assert len({h["opsched-delivery"] for h, _ in receiver.at("/hook")}) == 1


async def test_a_receiver_down_for_a_while_gets_it_once_back_with_every_attempt_recorded(
        stack_factory, bus, client, events, receiver, tmp_path):
    receiver.fail = 3
    await notifier_stack(stack_factory, tmp_path, receiver.port,
                         subscriptions="subscriptions:\n  - queues: all\n    on: [succeeded]\n    connections: [chat]\n")
    op_id = await client.submit(op("flaky").build())  # no notifications of its own: the admin's subscription
    await events.expect(OperationAdmitted, op_id)
    await ended(bus, op_id)
    done = await events.expect(NotificationAttempted, op_id, where=lambda e: e.delivered)
    assert done.delivery_attempt == 4 and done.connection == "chat"
    failed = [a for a in events.of(op_id, NotificationAttempted) if not a.delivered]
    assert [a.delivery_attempt for a in failed] == [1, 2, 3]
    assert all(a.status == 503 and a.retry_in_s is not None and 0 < a.retry_in_s <= 0.2 for a in failed)
    entry = entry_of(failed[0])
    assert entry is not None and entry.by == "chat" and entry.message.startswith("succeeded #1: 503")
    assert "retry in" in entry.message
    [(headers, body)] = receiver.at("/slack")
    assert op_id in json.loads(body)["text"]
    shown = NotificationsAnswer.of(await client.why(op_id))  # what `opsched notifications OP` prints
    assert [(e.reason, e.by) for e in shown.entries] == [("failed", "chat")] * 3 + [("delivered", "chat")]
    assert notifications_text(shown).splitlines()[-1].split()[2:5] == ["chat", "delivered", "succeeded"]


async def test_past_the_bounded_time_a_delivery_is_dead_lettered_with_a_final_failure(
        stack_factory, bus, client, events, receiver, tmp_path):
    receiver.fail = 1000
    await notifier_stack(stack_factory, tmp_path, receiver.port, notify_give_up_s=0.0)
    op_id = await client.submit(notifying("doomed", "ops-hook"))
    await events.expect(OperationAdmitted, op_id)
    await ended(bus, op_id)
    final = await events.expect(NotificationFailed, op_id)
    assert final.connection == "ops-hook" and final.attempts == 1 and "given up" in final.error
    last = await events.expect(NotificationAttempted, op_id)
    assert last.retry_in_s is None and not last.delivered
    # the dead-letter copy follows the final record (published first, then the message is dead-lettered)
    await eventually(lambda: bus.last_stored(subjects.DLQ_STREAM, subjects.dead_letter("notifier")),
                     "a dead letter on dlq.notifier", 10)


async def test_an_unknown_connection_is_a_visible_failed_delivery(stack_factory, bus, client, events, receiver,
                                                                  tmp_path):
    await notifier_stack(stack_factory, tmp_path, receiver.port)
    op_id = await client.submit(notifying("typo", "no-such-hook"))
    await events.expect(OperationAdmitted, op_id)
    await ended(bus, op_id)
    failed = await events.expect(NotificationFailed, op_id)
    assert "unknown connection 'no-such-hook'" in failed.error
    entry = entry_of(failed)
    assert entry is not None and entry.by == "no-such-hook" and entry.reason == "given_up"


async def test_a_hanging_receiver_does_not_delay_admission(stack_factory, bus, client, events, receiver, tmp_path):
    receiver.hang = threading.Event()
    await notifier_stack(stack_factory, tmp_path, receiver.port, notify_timeout_s=20.0)
    first = await client.submit(notifying("first", "ops-hook"))
    await events.expect(OperationAdmitted, first)
    await ended(bus, first)
    await events.expect(NotificationDue, first)  # its delivery is now hanging at the receiver
    second = await client.submit(op("second").build())
    await events.expect(OperationAdmitted, second, timeout=10)
    assert not events.of(first, NotificationAttempted)  # still in hand: admission did not wait for it
    receiver.hang.set()
    await events.expect(NotificationAttempted, first, where=lambda e: e.delivered)


async def matched_all(bus) -> bool:
    info = await bus.js.consumer_info(subjects.OPS_STREAM, subjects.NOTIFIER_MATCH)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def _true(value: bool) -> bool:
    return value
