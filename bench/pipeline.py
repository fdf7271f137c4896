"""Scenarios (a) and (b): the four services in this process (as `opsched up` runs them), ops submitted
through the SDK, the admitted, dispatched and running events timestamped as they appear (core subscriptions here).

(b) ``dispatcher_mode="null"``: the dispatcher acknowledges ``admitted`` without HTTP, isolating the
bus pipeline. (a) the real dispatcher against the local kube-apiserver + kube-scheduler with a
simulated kubelet; ``dispatched`` is published right after the pod create returned, so
submit→dispatched is submit→pod-created plus one publish.

The queues and the ops (class, priority, GPU request, run time) come from the workload config
(bench/workloads/pipeline.yaml: one queue, 1-GPU ops; or ``--workload``), in stream order, without
the queues' quotas (these scenarios measure the bus and the API server) and without the creation
times (each phase sets its own pace).

Two phases per scenario: *unloaded* (one op at a time: submit, wait for ``dispatched``, next) for the
latency floor, then a *burst* (N submits, 64 in flight) for throughput and latency under load.
An op takes 6 durable publishes (submit, submitted, cost_estimated, cache_missed, admitted,
dispatched), 5 of them one after the other on its critical path.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import CpuMeter, Stack, fresh_nats, latency_summary, proc_cpu_s
from bench.generator import PIPELINE, Workload, build_file
from bench.workload import spec_of, write_queues

if TYPE_CHECKING:
    from nats.aio.client import Client

PUBLISHES_PER_OP = 6
CRITICAL_HOPS = 5
SUBMITTERS = 64
WARMUP = 5


OBSERVED = ("admitted", "dispatched", "running")  # the kinds the figures use: watching others would only add load


class Observer:
    """First arrival time of each (event type, op id) of the ``OBSERVED`` kinds on the op subjects."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.count: dict[str, int] = {}
        self.waiters: dict[tuple[str, str], asyncio.Event] = {}
        self.nc: Client | None = None

    async def start(self, url: str) -> "Observer":
        import nats

        self.nc = nc = await nats.connect(url, name="bench-observer")
        for kind in OBSERVED:
            await nc.subscribe(f"ops.{kind}.*", cb=self._on)
        return self

    async def _on(self, msg) -> None:
        now = time.perf_counter()
        _, kind, oid = msg.subject.split(".", 2)
        key = (kind, oid)
        if key in self.seen:
            return
        self.seen[key] = now
        self.count[kind] = self.count.get(kind, 0) + 1
        waiter = self.waiters.pop(key, None)
        if waiter:
            waiter.set()

    async def wait(self, kind: str, oid: str, timeout: float) -> float | None:
        if (kind, oid) not in self.seen:
            event = self.waiters.setdefault((kind, oid), asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except asyncio.TimeoutError:
                return None
        return self.seen[(kind, oid)]

    async def close(self) -> None:
        if self.nc:
            await self.nc.close()


def pipeline_workload(ops: int, workload_file: Path | None = None) -> Workload:
    """``ops`` generated ops from the config (pipeline.yaml by default), its queues without quota."""
    return build_file(workload_file, PIPELINE, pending=ops, nominal_quota=None)


async def _unloaded(client, obs: Observer, specs: list, timeout: float) -> dict[str, float]:
    dispatched, admitted, missing = [], [], 0
    for i, spec in enumerate(specs):
        oid = f"s{i:07d}"
        t0 = time.perf_counter()
        await client.submit(spec, op_id=oid)
        t_disp = await obs.wait("dispatched", oid, timeout)
        if t_disp is None:
            missing += 1
            continue
        dispatched.append(t_disp - t0)
        admitted.append(obs.seen.get(("admitted", oid), t_disp) - t0)
    return {**latency_summary(dispatched, "unloaded_dispatch"), **latency_summary(admitted, "unloaded_admit"),
            "unloaded_missing": float(missing)}


async def _burst(client, obs: Observer, specs: list, timeout: float, server_pid: int,
                 others: dict[str, int] | None = None) -> dict[str, float]:
    """``others``: more processes (name -> pid) whose CPU per op is reported (the control plane in (a))."""
    n = len(specs)
    ids = [f"b{i:07d}" for i in range(n)]
    submitted: dict[str, float] = {}
    pending = iter(zip(ids, specs))

    async def submitter() -> None:
        for oid, spec in pending:
            submitted[oid] = time.perf_counter()
            await client.submit(spec, op_id=oid)

    meter = CpuMeter(server_pid).start()
    others_before = {name: proc_cpu_s(pid) for name, pid in (others or {}).items()}
    began = time.perf_counter()
    await asyncio.gather(*(submitter() for _ in range(SUBMITTERS)))
    submit_s = time.perf_counter() - began
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if all(("dispatched", oid) in obs.seen for oid in ids):
            break
        await asyncio.sleep(0.05)
    cpu = meter.stop()
    others_used = {name: proc_cpu_s(pid) - others_before[name] for name, pid in (others or {}).items()}
    done = [oid for oid in ids if ("dispatched", oid) in obs.seen]
    adm = [obs.seen[("admitted", oid)] for oid in ids if ("admitted", oid) in obs.seen]
    last_dispatch = max((obs.seen[("dispatched", oid)] for oid in done), default=began)
    lat = [obs.seen[("dispatched", oid)] - submitted[oid] for oid in done]
    running = [obs.seen[("running", oid)] - submitted[oid] for oid in ids if ("running", oid) in obs.seen]
    out = {
        "ops": float(n), "completed": float(len(done)),
        "ops_per_s": len(done) / (last_dispatch - began) if done else 0.0,
        "admitted_per_s": len(adm) / (max(adm) - began) if adm else 0.0,
        "submits_per_s": n / submit_s,
        **latency_summary(lat, "burst_dispatch"),
        "python_cpu_ms_per_op": 1e3 * cpu["python_cpu_s"] / max(1, len(done)),
        "server_cpu_ms_per_op": 1e3 * cpu["server_cpu_s"] / max(1, len(done)),
    }
    if running:
        out.update(latency_summary(running, "burst_running"))
    for name, used in others_used.items():
        out[f"{name}_cpu_ms_per_op"] = 1e3 * used / max(1, len(done))
    return out


async def run_pipeline(root: Path, *, n_unloaded: int, n_burst: int, log_level: str,
                       kubeconfig: Path | None = None, namespace: str = "opsched",
                       timeout: float = 180.0, workload: Workload | None = None,
                       workload_file: Path | None = None, others: dict[str, int] | None = None) -> dict[str, float]:
    from opsched.client import Client
    from opsched.services.runtime.settings import Settings

    mode = "kubernetes" if kubeconfig else "null"
    workload = workload or pipeline_workload(WARMUP + n_unloaded + n_burst, workload_file)
    specs = [spec_of(sub, routed=True) for sub in workload.submissions]
    if len(specs) < WARMUP + n_unloaded + n_burst:
        raise ValueError(f"the workload has {len(specs)} ops, {WARMUP + n_unloaded + n_burst} needed")
    queues = write_queues(root / f"queues-pipeline-{mode}.yaml", workload.queues_config())
    with fresh_nats(root, f"nats-pipeline-{mode}") as server:
        settings = Settings(nats_url=server.url, dispatcher_mode=mode, queues_file=queues, log_format="json",
                            log_level=log_level, kubeconfig=kubeconfig, namespace=namespace,
                            submit_rate_per_min=0,  # one client submits the burst: no per-requester rate here
                            command_rate_per_min=0)
        obs = await Observer().start(server.url)
        stack = await Stack(settings).start()
        client = await Client.connect(server.url, "bench-client")
        try:
            for i in range(WARMUP):  # warm-up: the first op pays for imports, consumers, connections
                await client.submit(specs[i], op_id=f"w{i:07d}")
                await obs.wait("dispatched", f"w{i:07d}", 30.0)
            out = await _unloaded(client, obs, specs[WARMUP:WARMUP + n_unloaded], 30.0)
            out.update(await _burst(client, obs, specs[WARMUP + n_unloaded:WARMUP + n_unloaded + n_burst],
                                    timeout, server.proc.pid, others))
        finally:
            await client.close()
            await stack.close()
            await obs.close()
    return out


# ---- (a): the local control plane with simulated GPU nodes ----------------------------------

def gpu_nodes(prefix: str, gpus: int, gpus_per_node: int = 64, product: str = "A100") -> list[str]:
    """Simulated nodes (``NAME:GPUS:PRODUCT``) with room for ``gpus`` GPUs of 1-GPU ops, 64 GPUs each."""
    count = max(1, -(-gpus // gpus_per_node))  # an op asking more than a node has stays pending
    return [f"{prefix}-gpu-{j}:{gpus_per_node}:{product}" for j in range(count)]


async def run_kubernetes(root: Path, kubeconfig: Path, round_no: int, *, n_unloaded: int, n_burst: int,
                         log_level: str, workload_file: Path | None = None,
                         control_plane: dict[str, int] | None = None) -> dict[str, float]:
    """``control_plane``: its processes (name -> pid), whose CPU per op is reported beside ours."""
    from opsched.localcluster.simkubelet import spawn, terminate

    namespace = f"bench-r{round_no}"
    workload = pipeline_workload(WARMUP + n_unloaded + n_burst, workload_file)
    nodes = gpu_nodes(f"bench-r{round_no}", sum(sub.gpus for sub in workload.submissions),
                      product=workload.config.nodes.product)
    await asyncio.to_thread(_create_namespace, kubeconfig, namespace)  # the dispatcher creates none (issue 15)
    kubelet = await asyncio.to_thread(spawn, kubeconfig, nodes, delete_nodes_on_exit=True,
                                      log_file=root / f"simkubelet-r{round_no}.log")
    try:
        others = {**(control_plane or {}), "simkubelet": kubelet.pid}
        out = await run_pipeline(root, n_unloaded=n_unloaded, n_burst=n_burst, log_level=log_level,
                                 kubeconfig=kubeconfig, namespace=namespace, workload=workload, others=others)
    finally:
        await asyncio.to_thread(_delete_pods, kubeconfig, namespace)
        await asyncio.to_thread(terminate, kubelet)
    out["nodes"] = float(len(nodes))
    return out


def _create_namespace(kubeconfig: Path, namespace: str) -> None:
    from kubernetes import client, config

    with config.new_client_from_config(config_file=str(kubeconfig)) as api:
        try:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}}, _preload_content=False)
        except client.ApiException as exc:
            if exc.status != 409:
                raise


def _delete_pods(kubeconfig: Path, namespace: str) -> None:
    from kubernetes import client, config

    with config.new_client_from_config(config_file=str(kubeconfig)) as api:
        try:
            client.CoreV1Api(api).delete_collection_namespaced_pod(namespace, grace_period_seconds=0,
                                                                   _preload_content=False).data
        except client.ApiException:
            pass
