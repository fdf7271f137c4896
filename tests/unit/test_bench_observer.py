"""The bench observer's waits (bench/pipeline.py): every op's event of a kind, and what it was delivered. No
server runs here: arrivals are fed as a core subscription would."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from bench.pipeline import Observer


def _msg(kind: str, oid: str) -> SimpleNamespace:
    return SimpleNamespace(subject=f"ops.{kind}.{oid}")


def test_wait_all_returns_once_every_op_had_the_kind() -> None:
    async def scenario() -> bool:
        obs = Observer()
        await obs._on(_msg("succeeded", "b0"))
        waiting = asyncio.create_task(obs.wait_all("succeeded", ["b0", "b1"], timeout=5.0))
        await obs._on(_msg("dispatched", "b1"))  # another kind: still waiting
        await asyncio.sleep(0)
        assert not waiting.done()
        await obs._on(_msg("succeeded", "b1"))
        return await waiting

    assert asyncio.run(scenario()) is True


def test_wait_all_says_so_when_an_op_never_had_it() -> None:
    async def scenario() -> bool:
        obs = Observer()
        await obs._on(_msg("succeeded", "b0"))
        return await obs.wait_all("succeeded", ["b0", "b1"], timeout=0.05)

    assert asyncio.run(scenario()) is False


def test_what_the_observer_was_delivered_is_its_connections_count() -> None:
    obs = Observer()
    assert obs.received() == 0  # not connected
    obs.nc = SimpleNamespace(stats={"in_msgs": 42})  # type: ignore[assignment]
    assert obs.received() == 42
