"""GPU memory sharing (``aliyun.com/gpu-mem``), fitted per card.

A node that advertises ``aliyun.com/gpu-mem`` (GiB) over ``aliyun.com/gpu-count`` cards has that many
cards of equal size (one card if the count is missing). A pod asking for N GiB needs ONE card with N GiB
free: a node whose total would do but no single card can hold it does not fit. Admission models a node's
cards by packing the asks of the shared pods it placed there best fit, largest first (each onto the
fullest card that still has room): deterministic, and the same whatever order the pods came and went in,
so the tracked snapshot and a fresh build agree.
"""
from __future__ import annotations

from opsched.proto.resources import GPU_MEMORY, GPU_MEMORY_CARDS

EPSILON = 1e-9


def cards_of(allocatable: dict[str, float]) -> tuple[int, float] | None:
    """(number of cards, GiB per card) of a node that shares GPU memory, else None."""
    total = allocatable.get(GPU_MEMORY, 0.0)
    if total <= 0:
        return None
    count = max(1, int(allocatable.get(GPU_MEMORY_CARDS, 1) or 1))
    return count, total / count


def pack(asks: list[float], cards: tuple[int, float]) -> list[float] | None:
    """GiB used on each card once ``asks`` are packed best fit, largest first; None if one does not fit."""
    count, size = cards
    used = [0.0] * count
    for ask in sorted(asks, reverse=True):
        room = [i for i in range(count) if used[i] + ask <= size + EPSILON]
        if not room:
            return None
        best = max(room, key=lambda i: (used[i], -i))  # the fullest card that fits, then the first
        used[best] += ask
    return used


def fits(placed: list[float], ask: float, cards: tuple[int, float] | None) -> bool:
    """Can a pod asking ``ask`` GiB join the shared pods ``placed`` on a node with these cards?"""
    if ask <= 0:
        return True
    return cards is not None and pack([*placed, ask], cards) is not None


def ask_of(request: dict[str, float]) -> float:
    return request.get(GPU_MEMORY, 0.0)
