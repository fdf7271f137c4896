"""The lease one admission replica decides by (``services.runtime.lease``, ``services.runtime.leadership``),
on both buses' key-value buckets, with a fake clock: acquire, renew, lose on a conflicting write, run out,
step down before the ttl when a renewal cannot be confirmed, release on a clean stop; and the fence:
a publish behind a claim that another instance has claimed after is refused, and nothing is stored."""
from __future__ import annotations

import asyncio
from datetime import timedelta

import msgspec
import pytest
import structlog

from opsched.bus.bus import Fence
from opsched.bus.errors import Fenced
from opsched.proto import subjects
from opsched.proto.events import OperationSubmitted
from opsched.proto.leases import LeaderClaimed, Lease
from opsched.services.runtime.leadership import LEADER, STANDBY, Leadership
from opsched.services.runtime.lease import KVLease
from tests.builders import T0, op, submitted
from tests.builders.clock import FakeClock
from tests.waiting import advance_until, eventually

TTL, MARGIN, RENEW = 6.0, 1.0, 2.0  # Leadership's margin: ttl / 6
STEP = 0.05  # fake seconds per step of ``advance_until``
# fake seconds that pass while an instance's NATS round trips take real time (the clock keeps stepping):
# 0.2 s seen on a loaded CI machine; well under RENEW, so "at the next renewal" stays what is tested
SLACK = 1.0
KEY = subjects.ADMISSION_ROLE


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
async def kv(bus):
    return await bus.ensure_cache_bucket(subjects.LEASE_BUCKET)


def lease(kv, holder: str, clock: FakeClock) -> KVLease:
    return KVLease(kv, KEY, holder, clock, TTL, MARGIN)


async def stored(kv) -> Lease:
    return msgspec.json.decode((await kv.get(KEY)).value, type=Lease)


# ---- the lease ----------------------------------------------------------------------------------

async def test_the_first_acquires_and_a_second_cannot_while_it_is_held(kv, clock):
    a, b = lease(kv, "a", clock), lease(kv, "b", clock)
    assert await a.acquire() and a.valid()
    clock.advance(TTL - 0.1)
    assert not await b.acquire() and b.held is None
    assert (await stored(kv)).holder == "a"


async def test_a_renewal_moves_the_revision_and_the_expiry(kv, clock):
    a, b = lease(kv, "a", clock), lease(kv, "b", clock)
    await a.acquire()
    first = a.held
    clock.advance(RENEW)
    assert await a.renew()
    assert a.held.revision > first.revision and a.held.valid_until == first.valid_until + timedelta(seconds=RENEW)
    clock.advance(TTL - 1)  # past the first expiry, not the renewed one
    assert not await b.acquire()
    assert (await stored(kv)).expires_at == T0 + timedelta(seconds=RENEW + TTL)


async def test_a_lease_that_ran_out_is_taken_over_and_the_old_holder_loses_it_on_renewal(kv, clock):
    a, b = lease(kv, "a", clock), lease(kv, "b", clock)
    await a.acquire()
    clock.advance(TTL + 0.1)
    assert not a.valid()
    assert await b.acquire()
    assert not await a.renew() and a.held is None
    assert (await stored(kv)).holder == "b"


async def test_a_renewal_after_anyone_else_wrote_the_key_loses_the_lease(kv, clock):
    a = lease(kv, "a", clock)
    await a.acquire()
    await kv.update(KEY, msgspec.json.encode(Lease(holder="b", expires_at=T0 + timedelta(hours=1))),
                    last=a.held.revision)
    assert not await a.renew() and not a.valid()


async def test_the_holder_counts_on_it_only_until_a_margin_before_others_may_take_it(kv, clock):
    a, b = lease(kv, "a", clock), lease(kv, "b", clock)
    await a.acquire()
    clock.advance(TTL - MARGIN)
    assert not a.valid()  # a stops deciding now ...
    assert not await b.acquire()  # ... before b may begin
    clock.advance(MARGIN + 0.01)
    assert await b.acquire()


async def test_a_released_lease_is_taken_at_once(kv, clock):
    a, b = lease(kv, "a", clock), lease(kv, "b", clock)
    await a.acquire()
    await a.release()
    assert a.held is None
    assert await b.acquire()


