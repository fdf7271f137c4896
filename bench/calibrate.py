"""Calibration: the raw primitives every figure is divided by, measured in the same round.

NATS (a fresh ``nats-server -js``, file storage, as the services use it): JetStream publish+ack
sequential and with 64 in flight, ``publish_async`` (window 4000), pull ``fetch`` with batch 100
(explicit ack, decode per message), key-value put/get. Kubernetes: sequential pod creates through the
official client against the local kube-apiserver (dict body, ``_preload_content=False``, as the
dispatcher does it, but from a plain thread and with ``nodeName`` set so kube-scheduler stays out).
"""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any

import msgspec

from bench.common import latency_summary, percentile
from opsched.proto import codec
from opsched.proto.events import CostEstimated, Money

STREAM = "BENCH_CAL"
IN_FLIGHT = 64


def event_bytes(i: int) -> bytes:
    """A real opsched event (about 180-200 bytes of msgspec JSON), encoded per message."""
    return codec.encode(CostEstimated(
        op_id=f"{i:012x}", at=datetime.now(timezone.utc), estimate=Money(amount=2.53), basis="default",
        duration_s=3600.0, breakdown={"gpu": 2.0, "cpu": 0.53}))


async def nats_primitives(url: str, sizes: dict[str, int]) -> dict[str, float]:
    import nats
    from nats.js import api

    nc = await nats.connect(url, name="bench-calibration")
    js = nc.jetstream()
    await js.add_stream(api.StreamConfig(name=STREAM, subjects=["bench.>"], storage=api.StorageType.FILE,
                                         duplicate_window=120.0))
    out: dict[str, float] = {"payload_bytes": float(len(event_bytes(0)))}
    try:
        for i in range(200):  # warm-up: connection, stream files, code paths
            await js.publish("bench.warm", event_bytes(i))
        out.update(await _sequential(js, sizes["cal_seq"]))
        out.update(await _in_flight(js, sizes["cal_flight"]))
        out.update(await _publish_async(js, sizes["cal_flight"]))
        out.update(await _fetch(js, sizes["cal_flight"]))
        out.update(await _hop(js, min(300, sizes["cal_seq"])))
        out.update(await _kv(js, sizes["cal_kv"]))
    finally:
        await nc.close()
    return out


async def _sequential(js, n: int) -> dict[str, float]:
    lat = []
    began = time.perf_counter()
    for i in range(n):
        data = event_bytes(i)
        t0 = time.perf_counter()
        await js.publish("bench.seq", data)
        lat.append(time.perf_counter() - t0)
    total = time.perf_counter() - began
    return {"js_pub_seq_per_s": n / total, **latency_summary(lat, "js_pub_seq", "us")}


async def _in_flight(js, n: int) -> dict[str, float]:
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await js.publish("bench.flight", event_bytes(i))

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return {"js_pub_64_per_s": n / (time.perf_counter() - began)}


async def _publish_async(js, n: int) -> dict[str, float]:
    began = time.perf_counter()
    for i in range(n):
        await js.publish_async("bench.async", event_bytes(i))
    await js.publish_async_completed()
    return {"js_pub_async_per_s": n / (time.perf_counter() - began)}


async def _fetch(js, n: int) -> dict[str, float]:
    """Pull-fetch the ``bench.flight`` messages, batch 100, decode and ack each (a service's loop)."""
    from nats.js import api

    decoder = msgspec.json.Decoder(CostEstimated)
    config = api.ConsumerConfig(durable_name="bench-fetch", ack_policy=api.AckPolicy.EXPLICIT,
                                filter_subject="bench.flight", max_ack_pending=20_000)
    await js.add_consumer(STREAM, config)
    sub = await js.pull_subscribe_bind(durable="bench-fetch", stream=STREAM)
    got = 0
    began = time.perf_counter()
    while got < n:
        msgs = await sub.fetch(100, timeout=5.0)
        for msg in msgs:
            decoder.decode(msg.data)
            await msg.ack()
        got += len(msgs)
    total = time.perf_counter() - began
    await sub.unsubscribe()
    return {"fetch100_per_s": got / total}


