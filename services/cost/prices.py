"""Where the price catalogue in force comes from: the latest ``PricesConfigured`` in the config
stream, so every cost replica prices alike and a restart keeps it. A prices file
(``OPSCHED_PRICES_FILE``) is published there when its content is new (at start or when it changes;
polled every 2 s). An invalid file is refused with an error log and the catalogue in force is kept
(at a first start with nothing in force, the service refuses to start). With no file and nothing in
force, the built-in prices apply (source "builtin")."""
from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import msgspec
import yaml

from proto import subjects
from proto.config import PricesConfigured
from proto.prices import Prices
from services.runtime.bus import Bus
from services.runtime.clock import Clock

POLL_S = 2.0
BUILTIN = "builtin"


class PricesConfigError(ValueError):
    pass


def load_prices(path: Path | None) -> Prices:
    """The catalogue of a YAML file (the built-in prices without one); raises ``msgspec.ValidationError``
    for a wrong or unknown field and for pools sharing a name."""
    if path is None:
        return Prices()
    prices = msgspec.convert(yaml.safe_load(Path(path).read_text()) or {}, Prices)
    names = [p.name for p in prices.pools]
    if len(names) != len(set(names)):
        raise msgspec.ValidationError(f"pool names must be unique, got {names} - at `$.pools`")
    return prices


def file_source(path: Path) -> tuple[str, str]:
    """The source of a file's content, ``file:<path>#<sha>``, and the sha."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    return f"file:{path}#{digest}", digest


class PricesSource:
    def __init__(self, path: Path | None, clock: Clock, log) -> None:
        self.path = Path(path) if path else None
        self.clock = clock
        self.log = log
        self.latest: PricesConfigured | None = None
        self.seen: set[str] = set()  # sources already in the stream: a file is published once per content

    @property
    def prices(self) -> Prices:
        return self.latest.prices if self.latest else Prices()

    @property
    def source(self) -> str:
        return self.latest.source if self.latest else BUILTIN

    def apply(self, message: PricesConfigured) -> bool:
        """Put ``message`` in force (the latest of the stream wins). True when the catalogue changed."""
        self.seen.add(message.source)
        changed = self.latest is None or self.latest.source != message.source
        self.latest = message
        return changed

    async def publish_file(self, bus: Bus, *, at_start: bool) -> PricesConfigured | None:
        """Publish the file's catalogue if its content is new; return what was published (and applied)."""
        if self.path is None:
            return None
        try:
            source, digest = file_source(self.path)
            if source in self.seen:
                return None  # this content was published before
            prices = load_prices(self.path)
        except (OSError, yaml.YAMLError, msgspec.ValidationError) as exc:
            if at_start and self.latest is None:
                raise PricesConfigError(f"prices file {self.path}: {exc}") from None
            self.log.error("prices_file_rejected", error=str(exc), keeping=self.source)
            return None
        event = PricesConfigured(prices=prices, at=self.clock.now(), source=source)
        await bus.publish(event, subject=subjects.CONFIG_PRICES, msg_id=subjects.prices_msg_id(digest))
        self.apply(event)  # in force at once (the stream delivers it again: the same)
        self.log.info("prices_file_published", source=source, pools=[p.name for p in prices.pools])
        return event

    async def watch_file(self, bus: Bus, stop: asyncio.Event) -> None:
        while not stop.is_set() and self.path is not None:
            try:
                await asyncio.wait_for(stop.wait(), timeout=POLL_S)
            except asyncio.TimeoutError:
                try:
                    await self.publish_file(bus, at_start=False)
                except Exception as exc:  # noqa: BLE001 - the bus is down: try again at the next poll
                    self.log.warning("prices_publish_failed", error=repr(exc))