# ---- leadership: acquire, claim, lead, renew, step down -----------------------------------------

class Instance:
    """One replica's ``Leadership`` running on its own connection, with the test's fake clock."""

    def __init__(self, bus, clock: FakeClock, holder: str) -> None:
        self.bus, self.stop = bus, asyncio.Event()
        self.folded = 0

        async def catch_up(seq: int) -> bool:
            self.folded = max(self.folded, seq)  # a fold that is always caught up
            return True
        self.leadership = Leadership(KEY, clock, TTL, RENEW, catch_up, structlog.get_logger(), holder=holder)
        self.task = asyncio.create_task(self.leadership.run(bus, self.stop))

    async def leads(self) -> None:
        await asyncio.wait_for(self.leadership.leading.wait(), timeout=10)

    def read_the_lease(self) -> bool:
        return self.leadership.lease is not None and self.leadership.lease.seen is not None

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, timeout=10)

    def kill(self) -> None:
        self.task.cancel()


@pytest.fixture
async def instances(connect, bus_url, bus, clock):
    made: list[Instance] = []

    async def make(holder: str) -> Instance:
        instance = Instance(await connect(bus_url, "opsched-admission"), clock, holder)  # replicas of admission
        made.append(instance)
        return instance
    yield make
    for instance in made:
        if not instance.task.done():
            instance.kill()
        await instance.bus.close()


async def claims(bus) -> list[LeaderClaimed]:
    return [msgspec.json.decode(d, type=LeaderClaimed)
            for d in await bus.read_all(subjects.OPS_STREAM, subjects.lease_claim(KEY))]


async def test_one_leads_after_claiming_and_the_other_stands_by(instances, bus, clock):
    a = await instances("a")
    await a.leads()
    b = await instances("b")
    await eventually(lambda: _async(b.read_the_lease()), "b to read the lease")
    assert (a.leadership.state, b.leadership.state) == (LEADER, STANDBY)
    [claim] = await claims(bus)
    assert (claim.holder, claim.lease_revision) == ("a", a.leadership.lease.held.revision)
    assert a.leadership.fence == Fence(subjects.lease_claim(KEY), a.folded)  # caught up to its claim


async def test_the_leader_renews_every_interval_and_keeps_leading(instances, clock):
    a = await instances("a")
    await a.leads()
    await advance_until(clock, lambda: a.leadership.lease.seen.expires_at >= T0 + timedelta(seconds=3 * RENEW + TTL),
                        "three renewals", limit_s=3 * RENEW + 1)
    assert a.leadership.deciding() and len(await claims(a.bus)) == 1


async def test_a_killed_leader_is_taken_over_once_its_lease_runs_out_and_the_new_one_claims(instances, bus, clock):
    a = await instances("a")
    await a.leads()
    b = await instances("b")
    await eventually(lambda: _async(b.read_the_lease()), "b to read the lease")
    a.kill()
    took = await advance_until(clock, b.leadership.leading.is_set, "b to take over")
    assert TTL - STEP <= took <= TTL + SLACK  # not before a's lease ran out, and soon after
    assert [c.holder for c in await claims(bus)] == ["a", "b"]
    assert b.folded == b.leadership.fence.seq  # caught up to its own claim before leading


async def test_a_leader_whose_renewal_is_not_confirmed_steps_down_before_its_ttl(instances, kv, clock):
    a = await instances("a")
    await a.leads()
    hang = asyncio.Event()

    async def unanswered(*args, **kwargs):
        await hang.wait()
    a.leadership.lease.kv = _Patched(a.leadership.lease.kv, update=unanswered)
    took = await advance_until(clock, a.leadership.standing_by.is_set, "a to step down")
    assert TTL - MARGIN - STEP <= took < TTL  # its own deadline, before anyone may take over:
    assert (await stored(kv)).expires_at == T0 + timedelta(seconds=TTL)
    assert not a.leadership.deciding()


