"""The services driven without a bus, through their real entry points: admission's command consumer (its
handler table), its replay fold (``Admission._fold``: decode, then fold), its cycle and its queries; the
cost service's estimator and ledger (on an in-memory key-value bucket); the cache's decider.

``Fed`` collects what the services said; ``allowed`` is what a handler may raise (the designed refusal).

What a service says it publishes as its own NATS user, whose subject permissions are the generated nats-server
configuration's (``proto.permissions``): ``permitted`` asserts the server would take it (``opsched up`` runs
so by default; a subject refused there wedges a consumer on a real bus)."""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import msgspec
import structlog

from opsched.bus.addressing import subject_for
from opsched.bus.errors import InvalidInput
from opsched.proto import codec
from opsched.proto.cluster import NodeObserved
from opsched.proto.events import Event
from opsched.proto.lifecycle import Status
from opsched.proto.queries import WhyRequest
from opsched.proto.queues import Queue, QueuesConfig
from opsched.services.admission import cycle
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.service import Admission
from opsched.services.cache.decide import Decider
from opsched.services.cache.service import ENDS
from opsched.services.cache.store import CacheStore
from opsched.services.cost.service import Cost
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import identities
from tests.builders.clock import FakeClock
from tests.builders.kv import MemoryKV
from tests.fuzz.wire import NODES, T0

NAMESPACE = "ml"
QUEUES = QueuesConfig(queues=[Queue(name="default", concurrency=2), Queue(name="gpu", concurrency=1)],
                      default_queue="default")
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
SETTINGS = Settings(namespace=NAMESPACE)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def ctx(service: str, clock: FakeClock) -> Context:
    return Context(service, clock, SETTINGS, structlog.get_logger())


def permitted(service: str, messages: list) -> list:
    """``messages``, each on a subject that ``service``'s NATS user may publish (else AssertionError naming it)."""
    user = identities.service(service)
    for message in messages:
        subject = subject_for(message, user.user)
        assert user.may_publish(subject), f"{service} may not publish {subject} ({type(message).__name__})"
    return messages


class AdmissionHarness:
    """One admission replica with two queues and two GPU nodes, folding what it is fed as its replay would."""

    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.service = Admission(SETTINGS, self.clock)
        self.service.book = compile_book(QUEUES, "fuzz")
        self.seq = 0
        for node in NODES:
            self.observe(codec.encode(NodeObserved(node=node, at=T0, allocatable={
                "cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"})))

    @property
    def state(self):
        return self.service.state

    def fold(self, data: bytes) -> None:
        """The op stream's next message, folded as the replay and the live follow fold it."""
        self.seq += 1
        self.service._fold(data, self.seq)

    def observe(self, data: bytes) -> None:
        run(self.service.on_cluster(data, 0))

    def command(self, data: bytes) -> list[Event]:
        """A command off ``cmd.>``: decoded by the consumer's decoder, handled by its handler; the events it
        returns (or its refusal carries) are published, so folded. A decode error is the runtime's refusal."""
        sub = self.service.subscriptions[0]
        try:
            message = sub.decoder(data)
        except DECODE_ERRORS:
            return []
        handler = sub.handlers[type(message)]
        try:
            events = run(handler(message, ctx("admission", self.clock)))
        except InvalidInput as exc:
            events = exc.events
        events = events if isinstance(events, list) else [events] if events is not None else []
        self.publish(permitted("admission", events))
        return events

    def publish(self, events: list) -> None:
        for event in events:
            data = codec.encode(event)
            if isinstance(event, Event):
                assert codec.decode_ops_stream(data) == event, "what a handler returns must decode as itself"
                self.fold(data)
            else:
                assert codec.decode_config(data) == event, "what a handler returns must decode as itself"

    def cycle(self) -> list[Event]:
        """One scheduling cycle; its decisions are published (folded back, as the stream returns them)."""
        decisions = cycle.decide(self.state, self.service.book, self.clock.now(), NAMESPACE)
        self.publish(permitted("admission", decisions))
        return decisions

    def tick(self) -> None:
        """The schedules asked what is due, now and later (as the schedule runner asks)."""
        for later in (0, 3600, 400 * 86400):
            at = self.clock.now() + timedelta(seconds=later)
            self.service.schedules.due(at)
            self.service.schedules.next_fire(at)

    def why(self, op_id: str) -> Any:
        return codec.decode_query(run(self.service.answer(codec.encode(WhyRequest(op_id=op_id)))))

    def check_every_op_has_a_state_with_a_reason(self) -> None:
        """Property (d): every op held is in a known status; an ended one says why, a waiting one too."""
        for op in self.state.ops.values():
            assert op.status in Status, op.op_id
            if op.status.terminal:
                assert op.reason, f"{op.op_id} is {op.status.name} without a reason"
            answer = self.why(op.op_id)
            assert answer.found and answer.status == op.status.name.lower()
            if op.status in (Status.PENDING, Status.ON_HOLD, Status.RETRYING):
                assert answer.reasons, f"{op.op_id} is {op.status.name}: why does not say what it waits for"


class CostHarness:
    """The cost service's estimator handler and its ledger (a fold of the op stream: each event is folded first, as
    the follow does before the ledger's handler takes it)."""

    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.service = Cost(SETTINGS, self.clock)

    def handle(self, event: Event) -> list[Event]:
        """``event`` folded, then through every cost handler that consumes it (estimates, ledger); their events
        returned."""
        run(self.service.state.fold(codec.encode(event), 0))
        out: list[Event] = []
        for sub in self.service.subscriptions:
            handler = sub.handlers.get(type(event))
            if handler is not None:
                result = run(handler(event, ctx("cost", self.clock)))
                out += result if isinstance(result, list) else [result]
        return permitted("cost", [e for e in out if e is not None])

    def fold(self, data: bytes) -> None:
        run(self.service.state.fold(data, 0))


class CacheHarness:
    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.kv = MemoryKV()

    def handle(self, event: Event) -> list[Event]:
        decider = Decider(CacheStore(self.kv), ctx("cache", self.clock))
        out = run(decider.ended(event)) if isinstance(event, ENDS) else run(decider.submitted(event))  # type: ignore[arg-type]
        return permitted("cache", out)
