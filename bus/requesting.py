"""Request/reply and JetStream publishes with less Python per call than nats-py's own.

Every event a handler returns is a JetStream publish, a request whose reply is the stream's ack; an op costs
about ten of them across the services, so their per-call cost bounds the pipeline. nats-py 2.16 spends a good
part of it around the round trip itself: random bytes from the OS for every request's token, a task and a
timer per call (``asyncio.wait_for``), and the ack parsed with ``json`` into a dataclass. Here the same
connection's response subscription and map are used (nats-py's "new style" requests: one wildcard
subscription, a future per token), with a token from a counter, one timer per call, and the ack decoded
with msgspec. Errors are nats-py's: ``nats.errors.TimeoutError``, ``NoStreamResponseError`` when no stream
answers, ``nats.js.errors.APIError`` subclasses (with their ``err_code``) when the stream refuses.

Bound to nats-py's request internals (``_resp_sub_prefix``, ``_resp_map``, ``_init_request_sub``): the
version is pinned in pyproject.toml, and tests/service/test_requesting.py checks them on a real server."""
from __future__ import annotations

import asyncio
import itertools

import msgspec
import nats
import nats.errors
import nats.js.errors

NO_RESPONDERS = "503"

# what a request raises when no service answers it in time, or none listens (the gateway answers 503 for them)
UNANSWERED: tuple[type[Exception], ...] = (nats.errors.NoRespondersError, nats.errors.TimeoutError)


class PubAck(msgspec.Struct, frozen=True):
    """What a stream answers a publish (a refusal: ``error``)."""

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    domain: str | None = None
    error: dict | None = None


_ACK = msgspec.json.Decoder(PubAck)


class Requester:
    """Requests on one connection (``nc``)."""

    def __init__(self, nc: nats.NATS) -> None:
        self.nc = nc
        self._tokens = itertools.count()
        self._opening = asyncio.Lock()

    async def request(self, subject: str, payload: bytes, headers: dict[str, str] | None, timeout: float):
        """The reply to ``payload`` on ``subject`` (a nats-py ``Msg``); ``nats.errors.TimeoutError`` after
        ``timeout`` s, ``NoRespondersError`` when nobody listens."""
        nc = self.nc
        if not nc._resp_sub_prefix:  # noqa: SLF001 - nats-py's request internals (docstring)
            async with self._opening:
                if not nc._resp_sub_prefix:  # noqa: SLF001 - nats-py's request internals (docstring)
                    await nc._init_request_sub()  # noqa: SLF001 - nats-py's request internals (docstring)
        prefix = nc._resp_sub_prefix  # noqa: SLF001 - nats-py's request internals (docstring)
        assert prefix is not None
        token = f"r{next(self._tokens):x}"
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        nc._resp_map[token] = future  # noqa: SLF001 - nats-py's request internals (docstring)
        timer = loop.call_later(timeout, _expire, future)
        try:
            await nc.publish(subject, payload, reply=prefix.decode() + token, headers=headers)
            msg = await future
        finally:
            timer.cancel()
            nc._resp_map.pop(token, None)  # noqa: SLF001 - nats-py's request internals (docstring)
        if msg.headers and msg.headers.get("Status") == NO_RESPONDERS and not msg.data:
            raise nats.errors.NoRespondersError
        return msg

    async def publish(self, subject: str, data: bytes, headers: dict[str, str], timeout: float) -> PubAck:
        """A JetStream publish: the stream's ack, or its refusal raised as nats-py raises it."""
        try:
            msg = await self.request(subject, data, headers, timeout)
        except nats.errors.NoRespondersError:
            raise nats.js.errors.NoStreamResponseError from None
        ack = _ACK.decode(msg.data)
        if ack.error is not None:
            raise nats.js.errors.APIError.from_error(ack.error)
        return ack


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_exception(nats.errors.TimeoutError())
