"""Scenario (f): cold start of admission with N pending ops in the stream.

Once per run, N ops (``submitted`` + ``cost_estimated``: 2N messages, caching off; with the
headers the bus puts on every event) are published into ``OPSCHED_OPS`` of a nats-server whose store
is then kept as a template. Each round copies the template and starts a fresh nats-server on the copy,
then times what ``Admission.start`` does (replay config, cluster and ops streams into
``AdmissionState``) with the real ``Admission`` class, then the first cycle on the rebuilt state
(which queues every cleared op). Afterwards, on the same (now warm) server, a raw replay: the same
ordered consumer that ``Bus.replay`` uses, with a callback that only counts.

The ops, their queues and creation times come from the workload config (default.yaml, or
``--workload``) with N pending ops; its queue configuration is in the config stream (one message),
so admission replays it as in production.
"""
from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

from bench.generator import build_file
from bench.workload import PENDING_EVENTS, at, op_id, pending_events

SOURCE = "opsched-admission"


def _headers(event) -> dict[str, str]:
    from opsched.bus.addressing import default_msg_id
    from opsched.proto import cloudevents, codec

    mid = default_msg_id(event)
    return {"Nats-Msg-Id": mid, **cloudevents.headers(codec.type_of(event), mid, SOURCE, event.op_id, event.at)}


async def _configure(bus, config) -> None:
    from opsched.proto import subjects
    from opsched.proto.config import QueuesConfigured

    event = QueuesConfigured(config=config, at=at(0), source="file:bench-workload#coldstart")
    await bus.publish(event, subject=subjects.CONFIG_QUEUES, msg_id="queues.bench-coldstart")


async def _generate(url: str, n_ops: int, workload_file: Path | None) -> dict[str, float]:
    from opsched.bus.bus import Bus
    from opsched.proto import codec, subjects

    workload = build_file(workload_file, pending=n_ops)
    bus = await Bus.connect(url, "bench-generator")
    await bus.ensure_streams()
    await _configure(bus, workload.queues_config())
    js = bus.js
    began, size = time.perf_counter(), 0
    for i, sub in enumerate(workload.submissions):
        for event in pending_events(op_id("c", i), sub, at(sub.offset_s)):
            data = codec.encode(event)
            size += len(data)
            await js.publish_async(subjects.event(codec.type_of(event), event.op_id), data, headers=_headers(event))
    await js.publish_async_completed()
    seconds = time.perf_counter() - began
    stored = await bus.last_seq(subjects.OPS_STREAM)
    await bus.close()
    if stored != PENDING_EVENTS * n_ops:
        raise RuntimeError(f"cold-start generator stored {stored} messages, expected {PENDING_EVENTS * n_ops}")
    return {"generate_per_s": PENDING_EVENTS * n_ops / seconds, "mean_event_bytes": size / (PENDING_EVENTS * n_ops)}


def build_template(root: Path, n_ops: int, workload_file: Path | None = None) -> tuple[Path, dict[str, float]]:
    from opsched.natsserver import NatsServer

    store = root / f"coldstart-template-{n_ops}"
    shutil.rmtree(store, ignore_errors=True)
    server = NatsServer(store).start()
    try:
        info = asyncio.run(_generate(server.url, n_ops, workload_file))
    finally:
        server.stop()
    info["store_mib"] = sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) / 2**20
    return store, info


async def _cold_start(url: str, n_ops: int) -> dict[str, float]:
    from opsched.bus.bus import Bus
    from opsched.services.admission import cycle
    from opsched.services.admission.service import Admission
    from opsched.services.runtime.settings import Settings

    settings = Settings(nats_url=url, log_format="json", log_level="warning")
    admission = Admission(settings)
    bus = await Bus.connect(url, "opsched-admission")
    try:
        t0 = time.perf_counter()
        await admission.start(bus)
        start_s = time.perf_counter() - t0
        rebuilt = len(admission.state.ops)
        t0 = time.perf_counter()
        decisions = cycle.decide(admission.state, admission.book, admission.clock.now(), settings.namespace)
        first_cycle_s = time.perf_counter() - t0
    finally:
        await bus.close()
    if rebuilt != n_ops:
        raise RuntimeError(f"cold start rebuilt {rebuilt} ops, expected {n_ops}")
    return {"ops": float(n_ops), "messages": float(PENDING_EVENTS * n_ops), "cold_start_s": start_s,
            "replay_msgs_per_s": PENDING_EVENTS * n_ops / start_s, "first_cycle_s": first_cycle_s,
            "first_cycle_admitted": float(len(decisions))}


async def _raw_replay(url: str, expected: int) -> dict[str, float]:
    from opsched.bus.bus import Bus
    from opsched.proto import subjects

    bus = await Bus.connect(url, "bench-raw-replay")
    got = {"n": 0}
    done = asyncio.Event()

    async def count(data: bytes, seq: int) -> None:
        got["n"] += 1
        if got["n"] >= expected:
            done.set()

    try:
        t0 = time.perf_counter()
        sub = await bus.follow(subjects.OPS_STREAM, subjects.OPS_ALL, count)
        await asyncio.wait_for(done.wait(), timeout=600)
        seconds = time.perf_counter() - t0
        await sub.unsubscribe()
    finally:
        await bus.close()
    return {"raw_replay_s": seconds, "raw_replay_msgs_per_s": expected / seconds}


def run_round(root: Path, template: Path, n_ops: int, round_no: int) -> dict[str, float]:
    from opsched.natsserver import NatsServer
    from opsched.services.runtime import eventloop

    store = root / f"coldstart-r{round_no}"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(template, store)
    server = NatsServer(store).start()
    try:
        async def both() -> dict[str, float]:
            out = await _cold_start(server.url, n_ops)
            out.update(await _raw_replay(server.url, PENDING_EVENTS * n_ops))
            return out
        return eventloop.run(both())  # as admission runs
    finally:
        server.stop()
        shutil.rmtree(store, ignore_errors=True)
