"""While a service rebuilds its state from a stream (``Bus.replay``), Python's cyclic garbage collector is
off. A fold creates long-lived objects only (records, queues, indexes), so every collection during a replay
finds nothing to free, and each full one traverses the whole growing state again: measured, half of
admission's fold time at 30k pending ops (24 µs a message with it, 11 without). The fold's garbage is
freed by reference counting as usual. When the last replay in the process has caught up (replays may overlap:
several services in one process, or a service's streams at once), what was built is frozen (``gc.freeze``:
never traversed by a collection again, so the first cycle after a start does not pay for the whole state)
and the collector is back on. A stopping service ``thaw``s: the frozen objects are collected normally again
(in a process that starts many services, e.g. the tests, nothing stays frozen after its service)."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_replaying = 0
_was_enabled = True


@contextmanager
def replaying() -> Iterator[None]:
    """The collector off from the first replay in until the last one is over."""
    global _replaying, _was_enabled
    if _replaying == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _replaying += 1
    try:
        yield
    finally:
        _replaying -= 1
        if _replaying == 0:
            gc.freeze()
            if _was_enabled:
                gc.enable()


def thaw() -> None:
    """What replays froze is collected normally again (a service stops)."""
    if _replaying == 0:
        gc.unfreeze()
