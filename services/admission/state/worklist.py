"""One of the cycle's work lists (gates just cleared, retries to schedule, cache hits to finish, ops to end):
op ids in arrival order, each once. Adding, taking from either end and dropping an op that left memory
are O(1): a list's ``pop(0)`` and ``remove`` made a cold start's first cycle (100k ops cleared) and a
retention round (every op forgotten) quadratic."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator


class WorkList:
    def __init__(self) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()

    def append(self, op_id: str) -> None:
        """Add ``op_id`` at the end (where it is already, it stays)."""
        self._ids[op_id] = None

    def discard(self, op_id: str) -> None:
        self._ids.pop(op_id, None)

    def pop(self, index: int = -1) -> str:
        """Take the first (``0``) or the last (``-1``) op id."""
        if index not in (0, -1):
            raise ValueError("a work list is taken from either end only")
        return self._ids.popitem(last=index == -1)[0]

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __contains__(self, op_id: object) -> bool:
        return op_id in self._ids
