"""Liveness of the handler loops (``services.runtime.liveness``), on a fake clock."""
from __future__ import annotations

import pytest

from opsched.services.runtime.liveness import HandlerLoops
from tests.builders import T0, t
from tests.builders.clock import FakeClock

BOUND = 60.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def loops(clock) -> HandlerLoops:
    return HandlerLoops(clock.now)


def test_a_loop_that_keeps_fetching_is_alive(loops, clock):
    for _ in range(10):
        loops.beat("cost-estimator")
        clock.advance(BOUND / 2)
    assert loops.stuck(BOUND) == {}


def test_a_handler_without_a_sign_of_life_past_the_bound_is_stuck_named_with_its_message(loops, clock):
    loops.beat("dispatcher-admitted")
    with loops.handling("dispatcher-admitted", "ops.admitted.op-1"):
        clock.advance(BOUND)
        assert loops.stuck(BOUND) == {}  # at the bound: not yet
        clock.advance(1)
        assert loops.stuck(BOUND) == {"dispatcher-admitted": f"handling ops.admitted.op-1 since {T0.isoformat()}, "
                                                             f"no progress for 61 s (bound 60 s)"}
    assert loops.stuck(BOUND) == {}  # it returned: alive again


def test_a_loop_that_stopped_fetching_is_stuck(loops, clock):
    loops.beat("cache-lookup")
    clock.advance(BOUND + 5)
    assert loops.stuck(BOUND) == {"cache-lookup": "not fetching, no progress for 65 s (bound 60 s)"}


def test_waiting_for_a_dependency_is_not_being_stuck_however_long(loops, clock):
    with loops.handling("dispatcher-admitted", "ops.admitted.op-1"):
        with loops.waiting():
            clock.advance(BOUND * 10)
            assert loops.stuck(BOUND) == {}
        loops.trying()  # the next try
        clock.advance(BOUND + 1)  # and this one hangs
        assert list(loops.stuck(BOUND)) == ["dispatcher-admitted"]


def test_every_try_is_a_sign_of_life(loops, clock):
    with loops.handling("dispatcher-admitted", "ops.admitted.op-1"):
        for _ in range(5):
            clock.advance(BOUND - 1)
            loops.trying()
        assert loops.stuck(BOUND) == {}
        assert loops.loops["dispatcher-admitted"].since == T0 and clock.now() == t(5 * (BOUND - 1))


def test_tries_and_waits_outside_a_message_change_nothing(loops, clock):
    loops.trying()
    with loops.waiting():
        clock.advance(BOUND * 2)
    assert loops.loops == {}


def test_each_consumer_is_its_own_loop(loops, clock):
    loops.beat("cost-estimator")
    with loops.handling("cost-ledger", "ops.running.op-1"):
        clock.advance(BOUND + 1)
        loops.beat("cost-estimator")
        assert list(loops.stuck(BOUND)) == ["cost-ledger"]
