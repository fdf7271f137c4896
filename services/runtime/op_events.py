"""An op's last event of one type as the op stream stores it, read by one direct get (the last message of
``ops.<type>.<op id>``): for a handler that needs what an earlier event of the op said and does not keep it (the
notifier and the cache: an op's ``submitted``; the cost ledger: the price of an op resumed after it forgot it)."""
from __future__ import annotations

from typing import TypeVar

import msgspec

from opsched.bus.bus import Bus
from opsched.proto import codec, subjects
from opsched.proto.events import Event, event_type

E = TypeVar("E", bound=Event)


async def last_of(bus: Bus, kind: type[E], op_id: str) -> E | None:
    """The op's last stored ``kind`` event (None: none, purged, or not one)."""
    found = await bus.last_message(subjects.OPS_STREAM, subjects.event(event_type(kind), op_id))
    if found is None:
        return None
    try:
        event = codec.decode(found.data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # not an event of the contract (a forged one): as if there were none
    return event if isinstance(event, kind) else None
