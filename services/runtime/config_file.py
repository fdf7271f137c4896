"""One mechanism for configuration that lives in a file and in force on the bus (the queue configuration,
the price catalogue): the latest message of its kind in the config stream is in force, so every replica
applies the same and a restart keeps it. The file (if any) is published there when its content is new
(at start, or when it changes: polled every ``POLL_S``), once per content, so a configuration set by a
command survives restarts until the file's content changes. An invalid file is refused with an error log
and what is in force stays; at a first start with nothing in force, the service refuses to start
(``ConfigFileError``). A bus outage while publishing is logged and retried at the next poll.
"""
from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from opsched.bus.bus import Bus
from opsched.services.runtime.clock import Clock

POLL_S = 2.0
M = TypeVar("M", bound=msgspec.Struct)  # the config message of one kind (QueuesConfigured, PricesConfigured)


class ConfigFileError(ValueError):
    """The file is invalid and nothing is in force: the service cannot start."""


@dataclass(frozen=True)
class ConfigKind(Generic[M]):
    name: str  # "queues", "prices": log event names and messages
    message_type: type[M]
    load: Callable[[Path], Any]  # the file's configuration; raises one of ``errors``
    errors: tuple[type[Exception], ...]
    message: Callable[[Any, datetime, str], M]  # (configuration, at, source) -> the message
    subject: str
    msg_id: Callable[[str], str]  # the content's digest -> Nats-Msg-Id
    summary: Callable[[Any], dict[str, Any]] = lambda config: {}  # what to log of a published one


def file_source(path: Path) -> tuple[str, str]:
    """The source of a file's content, ``file:<path>#<sha>``, and the sha."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    return f"file:{path}#{digest}", digest


class FileConfigSource(Generic[M]):
    """The latest configuration of one kind, from the config stream and from its file."""

    def __init__(self, kind: ConfigKind[M], path: Path | None, clock: Clock, log: Any) -> None:
        self.kind = kind
        self.path = Path(path) if path else None
        self.clock = clock
        self.log = log
        self.latest: M | None = None
        self.seen: set[str] = set()  # sources already in the stream: a file is published once per content

    def apply(self, message: Any) -> bool:
        """Put a message of this kind in force (the latest of the stream wins). True when it changed what
        is in force; messages of other kinds are not this source's."""
        if not isinstance(message, self.kind.message_type):
            return False
        source = getattr(message, "source")
        self.seen.add(source)
        changed = self.latest is None or getattr(self.latest, "source") != source
        self.latest = message
        return changed

    async def publish_file(self, bus: Bus, *, at_start: bool) -> M | None:
        """Publish the file's configuration if its content is new; return what was published (and applied)."""
        if self.path is None:
            return None
        refusals: tuple[type[Exception], ...] = (OSError, *self.kind.errors)
        try:
            source, digest = file_source(self.path)
            if source in self.seen:
                return None  # this content was published before; a later command may have replaced it
            config = self.kind.load(self.path)
        except refusals as exc:
            if at_start and self.latest is None:
                raise ConfigFileError(f"{self.kind.name} file {self.path}: {exc}") from None
            in_force = getattr(self.latest, "source", None)
            self.log.error(f"{self.kind.name}_file_rejected", error=str(exc), keeping=in_force)
            return None
        message = self.kind.message(config, self.clock.now(), source)
        await bus.publish(message, subject=self.kind.subject, msg_id=self.kind.msg_id(digest))
        self.apply(message)  # in force at once (the stream delivers it again: the same)
        self.log.info(f"{self.kind.name}_file_published", source=source, **self.kind.summary(config))
        return message

    async def watch_file(self, bus: Bus, stop: asyncio.Event) -> None:
        while not stop.is_set() and self.path is not None:
            try:
                await asyncio.wait_for(stop.wait(), timeout=POLL_S)
            except asyncio.TimeoutError:
                try:
                    await self.publish_file(bus, at_start=False)
                except Exception as exc:  # noqa: BLE001 - the bus is down: try again at the next poll
                    self.log.warning(f"{self.kind.name}_publish_failed", error=repr(exc))
