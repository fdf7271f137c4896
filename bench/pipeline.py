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
An op takes 5 durable publishes (submit, submitted, cost_estimated, admitted, dispatched: its caching is off,
so the cache answers nothing, issue 36), all of them one after the other on its critical path.

(a) runs its pods to Succeeded (the simulated kubelet runs each for the op's run time, 0.5 s in
pipeline.yaml) in two regimes (``bench.anchor``): capacity for every op at once (*fit*: the unloaded
phase, then the burst), and a burst three times the cluster's GPUs (*over*: the burst only). Before each,
on the same nodes, (a0) creates the same pods directly; the burst's ``succeeded_per_s`` (first submit to
the last ``succeeded``) against (a0)'s is the ratio of bench/report.py. Over each burst, nats-server's
counters give the messages per op (``bench.msgcount``), to the last ``dispatched`` in (b), to the last
``succeeded`` in (a).
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench import anchor
from bench.common import CpuMeter, Stack, fresh_nats, latency_summary, proc_cpu_s
from bench.generator import PIPELINE, Workload, build_file
from bench.msgcount import Monitor, Snapshot, by_connection, by_consumer, counts, per_op
from bench.workload import spec_of, write_queues

if TYPE_CHECKING:
    from nats.aio.client import Client

PUBLISHES_PER_OP = 6
CRITICAL_HOPS = 5
SUBMITTERS = 64
WARMUP = 5


# the kinds the figures use: watching others would only add load (and what it receives is not counted as the ops')
OBSERVED = ("admitted", "dispatched", "running", "succeeded")
OBSERVER = "bench-observer"  # its connection's name


class Observer:
    """First arrival time of each (event type, op id) of the ``OBSERVED`` kinds on the op subjects."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.count: dict[str, int] = {}
        self.waiters: dict[tuple[str, str], asyncio.Event] = {}
        self.nc: Client | None = None

    async def start(self, url: str) -> "Observer":
        import nats

        self.nc = nc = await nats.connect(url, name=OBSERVER)
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

    def received(self) -> int:
        """Messages nats-server delivered to the observer so far (taken off the messages per op)."""
        return int(self.nc.stats["in_msgs"]) if self.nc else 0

    async def wait_all(self, kind: str, ids: list[str], timeout: float) -> bool:
        """Until every op of ``ids`` has had its ``kind`` event, or ``timeout``: whether all had."""
        deadline = time.perf_counter() + timeout
        for oid in ids:
            left = deadline - time.perf_counter()
            if left <= 0 or await self.wait(kind, oid, left) is None:
                return False
        return True

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
                 others: dict[str, int] | None = None, monitor_url: str | None = None,
                 final: str = "dispatched") -> dict[str, float]:
    """``others``: more processes (name -> pid) whose CPU per op is reported (the control plane in (a));
    ``monitor_url``: nats-server's monitoring endpoint, to count the messages per op until every op had its
    ``final`` event (``succeeded`` in (a): the op's whole life; then also ``succeeded_per_s`` and the CPU per op
    of that whole stretch, ``life_*``)."""
    n = len(specs)
    ids = [f"b{i:07d}" for i in range(n)]
    submitted: dict[str, float] = {}
    pending = iter(zip(ids, specs))

    async def submitter() -> None:
        for oid, spec in pending:
            submitted[oid] = time.perf_counter()
            await client.submit(spec, op_id=oid)

    monitor = Monitor(monitor_url) if monitor_url else None
    msgs_before = await asyncio.to_thread(monitor.take) if monitor else None
    watched_before = obs.received()
    meter = CpuMeter(server_pid).start()
    life_meter = CpuMeter(server_pid).start()
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
    if final != "dispatched":
        await obs.wait_all(final, ids, max(1.0, deadline - time.perf_counter()))
        life = life_meter.stop()
        ended = [obs.seen[(final, oid)] for oid in ids if (final, oid) in obs.seen]
        out.update({final: float(len(ended)),
                    f"{final}_per_s": anchor.rate(len(ended), began, max(ended, default=None)),
                    "life_python_cpu_ms_per_op": 1e3 * life["python_cpu_s"] / max(1, len(ended)),
                    "life_server_cpu_ms_per_op": 1e3 * life["server_cpu_s"] / max(1, len(ended))})
    if monitor and msgs_before:
        out.update(_messages(msgs_before, await asyncio.to_thread(monitor.take), obs.received() - watched_before, n))
    return out


def _messages(before: Snapshot, after: Snapshot, watched: int, n: int) -> dict[str, float]:
    """The messages per op between two snapshots (``bench.msgcount``), the observer's ``watched`` taken off: by
    kind, by connection (``conn_<name>_msgs_per_op``), by consumer and stream (``js <what> per op``)."""
    out = per_op(counts(before, after, exclude_out=watched), n)
    for name, msgs in by_connection(before, after, skip=(OBSERVER,)).items():
        out[f"conn_{name}_msgs_per_op"] = msgs / max(1, n)
    for name, msgs in by_consumer(before, after).items():
        out[f"js {name} per op"] = msgs / max(1, n)
    return out


async def run_pipeline(root: Path, *, n_unloaded: int, n_burst: int, log_level: str,
                       kubeconfig: Path | None = None, namespace: str = "opsched",
                       timeout: float = 180.0, workload: Workload | None = None,
                       workload_file: Path | None = None, others: dict[str, int] | None = None,
                       tag: str = "") -> dict[str, float]:
    """The warm-up, the unloaded phase (none when ``n_unloaded`` is 0) and the burst on a fresh nats-server
    and stack; with a ``kubeconfig`` (a), the burst runs to every op's ``succeeded``. ``tag``: names the store."""
    from opsched.client import Client
    from opsched.services.runtime.settings import Settings

    mode = "kubernetes" if kubeconfig else "null"
    final = "succeeded" if kubeconfig else "dispatched"
    workload = workload or pipeline_workload(WARMUP + n_unloaded + n_burst, workload_file)
    specs = [spec_of(sub, routed=True) for sub in workload.submissions]
    if len(specs) < WARMUP + n_unloaded + n_burst:
        raise ValueError(f"the workload has {len(specs)} ops, {WARMUP + n_unloaded + n_burst} needed")
    queues = write_queues(root / f"queues-pipeline-{mode}{tag}.yaml", workload.queues_config())
    with fresh_nats(root, f"nats-pipeline-{mode}{tag}") as server:
        settings = Settings(nats_url=server.url, dispatcher_mode=mode, queues_file=queues, log_format="json",
                            log_level=log_level, kubeconfig=kubeconfig, namespace=namespace,
                            submit_rate_per_min=0,  # one client submits the burst: no per-requester rate here
                            command_rate_per_min=0,
                            # ... nor a cap on its commands waiting: a burst may run ahead of admission by more
                            cmd_backlog_per_subject=max(1000, len(specs)))
        obs = await Observer().start(server.url)
        stack = await Stack(settings).start()
        client = await Client.connect(server.url, "bench-client")
        try:
            for i in range(WARMUP):  # warm-up: the first op pays for imports, consumers, connections
                await client.submit(specs[i], op_id=f"w{i:07d}")
                await obs.wait("dispatched", f"w{i:07d}", 30.0)
            out = await _unloaded(client, obs, specs[WARMUP:WARMUP + n_unloaded], 30.0) if n_unloaded else {}
            # the ops so far end before the burst (in (a) they hold GPUs while their pods run)
            await obs.wait_all(final, [f"w{i:07d}" for i in range(WARMUP)] + [f"s{i:07d}" for i in range(n_unloaded)],
                               30.0)
            out.update(await _burst(client, obs, specs[WARMUP + n_unloaded:WARMUP + n_unloaded + n_burst],
                                    timeout, server.proc.pid, others, server.monitor_url, final))
        finally:
            await client.close()
            await stack.close()
            await obs.close()
    return out


