"""Where the queue configuration in force comes from: the latest ``QueuesConfigured`` in the config
stream. A queues file (``OPSCHED_QUEUES_FILE``) is published there when its content is new (at start
or when it changes; polled every 2 s); the ``set_queues`` command publishes there too. So a config
set by command survives restarts until the file's content changes. Every replica applies the same
latest config. An invalid file is refused with an error log and the config in force is kept (at a
first start with nothing in force, the service refuses to start)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from proto import codec, subjects
from proto.config import QueuesConfigured
from proto.queues_file import QueuesConfigError, file_source, load_queues
from services.runtime.bus import Bus
from services.runtime.clock import Clock

POLL_S = 2.0


class ConfigSource:
    def __init__(self, path: Path | None, clock: Clock, log) -> None:
        self.path = Path(path) if path else None
        self.clock = clock
        self.log = log
        self.latest: QueuesConfigured | None = None
        self.seen: set[str] = set()  # sources already in the stream: a file is published once per content

    async def on_message(self, data: bytes, seq: int) -> None:
        try:
            message = codec.decode_config(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.log.error("bad_config_message", seq=seq, error=str(exc))
            return
        if isinstance(message, QueuesConfigured):  # the other kinds (the price catalogue) are not admission's
            self.latest = message
            self.seen.add(message.source)

    async def publish_file(self, bus: Bus, *, at_start: bool) -> None:
        """Publish the file's config if it differs from the one in force."""
        if self.path is None:
            return
        try:
            source = file_source(self.path)
            if source in self.seen:
                return  # this content was published before; a later command may have replaced it
            config = load_queues(self.path)
        except (QueuesConfigError, OSError) as exc:
            if at_start and self.latest is None:
                raise QueuesConfigError(str(exc)) from None
            self.log.error("queues_file_rejected", error=str(exc), keeping=self.latest.source if self.latest else None)
            return
        event = QueuesConfigured(config=config, at=self.clock.now(), source=source)
        await bus.publish(event, subject=subjects.CONFIG_QUEUES, msg_id=f"queues.{source.rsplit('#', 1)[-1]}")
        self.seen.add(source)
        self.log.info("queues_file_published", source=source)

    async def watch_file(self, bus: Bus, stop: asyncio.Event) -> None:
        while not stop.is_set() and self.path is not None:
            try:
                await asyncio.wait_for(stop.wait(), timeout=POLL_S)
            except asyncio.TimeoutError:
                await self.publish_file(bus, at_start=False)
