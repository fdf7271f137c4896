"""A service's durable pull consumers, declared on its class (``Consumer``), bound to an instance
(``Subscription``: its handler methods by message type), and the ``Context`` a handler is given."""
from __future__ import annotations

import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from opsched.proto import codec
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.settings import Settings

if TYPE_CHECKING:
    from opsched.services.runtime.service import Service

Handler = Callable[[Any, "Context"], Awaitable[Any]]
Method = TypeVar("Method", bound=Callable[..., Awaitable[Any]])


class RetryLater(Exception):
    """Raised by a handler that bounds its own retries (the notifier's deliveries): ``events`` are published (the
    attempt's record), then the message is given back to be delivered again after ``delay_s`` (JetStream's nak
    with a delay: no task sleeps, nothing is lost if the process dies meanwhile)."""

    def __init__(self, delay_s: float, events: list | None = None) -> None:
        super().__init__(f"retry in {delay_s:g} s")
        self.delay_s = delay_s
        self.events = list(events or [])


@dataclass
class Context:
    service: str
    clock: Clock
    settings: Settings
    log: Any
    subject: str = ""
    num_delivered: int = 1
    stream_seq: int = 0  # the message's sequence in its stream (0: unknown, as in a unit test)


@dataclass
class Subscription:
    durable: str
    stream: str
    filters: list[str]
    decoder: Callable[[bytes], Any]
    handlers: dict[type, Handler] = field(default_factory=dict)
    max_deliver: int | None = None  # None: the settings' (``OPSCHED_MAX_DELIVER``); -1: no bound


class Consumer:
    """A durable pull consumer, declared on a service class: ``ops = Consumer(durable, stream, filters)``.
    Its handlers are methods, registered with ``@ops.handles(EventType, ...)``; every instance of the
    class consumes through its own ``Subscription``, the methods bound to it."""

    def __init__(self, durable: str, stream: str, filters: list[str],
                 decoder: Callable[[bytes], Any] = codec.decode, max_deliver: int | None = None) -> None:
        self.durable, self.stream, self.filters, self.decoder = durable, stream, list(filters), decoder
        self.max_deliver = max_deliver  # a consumer whose handler bounds its own retries (``RetryLater``): -1
        self.methods: dict[type, Callable[..., Awaitable[Any]]] = {}

    def handles(self, *kinds: type) -> Callable[[Method], Method]:
        def register(method: Method) -> Method:
            for kind in kinds:
                if kind in self.methods:
                    raise TypeError(f"{self.durable}: {kind.__name__} is handled twice")
                self.methods[kind] = method
            return method
        return register

    def bind(self, service: "Service") -> Subscription:
        handlers: dict[type, Handler] = {kind: types.MethodType(method, service)
                                         for kind, method in self.methods.items()}
        return Subscription(self.durable, self.stream, self.filters, self.decoder, handlers, self.max_deliver)


def consumers_of(cls: type) -> list[Consumer]:
    """The consumers declared on ``cls`` and its bases, in the order of declaration."""
    found: list[Consumer] = []
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            if isinstance(value, Consumer) and value not in found:
                found.append(value)
    return found
