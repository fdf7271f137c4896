"""Where the price catalogue in force comes from: the latest ``PricesConfigured`` in the config stream,
with the prices file (``OPSCHED_PRICES_FILE``) published there when its content is new — the runtime's one
file-backed config mechanism (``services.runtime.config_file``). With no file and nothing in force, the
built-in prices apply (source "builtin")."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from opsched.proto import subjects
from opsched.proto.config import PricesConfigured
from opsched.proto.limits import MAX_PRICE_POINTS
from opsched.proto.prices import Prices
from opsched.rules.pricing import point_count
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.config_file import ConfigKind, FileConfigSource

BUILTIN = "builtin"


def load_prices(path: Path | None) -> Prices:
    """The catalogue of a YAML file (the built-in prices without one); raises ``msgspec.ValidationError``
    for a wrong or unknown field, for pools sharing a name (or with none) and for a catalogue of more than
    ``MAX_PRICE_POINTS`` price points (pools and defaults x the products each names: ``rules.pricing``)."""
    if path is None:
        return Prices()
    prices = msgspec.convert(yaml.safe_load(Path(path).read_text()) or {}, Prices)
    names = [p.name for p in prices.pools]
    if len(names) != len(set(names)):
        raise msgspec.ValidationError(f"pool names must be unique, got {names} - at `$.pools`")
    if "" in names:
        raise msgspec.ValidationError("a pool needs a name, got an empty one - at `$.pools`")
    points = point_count(prices)
    if points > MAX_PRICE_POINTS:
        raise msgspec.ValidationError(
            f"the catalogue names {points} price points (each pool and the defaults x the GPU products its "
            f"accelerator tables name, and \"*\"), more than {MAX_PRICE_POINTS} - at `$`")
    return prices


PRICES: ConfigKind[PricesConfigured] = ConfigKind(
    name="prices", message_type=PricesConfigured, load=load_prices, errors=(yaml.YAMLError, msgspec.ValidationError),
    message=lambda prices, at, source: PricesConfigured(prices=prices, at=at, source=source),
    subject=subjects.CONFIG_PRICES, msg_id=subjects.prices_msg_id,
    summary=lambda prices: {"pools": [p.name for p in prices.pools]})


class PricesSource(FileConfigSource[PricesConfigured]):
    """The price catalogue in force; the built-in prices (source "builtin") while nothing is."""

    def __init__(self, path: Path | None, clock: Clock, log: Any) -> None:
        super().__init__(PRICES, path, clock, log)

    @property
    def prices(self) -> Prices:
        return self.latest.prices if self.latest else Prices()

    @property
    def source(self) -> str:
        return self.latest.source if self.latest else BUILTIN
