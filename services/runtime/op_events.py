"""An op's last event of one type as the op stream stores it, read by a direct get (``ops.<type>.<op id>``): for a
handler that needs what an earlier event of the op said and does not keep it (the notifier: an op's
``submitted``; the cost ledger: the price of an op resumed after it forgot it)."""
from __future__ import annotations

from typing import TypeVar

from opsched.bus.bus import Bus
from opsched.proto import codec, subjects
from opsched.proto.events import Event, event_type

E = TypeVar("E", bound=Event)


async def last_of(bus: Bus, kind: type[E], op_id: str) -> E | None:
    """The op's last stored ``kind`` event (None: none, purged, or not one)."""
    seq = await bus.last_stored(subjects.OPS_STREAM, subjects.event(event_type(kind), op_id))
    found = await bus.stored(subjects.OPS_STREAM, seq) if seq else None
    if found is None:
        return None
    event = codec.decode(found.data)
    return event if isinstance(event, kind) else None
