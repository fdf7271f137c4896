"""The cache's decisions as pure functions: which candidate a new op uses, the ttl, waiting for an
original still in processing, and what a waiter gets when its original ends."""
from __future__ import annotations

import pytest

from opsched.services.cache.lookup import (
    EXPIRED,
    MAX_PROCESSING,
    NOT_FOUND,
    ORIGINAL_FAILED,
    PROCESSING,
    SUCCEEDED,
    Candidate,
    Hit,
    Miss,
    Wait,
    choose,
    expired,
    forget,
    remember,
    settle,
    succeed,
)
from tests.builders import case, case_name, t


def running(op_id: str, at: float = 0.0, kind: str = "job") -> Candidate:
    return Candidate(op_id=op_id, submitted_at=t(at), kind=kind, runtime=kind, state=PROCESSING)


def done(op_id: str, ended: float, at: float = 0.0, kind: str = "job", **outputs: str) -> Candidate:
    return Candidate(op_id=op_id, submitted_at=t(at), kind=kind, runtime=kind, state=SUCCEEDED, ended_at=t(ended),
                     outputs=outputs)


def answer(candidates, *, now: float = 100.0, ttl=None, kind: str = "job", op_id: str = "new"):
    return choose(candidates, op_id=op_id, kind=kind, runtime=kind, now=t(now), ttl_s=ttl)


@pytest.mark.parametrize("c", [
    case("no ttl: a result never gets too old", ended=0, now=10**6, ttl=None, too_old=False),
    case("a result that ended less than ttl ago is fresh", ended=50, now=100, ttl=60, too_old=False),
    case("a result that ended exactly ttl ago is too old", ended=40, now=100, ttl=60, too_old=True),
    case("a result that ended more than ttl ago is too old", ended=0, now=100, ttl=60, too_old=True),
    case("a ttl of zero never reuses a result", ended=100, now=100, ttl=0, too_old=True),
], ids=case_name)
def test_the_ttl_is_measured_from_the_originals_end(c):
    assert expired(t(c.ended), t(c.now), c.ttl) is c.too_old


@pytest.mark.parametrize("c", [
    case("nothing known is a miss", candidates=[], ttl=None, want=Miss(NOT_FOUND)),
    case("a succeeded original is a hit", candidates=[done("a", 50, model="s3://m")], ttl=None, want="a"),
    case("a succeeded original older than the ttl is a miss", candidates=[done("a", 10)], ttl=60,
         want=Miss(EXPIRED)),
    case("a succeeded original within the ttl is a hit", candidates=[done("a", 50)], ttl=60, want="a"),
    case("an original still in processing makes the op wait", candidates=[running("a")], ttl=None,
         want=Wait(running("a"))),
    case("the latest op in processing is the one waited for", candidates=[running("a", 1), running("b", 5),
                                                                          running("c", 3)],
         ttl=None, want=Wait(running("b", 5))),
    case("a fresh result is used rather than waiting for a newer run of the same key",
         candidates=[done("a", 50), running("b", 60)], ttl=None, want="a"),
    case("an expired result with a newer run in processing waits for that run",
         candidates=[done("a", 10), running("b", 60)], ttl=60, want=Wait(running("b", 60))),
    case("with a ttl of zero nothing is waited for", candidates=[running("a")], ttl=0, want=Miss(NOT_FOUND)),
    case("the latest fresh result wins", candidates=[done("a", 20), done("b", 90), done("c", 50)], ttl=None,
         want="b"),
    case("another kind or runtime never matches", candidates=[done("a", 50, kind="pytorchjob"),
                                                              running("b", kind="pytorchjob")],
         ttl=None, want=Miss(NOT_FOUND)),
    case("the op never matches itself", candidates=[running("new")], ttl=None, want=Miss(NOT_FOUND)),
], ids=case_name)
def test_a_new_op_hits_waits_or_misses(c):
    found = answer(c.candidates, ttl=c.ttl)
    if isinstance(c.want, str):
        assert isinstance(found, Hit) and found.original.op_id == c.want
    else:
        assert found == c.want


def test_a_hit_carries_the_originals_outputs():
    found = answer([done("a", 50, model="s3://m", metrics="s3://x")])
    assert isinstance(found, Hit) and found.original.outputs == {"model": "s3://m", "metrics": "s3://x"}


def test_remember_is_idempotent_and_keeps_the_newest_in_processing():
    cands: list[Candidate] = [done("old", 5)]
    for i in range(MAX_PROCESSING + 3):
        cands = remember(cands, running(f"r{i}", at=i))
    assert remember(cands, running("r10", at=10)) == cands
    ids = [c.op_id for c in cands]
    assert ids[0] == "old" and len(ids) == 1 + MAX_PROCESSING
    assert "r0" not in ids and f"r{MAX_PROCESSING + 2}" in ids


def test_succeed_keeps_only_the_latest_result_and_the_ops_in_processing():
    cands = [done("a", 10), running("b", 20), running("c", 30)]
    cands = succeed(cands, done("b", 40, at=20))
    assert [(c.op_id, c.state) for c in cands] == [("b", SUCCEEDED), ("c", PROCESSING)]
    assert succeed(cands, done("b", 40, at=20)) == cands  # idempotent
    late_news = succeed(cands, done("z", 35))  # ended before b: b stays the key's result
    assert [c.op_id for c in late_news] == ["b", "c"]


def test_forget_drops_an_op_that_ended_without_a_result():
    assert forget([done("a", 10), running("b")], "b") == [done("a", 10)]
    assert forget([running("b")], "x") == [running("b")]


@pytest.mark.parametrize("c", [
    case("the original succeeded: its result", original=done("a", 100, model="s3://m"), others=[], ttl=None,
         want="a"),
    case("the original succeeded, but already too old for the waiter's ttl", original=done("a", 100), others=[],
         ttl=0, want=Miss(EXPIRED)),
    case("the original failed: scheduled normally", original=None, others=[], ttl=None,
         want=Miss(ORIGINAL_FAILED)),
    case("the original failed but another fresh result exists: that one", original=None,
         others=[done("b", 90)], ttl=None, want="b"),
    case("the original failed and another run is in processing: scheduled normally, no second wait",
         original=None, others=[running("c")], ttl=None, want=Miss(ORIGINAL_FAILED)),
], ids=case_name)
def test_a_waiter_settles_when_its_original_ends(c):
    found = settle(c.original, c.others, op_id="new", kind="job", runtime="job", now=t(100), ttl_s=c.ttl)
    if isinstance(c.want, str):
        assert isinstance(found, Hit) and found.original.op_id == c.want
    else:
        assert found == c.want