# ---- (a): the local control plane with simulated GPU nodes, against (a0) on the same nodes --------------------

async def run_kubernetes(root: Path, kubeconfig: Path, round_no: int, *, n_unloaded: int, n_burst: int,
                         log_level: str, workload_file: Path | None = None,
                         control_plane: dict[str, int] | None = None) -> dict:
    """Each regime of ``bench.anchor`` on simulated nodes of its own: (a0), the burst's pods created directly,
    then (a), the same ops through opsched. The *fit* regime's figures are (a)'s own (its unloaded phase too),
    the *over* regime's under ``over``; (a0)'s under ``a0`` (``bench.__main__`` files them as ``a0_bare``).
    ``control_plane``: its processes (name -> pid), whose CPU per op is reported beside ours."""
    from opsched.localcluster.simkubelet import spawn, terminate

    workload = pipeline_workload(WARMUP + n_unloaded + n_burst, workload_file)
    burst = workload.submissions[WARMUP + n_unloaded:WARMUP + n_unloaded + n_burst]
    out: dict = {}
    a0: dict[str, dict[str, float]] = {}
    for regime in anchor.regimes(len(burst), sum(sub.gpus for sub in burst)):
        namespace, bare_namespace = f"bench-r{round_no}-{regime.name}", f"bench-r{round_no}-{regime.name}-a0"
        nodes = regime.nodes(f"bench-r{round_no}", workload.config.nodes.product)
        await asyncio.to_thread(_create_namespace, kubeconfig, namespace)  # the dispatcher creates none (issue 15)
        kubelet = await asyncio.to_thread(spawn, kubeconfig, nodes, delete_nodes_on_exit=True,
                                          log_file=root / f"simkubelet-r{round_no}-{regime.name}.log")
        try:
            bodies = [anchor.bare_pod(i, bare_namespace, spec_of(sub, routed=True)) for i, sub in enumerate(burst)]
            a0[regime.name] = {**await asyncio.to_thread(anchor.run_bare, kubeconfig, bare_namespace, bodies),
                               "gpus": float(regime.gpus), "nodes": float(len(nodes))}
            others = {**(control_plane or {}), "simkubelet": kubelet.pid}
            res = await run_pipeline(root, n_unloaded=n_unloaded if regime.name == "fit" else 0, n_burst=n_burst,
                                     log_level=log_level, kubeconfig=kubeconfig, namespace=namespace,
                                     workload=workload, others=others, tag=f"-{regime.name}")
        finally:
            await asyncio.to_thread(_delete_pods, kubeconfig, namespace)
            await asyncio.to_thread(terminate, kubelet)
        res.update(nodes=float(len(nodes)), gpus=float(regime.gpus))
        if regime.name == "fit":
            out.update(res)
        else:
            out[regime.name] = res
    out["a0"] = a0
    return out


def _create_namespace(kubeconfig: Path, namespace: str) -> None:
    from kubernetes import client, config

    from bench.calibrate import ensure_namespace

    with config.new_client_from_config(config_file=str(kubeconfig)) as api:
        ensure_namespace(client.CoreV1Api(api), namespace)


def _delete_pods(kubeconfig: Path, namespace: str) -> None:
    from kubernetes import client, config

    with config.new_client_from_config(config_file=str(kubeconfig)) as api:
        try:
            client.CoreV1Api(api).delete_collection_namespaced_pod(namespace, grace_period_seconds=0,
                                                                   _preload_content=False).data
        except client.ApiException:
            pass
