"""A key-value bucket's reads and writes through the runtime's own requests (``requesting``).

nats-py's ``KeyValue`` makes each call a nats-py request (random token bytes, a task and a timer per call) and
a write's ack a json dataclass; an op makes a few of these (the cost ledger's entry, the dispatcher's attempt
fate), so they go the way every publish goes. Same semantics as nats-py's: ``get`` is a direct get of the
key's last message (``KeyNotFoundError``; ``KeyDeletedError`` for a delete or purge marker), ``create`` is a
write expecting no earlier message (over a delete marker: expecting that marker), ``update`` one expecting
revision ``last`` (``KeyWrongLastSequenceError`` otherwise), ``put`` one expecting nothing. Any other call
goes to nats-py's bucket."""
from __future__ import annotations

from typing import Any

import nats.js.errors
from nats.js.kv import KeyValue

from opsched.bus.requesting import Requester

WRONG_LAST_SEQUENCE = 10071
KV_OPERATION = "KV-Operation"
DELETED = ("DEL", "PURGE")


class KVCalls:
    """``kv`` (nats-py's bucket) with get/put/create/update through ``requester``."""

    def __init__(self, kv: KeyValue, requester: Requester, timeout: float) -> None:
        self._kv, self._requester, self._timeout = kv, requester, timeout
        # nats-py's KeyValue exposes neither its stream nor its subject prefix
        self._stream, self._prefix, self._name = kv._stream, kv._pre, kv._name  # noqa: SLF001

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    async def get(self, key: str) -> KeyValue.Entry:
        subject = f"$JS.API.DIRECT.GET.{self._stream}.{self._prefix}{key}"
        msg = await self._requester.request(subject, b"", None, self._timeout)
        headers = msg.headers or {}
        status = headers.get("Status")
        if status == "404" and not msg.data:
            raise nats.js.errors.KeyNotFoundError
        if status and not msg.data:
            nats.js.errors.APIError.from_msg(msg)  # raises: ServiceUnavailableError for a 503
        entry = KeyValue.Entry(bucket=self._name, key=key, value=msg.data, revision=int(headers["Nats-Sequence"]),
                               delta=None, created=None, operation=None)
        if headers.get(KV_OPERATION) in DELETED:
            raise nats.js.errors.KeyDeletedError(entry, headers[KV_OPERATION])
        return entry

    async def put(self, key: str, value: bytes) -> int:
        return (await self._requester.publish(self._prefix + key, value, {}, self._timeout)).seq

    async def update(self, key: str, value: bytes, last: int | None = None) -> int:
        headers = {"Nats-Expected-Last-Subject-Sequence": str(last or 0)}
        try:
            return (await self._requester.publish(self._prefix + key, value, headers, self._timeout)).seq
        except nats.js.errors.APIError as exc:
            if exc.err_code == WRONG_LAST_SEQUENCE:
                raise nats.js.errors.KeyWrongLastSequenceError(description=exc.description) from None
            raise

    async def create(self, key: str, value: bytes) -> int:
        try:
            return await self.update(key, value, last=0)
        except nats.js.errors.KeyWrongLastSequenceError:
            try:
                await self.get(key)
            except nats.js.errors.KeyDeletedError as deleted:  # a delete marker is the last message: write over it
                return await self.update(key, value, last=deleted.entry.revision)
            raise