async def test_a_clean_stop_releases_the_lease_so_the_standby_takes_over_without_waiting(instances, clock):
    a = await instances("a")
    await a.leads()
    b = await instances("b")
    await eventually(lambda: _async(b.read_the_lease()), "b to read the lease")
    await a.close()
    assert await advance_until(clock, b.leadership.leading.is_set, "b to take over") <= RENEW + SLACK


async def test_a_clean_stop_steps_down_at_info_and_a_lost_lease_with_a_warning(instances, kv, clock):
    """Ctrl-C on `opsched up` is no warning on its terminal; losing the lease is."""
    with structlog.testing.capture_logs() as logs:
        a = await instances("a")
        await a.leads()
        await kv.update(KEY, msgspec.json.encode(Lease(holder="b", expires_at=T0 + timedelta(hours=1))),
                        last=a.leadership.lease.held.revision)
        await advance_until(clock, a.leadership.standing_by.is_set, "a to step down")
        await a.close()  # not leading: nothing to step down from
        await kv.delete(KEY)
        c = await instances("c")
        await advance_until(clock, c.leadership.leading.is_set, "c to lead")
        await c.close()
    assert [(e["log_level"], e["why"]) for e in logs if e["event"] == "stepped_down"] == [
        ("warning", "the lease was written by another instance"), ("info", "stopping")]


async def test_a_leader_loses_the_lease_to_a_conflicting_write_at_its_next_renewal(instances, kv, clock):
    a = await instances("a")
    await a.leads()
    await kv.update(KEY, msgspec.json.encode(Lease(holder="b", expires_at=T0 + timedelta(hours=1))),
                    last=a.leadership.lease.held.revision)
    assert await advance_until(clock, a.leadership.standing_by.is_set, "a to step down") <= RENEW + SLACK
    await advance_until(clock, lambda: clock.now() >= T0 + timedelta(seconds=3 * RENEW), "three renewals' time")
    assert a.leadership.state == STANDBY  # b's lease has not run out


# ---- the fence -----------------------------------------------------------------------------------

async def test_a_publish_behind_a_claim_that_another_instance_claimed_after_is_refused(bus):
    claim = subjects.lease_claim(KEY)
    old = await bus.publish(LeaderClaimed(role=KEY, holder="a", lease_revision=1, at=T0))
    decision = submitted(op("x").build(), op_id="x")
    assert not (await bus.publish(decision, fence=Fence(claim, old.seq))).duplicate
    new = await bus.publish(LeaderClaimed(role=KEY, holder="b", lease_revision=2, at=T0))
    late = submitted(op("y").build(), op_id="y")
    with pytest.raises(Fenced):
        await bus.publish(late, fence=Fence(claim, old.seq))
    assert [msgspec.json.decode(d, type=OperationSubmitted).op_id
            for d in await bus.read_all(subjects.OPS_STREAM, subjects.events_of("submitted"))] == ["x"]
    await bus.publish(late, fence=Fence(claim, new.seq))  # the new leader's goes through
    again = await bus.publish(late, fence=Fence(claim, new.seq))
    assert again.duplicate  # and a repeat of it is still one (Nats-Msg-Id)


async def test_a_fence_applies_only_to_the_stream_of_its_claim(bus):
    from opsched.proto.config import QueuesConfigured
    from opsched.proto.queues import QueuesConfig

    old = await bus.publish(LeaderClaimed(role=KEY, holder="a", lease_revision=1, at=T0))
    await bus.publish(LeaderClaimed(role=KEY, holder="b", lease_revision=2, at=T0))
    config = QueuesConfigured(config=QueuesConfig(), source="test", at=T0)
    ack = await bus.publish(config, fence=Fence(subjects.lease_claim(KEY), old.seq))  # config stream: not fenced
    assert not ack.duplicate
    stored_config = await bus.read_all(subjects.CONFIG_STREAM, subjects.CONFIG_QUEUES)
    assert [msgspec.json.decode(d, type=QueuesConfigured).source for d in stored_config] == ["test"]


async def _async(value):
    return value


class _Patched:
    """A bucket with some calls replaced."""

    def __init__(self, kv, **calls) -> None:
        self._kv, self._calls = kv, calls

    def __getattr__(self, name: str):
        return self._calls.get(name) or getattr(self._kv, name)
