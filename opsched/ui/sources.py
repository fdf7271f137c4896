"""What feeds the web view, through the same subjects as the CLI: the op stream followed from its start (after the
summaries of ops that left admission's memory), and the CLI's queries — queues, cost, `why` for each waiting op,
and each service's health — asked again after each burst of events (at most every ``debounce`` seconds) and every ``interval`` seconds."""
from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from opsched.proto import codec, subjects
from opsched.proto.summaries import OpSummary
from opsched.ui.feed import Feed
from opsched.why_any import why as why_of

SERVICES = ("admission", "cost", "cache", "dispatcher")  # each asked how it is (``proto.health``)
WHY_LIMIT = 100  # waiting ops asked `why` about in one round (the first submitted first)
ANSWERED_BY = {"queues": "admission", "cost": "cost"}


class Sources:
    def __init__(self, client: Any, feed: Feed, *, interval: float = 5.0, debounce: float = 0.3,
                 query_timeout: float = 2.0) -> None:
        self.client, self.feed = client, feed
        self.interval, self.debounce, self.query_timeout = interval, debounce, query_timeout
        self._changed = asyncio.Event()
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> "Sources":
        for data in await self.client.reads.read_bucket(subjects.OPS_BUCKET):
            self.feed.add_summary(msgspec.json.decode(data, type=OpSummary))
        self._sub = await self.client.reads.follow(subjects.OPS_STREAM, subjects.VIEW_EVENTS, self._on_message)
        self._task = asyncio.create_task(self._refreshing(), name="ui-refresh")
        return self

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def _on_message(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_event(data)
        except Exception:  # noqa: BLE001 - somebody's malformed message: admission reports it as an error event
            return
        self.feed.fold(event)
        self._changed.set()

    async def refresh(self) -> None:
        """Ask every query once: queues and cost, then `why` for the waiting ops."""
        await asyncio.gather(self._ask("queues", self.client.queues), self._ask("cost", self.client.cost),
                             self._ask_health())
        waiting = self.feed.waiting()[:WHY_LIMIT]
        answers = await asyncio.gather(*(self.client.why(op_id, timeout=self.query_timeout) for op_id in waiting),
                                       return_exceptions=True)
        still = set(self.feed.waiting())  # an op admitted meanwhile: its answer is stale
        for op_id, answer in zip(waiting, answers):
            if not isinstance(answer, BaseException) and op_id in still:
                self.feed.answered_why(op_id, answer)

    async def why(self, op_id: str) -> Any:
        """`why` of one op, as ``opsched why`` asks it (an op that left admission's memory: from its summary)."""
        return await why_of(self.client, op_id, timeout=self.query_timeout)

    async def logs(self, op_id: str, tail: int) -> list[str]:
        """The last ``tail`` lines its main container printed (``Client.logs``; raises its refusal)."""
        async with asyncio.timeout(self.query_timeout):
            return [line async for line in self.client.logs(op_id, tail=tail)]

    async def _ask(self, query: str, ask: Any) -> None:
        try:
            self.feed.answered(query, await ask(timeout=self.query_timeout))
        except Exception as exc:  # noqa: BLE001 - a service not answering is weather: the page says so
            self.feed.not_answered(query, f"no answer from {ANSWERED_BY[query]} ({exc.__class__.__name__})")

    async def _ask_health(self) -> None:
        """Each service's own account of itself (``proto.health``); one that does not answer is named as such."""
        answers = await asyncio.gather(*(self.client.health(s, timeout=self.query_timeout) for s in SERVICES),
                                       return_exceptions=True)
        self.feed.answered_health({service: None if isinstance(answer, BaseException) else answer
                                   for service, answer in zip(SERVICES, answers)})

    async def _refreshing(self) -> None:
        while True:
            self._changed.clear()
            await self.refresh()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=self.interval)
                await asyncio.sleep(self.debounce)  # let a burst of events land: one round for all of them
            except asyncio.TimeoutError:
                pass
