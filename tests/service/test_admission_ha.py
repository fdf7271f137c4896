"""Admission with replicas: one leads (consumes commands, decides), the others fold and stand by. A
leader killed mid-run is replaced within seconds and no op is admitted twice; a leader that another
replica claimed after has its decisions and command answers refused, and steps down."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from opsched.proto import codec, subjects
from opsched.proto.events import OperationAdmitted, OperationSubmitted, OperationSucceeded
from opsched.proto.leases import LeaderClaimed, Lease
from opsched.services.admission.service import Admission
from opsched.services.admission.state.admission_state import Status
from opsched.services.runtime.runner import serve
from opsched.services.runtime.settings import Settings
from tests.builders import T0, gates_cleared, op, submitted
from tests.builders.clock import FakeClock
from tests.waiting import advance_until, eventually

TTL, RENEW = 3.0, 1.0  # short, so the test is: the defaults are 6 s and 2 s
QUEUES = "defaultQueue: default\nqueues:\n  - {name: default, concurrency: 2}\n"


class Replica:
    """One admission replica serving on its own connection; ``kill`` ends it without a word (as kill -9:
    its lease is neither renewed nor released)."""

    def __init__(self, admission: Admission, connect, url: str) -> None:
        self.admission, self.stop = admission, asyncio.Event()
        self.task = asyncio.create_task(serve([admission], admission.settings, self.stop, connect))

    @property
    def leadership(self):
        return self.admission.leadership

    async def leads(self, timeout: float = 20.0) -> None:
        await asyncio.wait_for(self.leadership.leading.wait(), timeout)

    def kill(self) -> None:
        self.task.cancel()

    async def close(self) -> None:
        self.stop.set()
        try:
            await asyncio.wait_for(self.task, timeout=20)
        except (asyncio.CancelledError, asyncio.TimeoutError):
            self.task.cancel()


@pytest.fixture
async def replicas(connect, bus_url, bus, tmp_path):
    """``await replicas(clock=None)``: a new admission replica (lease ttl 3 s, renewed every second)."""
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    made: list[Replica] = []

    async def make(clock=None) -> Replica:
        settings = Settings(nats_url=bus_url, log_format="console", queues_file=queues, lease_ttl_s=TTL,
                            lease_renew_s=RENEW)
        replica = Replica(Admission(settings, clock), connect, bus_url)
        await asyncio.wait_for(replica.admission.ready.wait(), 20)
        made.append(replica)
        return replica
    yield make
    for replica in made:
        await replica.close()


def admitted_counts(events) -> dict[tuple[str, int], int]:
    counts: dict[tuple[str, int], int] = {}
    for _, event in events.events:
        if isinstance(event, OperationAdmitted):
            counts[(event.op_id, event.attempt)] = counts.get((event.op_id, event.attempt), 0) + 1
    return counts


def most_at_once(events) -> int:
    """The most ops admitted and not yet finished at any point of the stream."""
    holding, most = 0, 0
    for _, event in events.events:
        holding += isinstance(event, OperationAdmitted) - isinstance(event, OperationSucceeded)
        most = max(most, holding)
    return most


async def finish_one(bus, events, finished: set[str]) -> str:
    """Wait for an op admitted and not finished yet; report it succeeded (as the dispatcher would)."""
    async def next_admitted():
        return next((e.op_id for _, e in events.events
                     if isinstance(e, OperationAdmitted) and e.op_id not in finished), None)
    op_id = await eventually(next_admitted, "an admitted op to finish", timeout=30)
    await bus.publish(OperationSucceeded(op_id=op_id, at=datetime.now(timezone.utc), pod_name=f"op-{op_id}-0"))
    finished.add(op_id)
    return op_id


async def test_a_standby_takes_over_within_seconds_of_the_leaders_death_and_admits_every_op_once(
        stack_factory, replicas, bus, client, events):
    await stack_factory(names=("cost", "cache", "dispatcher"), dispatcher_mode="null")
    first = await replicas()
    await first.leads()
    second = await replicas()
    ids = [await client.submit(op(f"ha-{i}").build(), op_id=f"ha-{i}") for i in range(8)]
    for op_id in ids:
        await events.expect(OperationSubmitted, op_id)
    assert second.leadership.state == "standby"

    finished: set[str] = set()
    for _ in range(3):
        await finish_one(bus, events, finished)
    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    first.kill()  # mid-run: two ops admitted and running, three waiting
    await second.leads(timeout=TTL + RENEW + 10)
    took = loop.time() - killed_at
    assert took <= TTL + RENEW + 2.0, f"took over after {took:.1f}s"
    while len(finished) < len(ids):
        await finish_one(bus, events, finished)

    assert admitted_counts(events) == {(op_id, 0): 1 for op_id in ids}
    assert most_at_once(events) == 2  # the queue's concurrency, across the takeover
    async def all_done() -> bool:  # once the leader has folded the last success (on its own follow)
        [default] = (await client.queues()).queues
        return (default.running, default.pending) == (0, 0)
    await eventually(all_done, "the queue to hold no op", timeout=10)


async def test_a_decision_of_a_leader_that_another_replica_claimed_after_is_refused_and_it_steps_down(
        replicas, bus):
    clock = FakeClock(T0)  # frozen: the leader never renews, so only the fence can tell it
    stale = await replicas(clock)
    await stale.leads()
    await another_replica_takes_the_lease(bus)
    for event in (submitted(op("late").build(), op_id="late"), *gates_cleared("late")):
        await bus.publish(event)
    await asyncio.wait_for(stale.leadership.standing_by.wait(), 20)  # its admitted was refused
    assert stale.admission.state.ops["late"].status == Status.QUEUED  # the assumption forgotten
    assert await bus.read_all(subjects.OPS_STREAM, subjects.events_of("admitted")) == []


async def test_a_command_answered_by_a_leader_that_another_replica_claimed_after_is_given_back(replicas, bus, client):
    clock = FakeClock(T0)
    stale = await replicas(clock)
    await stale.leads()
    rival = await another_replica_takes_the_lease(bus)
    await client.submit(op("cmd").build(), op_id="cmd")
    await asyncio.wait_for(stale.leadership.standing_by.wait(), 20)  # its submitted was refused
    assert await bus.read_all(subjects.OPS_STREAM, subjects.events_of("submitted")) == []

    await rival.release()  # the rival goes away cleanly: the replica leads again, from a new claim
    await advance_until(clock, stale.leadership.leading.is_set, "the replica to lead again")
    submits = await eventually(lambda: bus.read_all(subjects.OPS_STREAM, subjects.events_of("submitted")),
                               "the command answered by the leader")
    assert [codec.decode_event(d).op_id for d in submits] == ["cmd"]


class Rival:
    """Another replica that holds the lease (an hour long) and has claimed after the first one."""

    def __init__(self, kv, revision: int) -> None:
        self.kv, self.revision = kv, revision

    async def release(self) -> None:
        gone = Lease(holder="rival", expires_at=T0 - timedelta(seconds=1))
        await self.kv.update(subjects.ADMISSION_ROLE, msgspec.json.encode(gone), last=self.revision)


async def another_replica_takes_the_lease(bus) -> Rival:
    kv = await bus.ensure_cache_bucket(subjects.LEASE_BUCKET)
    entry = await kv.get(subjects.ADMISSION_ROLE)
    lease = Lease(holder="rival", expires_at=T0 + timedelta(hours=1))
    revision = await kv.update(subjects.ADMISSION_ROLE, msgspec.json.encode(lease), last=entry.revision)
    await bus.publish(LeaderClaimed(role=subjects.ADMISSION_ROLE, holder="rival", lease_revision=revision, at=T0))
    return Rival(kv, revision)
