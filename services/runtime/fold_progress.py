"""How far a service has folded a stream, and a wait until it has folded a given sequence.

Admission: commands and the op stream are read apart: a stop published right after its submit can be handled
before the fold has seen the ``submitted`` that the submit produced (it is stored: commands are
handled in order, and a handler's events are stored before its command is acked). A command about
an op admission does not know yet waits until the fold has caught up with everything stored when
the command was handled; only then is the op truly unknown. Cost: its ledger's consumer takes an attempt's
``running`` and end only once its follow of the op stream has folded them (the ledger is that fold)."""
from __future__ import annotations

import asyncio

CATCH_UP_TIMEOUT_S = 5.0


class FoldProgress:
    def __init__(self) -> None:
        self.seq = 0  # the last op-stream sequence folded
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def advance(self, seq: int) -> None:
        self.seq = max(self.seq, seq)
        due = [w for w in self._waiters if w[0] <= self.seq]
        for waiter in due:
            self._waiters.remove(waiter)
            if not waiter[1].done():
                waiter[1].set_result(None)

    async def reach(self, seq: int, timeout: float = CATCH_UP_TIMEOUT_S) -> bool:
        """Wait until ``seq`` has been folded; False if that took longer than ``timeout``."""
        if self.seq >= seq:
            return True
        waiter = (seq, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter[1]), timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
