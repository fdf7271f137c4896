"""Scenario (a0), the fair anchor of (a): the same pods as (a)'s ops, created directly with the official
Kubernetes client, 8 in flight, bound by kube-scheduler and run by the simulated kubelet to Succeeded, on the
same cluster in the same round. Timed from the first create to the last pod seen Succeeded (a pod watch), as
(a) is timed from the first submit to the last ``succeeded`` event: (a) ÷ (a0) is what opsched costs or saves
against Kubernetes alone for the same work.

Two regimes (``Regime``), each on nodes of its own: *fit*, capacity for every pod at once (every pod starts
as soon as it is bound), and *over*, a burst three times the cluster's capacity (kube-scheduler backs off the
pods it cannot place; opsched's admission releases only what fits).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

THREADS = 8  # creates in flight, as the calibration's concurrent rate
OVER = 3  # the over-capacity burst: this many times the cluster's GPUs
GPUS_PER_NODE = 64


@dataclass(frozen=True)
class Regime:
    name: str  # "fit" or "over"
    pods: int
    gpus: int  # the cluster's GPUs (1-GPU pods)

    def nodes(self, prefix: str, product: str, per_node: int = GPUS_PER_NODE) -> list[str]:
        """Simulated nodes (``NAME:GPUS:PRODUCT``) with ``gpus`` GPUs in all: at most ``per_node`` each,
        spread evenly (the capacity is exactly ``gpus``, not rounded up to whole nodes)."""
        return [f"{prefix}-{self.name}-{j}:{g}:{product}" for j, g in enumerate(split(self.gpus, per_node))]


def split(gpus: int, per_node: int = GPUS_PER_NODE) -> list[int]:
    """``gpus`` over as few nodes of at most ``per_node`` as hold them, as evenly as can be."""
    if gpus < 1 or per_node < 1:
        raise ValueError(f"gpus and per_node must be at least 1, got {gpus} and {per_node}")
    count = -(-gpus // per_node)
    base, extra = divmod(gpus, count)
    return [base + (1 if j < extra else 0) for j in range(count)]


def regimes(pods: int, gpus: int | None = None) -> tuple[Regime, Regime]:
    """For ``pods`` asking ``gpus`` GPUs in all (default one each): capacity for all of them at once, and a
    third of that (at least 1 GPU), so that the burst is three times the capacity."""
    gpus = pods if gpus is None else gpus
    if pods < 1 or gpus < 1:
        raise ValueError(f"pods and gpus must be at least 1, got {pods} and {gpus}")
    return Regime("fit", pods, gpus), Regime("over", pods, max(1, gpus // OVER))


def rate(done: int, began: float, last: float | None) -> float:
    """``done`` per second from ``began`` to ``last`` (the last one done); 0 when none or no time passed."""
    if not done or last is None or last <= began:
        return 0.0
    return done / (last - began)


def ratio(a_per_s: float, a0_per_s: float) -> float:
    """(a) ÷ (a0): above 1, opsched finished the same pods sooner than Kubernetes alone; NaN without (a0)."""
    if not a0_per_s or a0_per_s != a0_per_s or a_per_s != a_per_s:
        return float("nan")
    return a_per_s / a0_per_s


def bare_pod(i: int, namespace: str, spec: Any) -> dict[str, Any]:
    """The pod body the dispatcher would create for op ``i`` of ``spec`` (``rules.podspec``), left to
    kube-scheduler (no ``nodeName``), labelled as the bench's."""
    from opsched.proto.events import OperationAdmitted
    from opsched.rules.podspec import build_pods

    admitted = OperationAdmitted(op_id=f"a0{i:07d}", at=datetime.now(timezone.utc), spec=spec, queue="default",
                                 namespace=namespace, pod_name=f"op-a0{i:07d}-0")
    pod = build_pods(admitted)[0]
    pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "opsched-bench"
    return pod


class PhaseWatch:
    """First time each pod of a namespace is seen in a terminal phase, from a pod watch in a thread
    (re-watching from the last resource version when the API server ends a watch)."""

    def __init__(self, core: Any, namespace: str, expected: int, clock: Callable[[], float] = time.perf_counter):
        self.core, self.namespace, self.expected, self.clock = core, namespace, expected, clock
        self.ended: dict[str, tuple[str, float]] = {}  # pod name -> (phase, first seen)
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "PhaseWatch":
        listed = self.core.list_namespaced_pod(self.namespace)
        self._seen(listed.items)
        self._thread = threading.Thread(target=self._run, args=(listed.metadata.resource_version,), daemon=True,
                                        name=f"a0-watch-{self.namespace}")
        self._thread.start()
        return self

    def _seen(self, pods: list[Any]) -> None:
        now = self.clock()
        for pod in pods:
            phase = pod.status.phase if pod.status else None
            if phase in ("Succeeded", "Failed") and pod.metadata.name not in self.ended:
                self.ended[pod.metadata.name] = (phase, now)
        if len(self.ended) >= self.expected:
            self.done.set()

    def _run(self, version: str) -> None:
        from kubernetes import watch

        while not self._stop.is_set() and not self.done.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(self.core.list_namespaced_pod, self.namespace, resource_version=version,
                                      timeout_seconds=5, allow_watch_bookmarks=False):
                    obj = event["object"]
                    version = obj.metadata.resource_version or version
                    self._seen([obj])
                    if self._stop.is_set() or self.done.is_set():
                        break
            except Exception:  # noqa: BLE001 - 410 Gone or a dropped watch: list again
                listed = self.core.list_namespaced_pod(self.namespace)
                self._seen(listed.items)
                version = listed.metadata.resource_version
            finally:
                w.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def run_bare(kubeconfig: Path, namespace: str, bodies: list[dict[str, Any]], timeout: float = 300.0,
             threads: int = THREADS) -> dict[str, float]:
    """Create ``bodies`` in ``namespace`` (made here), ``threads`` in flight, and wait for each to end;
    then delete them. Times from the first create to the last pod Succeeded."""
    from kubernetes import client, config

    from bench.calibrate import _create, ensure_namespace

    api, watch_api = (config.new_client_from_config(config_file=str(kubeconfig)) for _ in range(2))
    core = client.CoreV1Api(api)
    try:
        ensure_namespace(core, namespace)
        watcher = PhaseWatch(client.CoreV1Api(watch_api), namespace, len(bodies)).start()
        try:
            began = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda b: _create(core, namespace, b), bodies))
            created = time.perf_counter()
            watcher.done.wait(timeout)
        finally:
            watcher.stop()
        succeeded = [t for phase, t in watcher.ended.values() if phase == "Succeeded"]
        last = max(succeeded, default=None)
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0, _preload_content=False).data
    finally:
        api.close()
        watch_api.close()
    return {"pods": float(len(bodies)), "succeeded": float(len(succeeded)),
            "failed": float(sum(phase == "Failed" for phase, _ in watcher.ended.values())),
            "creates_per_s": len(bodies) / (created - began) if created > began else 0.0,
            "succeeded_per_s": rate(len(succeeded), began, last),
            "duration_s": (last - began) if last is not None else float("nan")}
