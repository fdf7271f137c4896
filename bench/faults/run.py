"""One run: submit ops, strike a fault mid-run, let it last, heal it, wait (bounded) until every accepted op
is terminal, then count (``tally``) and time the recovery."""
from __future__ import annotations

import asyncio
import secrets
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from bench.faults.kinds import Fault
from bench.faults.stage import Stage
from bench.faults.tally import Tally, charges, tally
from bench.workload import gpu_spec
from opsched.proto import subjects
from opsched.proto.queries import QueuesAnswer

RUN_S = 0.2  # each op's pod runs this long on the simulated kubelet


@dataclass
class Recovery:
    """Seconds, from the wall clock of the op events (``at``) and of the harness."""

    resumed_s: float = float("nan")  # from the heal to the first event of the kind the fault stopped
    stall_s: float = 0.0  # the longest time without any op event, from the strike to the last op's end
    finished_s: float = 0.0  # from the heal to every op terminal
    slowest_op_s: float = 0.0  # the longest from an op's submitted to its end (what the ops the fault held waited)
    median_op_s: float = 0.0


@dataclass
class Outcome:
    fault: str
    tally: Tally
    recovery: Recovery
    unfinished: list[str] = field(default_factory=list)


class Submitter:
    """Submits 1-GPU ops through the SDK client at a steady rate; a submit that fails (NATS down for longer
    than the client waits) is refused."""

    def __init__(self, stage: Stage, prefix: str | None = None) -> None:
        self.stage = stage
        self.prefix = prefix or f"f{secrets.token_hex(2)}"
        self.accepted: list[str] = []
        self.refused = 0
        self._n = 0
        self._progress = asyncio.Condition()

    async def feed(self, count: int | None, rate: float, stop: asyncio.Event | None = None) -> None:
        """Submit ``count`` ops (forever when None, until ``stop``), ``rate`` per second."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        sent = 0
        while (count is None or sent < count) and not (stop and stop.is_set()):
            await self.submit_one()
            sent += 1
            await asyncio.sleep(max(0.0, began + sent / rate - loop.time()))  # the pace of the load

    async def submit_one(self) -> None:
        assert self.stage.client is not None
        op_id = f"{self.prefix}-{self._n:05d}"
        self._n += 1
        try:
            await self.stage.client.submit(gpu_spec(1, RUN_S), op_id=op_id, requested_by="faults")
            self.accepted.append(op_id)
        except Exception:  # noqa: BLE001 - NATS unavailable: refused, and the caller was told
            self.refused += 1
        async with self._progress:
            self._progress.notify_all()

    async def until_sent(self, n: int) -> None:
        async with self._progress:
            await self._progress.wait_for(lambda: self._n >= n)


async def play(stage: Stage, fault: Fault, ops: int = 250, rate: float = 25.0, strike_at: float = 0.3,
               timeout: float = 180.0) -> Outcome:
    """Submit ``ops`` ops at ``rate`` per second; once ``strike_at`` of them are submitted strike the fault,
    let it last, heal it; wait (at most ``timeout``) until every accepted op is terminal."""
    assert stage.ops is not None
    submitter = Submitter(stage)
    feeding = asyncio.create_task(submitter.feed(ops, rate))
    await asyncio.wait_for(submitter.until_sent(int(ops * strike_at)), timeout)
    struck = datetime.now(timezone.utc)
    await fault.strike(stage)
    await fault.hold(stage)
    healed, healed_mono = datetime.now(timezone.utc), time.monotonic()
    await fault.heal(stage)
    await feeding
    unfinished = await stage.ops.until_terminal(submitter.accepted, timeout)
    recovery = measure(stage, fault, struck, healed, finished_s=time.monotonic() - healed_mono)
    return Outcome(fault.name, await count(stage, submitter), recovery, unfinished)


def measure(stage: Stage, fault: Fault, struck: datetime, healed: datetime, finished_s: float) -> Recovery:
    assert stage.ops is not None
    times = sorted(at for _, at in stage.ops.times if at >= struck)
    gaps = [(b - a).total_seconds() for a, b in zip([struck, *times], times)]
    resumed = stage.ops.first_after(healed, fault.emits)
    durations = stage.ops.durations()
    return Recovery(resumed_s=(resumed - healed).total_seconds() if resumed else float("nan"),
                    stall_s=max(gaps, default=0.0), finished_s=finished_s, slowest_op_s=max(durations, default=0.0),
                    median_op_s=statistics.median(durations) if durations else 0.0)


async def count(stage: Stage, submitter: Submitter, quota_timeout: float = 30.0) -> Tally:
    """The tally once admission has folded every end (its queues show no usage, or ``quota_timeout``) and the cost
    ledger has charged every attempt that ran (or ``quota_timeout``)."""
    assert stage.bus is not None and stage.client is not None and stage.pods is not None
    queues = await settled_queues(stage, quota_timeout)
    stream = await charged_stream(stage, quota_timeout)
    await asyncio.to_thread(stage.pods.catch_up)  # what was dispatched by now has its pods listed
    pods, overlaps = stage.pods.snapshot()
    return tally(submitter.accepted, submitter.refused, stream, pods, overlaps, queues, stage.layout.gpus)


async def charged_stream(stage: Stage, timeout: float) -> list[bytes]:
    """The op stream once every attempt that ran and ended has its one ``cost_recorded`` (published just after the
    attempt's end), or as it is after ``timeout``."""
    assert stage.bus is not None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        stream = await stage.bus.read_all(subjects.OPS_STREAM, subjects.OPS_ALL)
        if not charges(stream) or loop.time() > deadline:
            return stream
        await asyncio.sleep(0.2)


async def settled_queues(stage: Stage, timeout: float) -> QueuesAnswer:
    """Admission's queues once nothing is in use any more, or what it answers after ``timeout``."""
    assert stage.client is not None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            answer = await stage.client.queues(timeout=5.0)
        except Exception:  # noqa: BLE001 - admission restarting: ask again
            answer = None
        in_use = answer is None or any(q.running or any(u.used for u in q.usage) for q in answer.queues)
        if answer is not None and (not in_use or loop.time() > deadline):
            return answer
        if loop.time() > deadline:
            raise TimeoutError(f"admission did not answer a queues query within {timeout}s")
        await asyncio.sleep(0.2)