async def _hop(js, n: int) -> dict[str, float]:
    """One durable hop as a service sees it: publish+ack, then an idle pull consumer (``fetch(64)``,
    as the handler loop does) returns the message. Latency from before the publish to the fetch return."""
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js import api

    await js.add_consumer(STREAM, api.ConsumerConfig(durable_name="bench-hop", ack_policy=api.AckPolicy.EXPLICIT,
                                                     filter_subject="bench.hop"))
    sub = await js.pull_subscribe_bind(durable="bench-hop", stream=STREAM)
    sent: dict[int, float] = {}
    lat: list[float] = []

    async def consume() -> None:
        while len(lat) < n:
            try:
                msgs = await sub.fetch(64, timeout=0.5)
            except (NatsTimeout, asyncio.TimeoutError):
                continue
            now = time.perf_counter()
            for msg in msgs:
                lat.append(now - sent[int(msg.data)])
                await msg.ack()

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    for i in range(n):
        sent[i] = time.perf_counter()
        await js.publish("bench.hop", str(i).encode())
        await asyncio.sleep(0.003)
    await asyncio.wait_for(consumer, timeout=30)
    await sub.unsubscribe()
    return latency_summary(lat, "hop", "us")


async def _kv(js, n: int) -> dict[str, float]:
    from nats.js import api

    kv = await js.create_key_value(api.KeyValueConfig(bucket="bench_cal", storage=api.StorageType.FILE))
    value = event_bytes(0)
    put, get = [], []
    for i in range(n):
        t0 = time.perf_counter()
        await kv.put(f"k.{i}", value)
        put.append(time.perf_counter() - t0)
    for i in range(n):
        t0 = time.perf_counter()
        await kv.get(f"k.{i}")
        get.append(time.perf_counter() - t0)
    return {"kv_put_per_s": n / sum(put), "kv_get_per_s": n / sum(get),
            **latency_summary(put, "kv_put", "us"), **latency_summary(get, "kv_get", "us")}


# ---- Kubernetes ------------------------------------------------------------------------------

def calibration_pod(i: int, namespace: str) -> dict:
    """The dispatcher's own pod body for a 1-GPU op, pinned to a node name no kubelet serves."""
    from bench.workload import gpu_spec
    from opsched.proto.events import OperationAdmitted
    from opsched.rules.podspec import build_pods

    admitted = OperationAdmitted(op_id=f"cal{i:09d}", at=datetime.now(timezone.utc), spec=gpu_spec(),
                                 queue="default", namespace=namespace, pod_name=f"op-cal{i:09d}-0")
    pod = build_pods(admitted)[0]
    pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "opsched-bench"
    pod["spec"]["nodeName"] = "bench-no-such-node"
    return pod


def ensure_namespace(core: Any, namespace: str) -> None:
    """Create ``namespace`` unless it exists."""
    from kubernetes import client

    try:
        core.create_namespace({"metadata": {"name": namespace}}, _preload_content=False)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def k8s_creates(kubeconfig, namespace: str, n: int) -> dict[str, float]:
    """Sequential creates (after 20 warm-up creates), then every pod of the namespace is deleted."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    core = client.CoreV1Api(api)
    try:
        ensure_namespace(core, namespace)
        bodies = [calibration_pod(i, namespace) for i in range(n + 20)]
        for body in bodies[:20]:
            _create(core, namespace, body)
        lat = []
        began = time.perf_counter()
        for body in bodies[20:]:
            t0 = time.perf_counter()
            _create(core, namespace, body)
            lat.append(time.perf_counter() - t0)
        total = time.perf_counter() - began
        parallel = _parallel_creates(core, namespace, n)
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    finally:
        api.close()
    return {"k8s_create_per_s": n / total, "k8s_create_p50_ms": percentile(lat, 50) * 1e3,
            "k8s_create_p99_ms": percentile(lat, 99) * 1e3, "k8s_create_8_threads_per_s": parallel}


def _create(core, namespace: str, body: dict) -> bytes:
    """One create as the dispatcher makes it: a dict body, the raw answer read (which gives the connection back to
    the pool: an unread one opened a new TLS connection per create, and the rate measured the handshakes)."""
    return core.create_namespaced_pod(namespace, body, _preload_content=False).data


def _parallel_creates(core, namespace: str, n: int, threads: int = 8) -> float:
    """The same creates from 8 threads sharing one client: what the API server takes when asked in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = [calibration_pod(100_000 + i, namespace) for i in range(n)]
    began = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda b: _create(core, namespace, b), bodies))
    return n / (time.perf_counter() - began)
