"""The simulated autoscaler: a thread of the simulated kubelet that grows and shrinks the queue configuration's node
pools as cluster-autoscaler would (the decisions are ``autoscaling.Autoscaling``'s; this acts on them).

Every ``scan_interval`` it lists the pods and nodes, plans, and acts through the kubelet: a node due now is
registered (``SimKubelet.add_node``, with the pool's labels, taints and allocatable, plus
``opsched.io/node-pool: <pool>``), a node to remove is tainted ``ToBeDeletedByClusterAutoscaler`` first, then deleted
(``SimKubelet.remove_node``). The wall clock is read here: this is the simulated cloud, not an opsched decision.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from kubernetes import client

from opsched.localcluster.autoscaling import (
    POOL_LABEL,
    TO_BE_DELETED_TAINT,
    Autoscaling,
    NodeToAdd,
    NodeView,
    PodView,
    Pool,
    taint_for_deletion,
)
from opsched.localcluster.nodes import DEFAULT_PRODUCT, GPU_PRODUCT_LABEL, NodeSpec
from opsched.localcluster.rawcalls import raw

if TYPE_CHECKING:
    from opsched.localcluster.simkubelet import SimKubelet

SCAN_INTERVAL_S = 0.5
log = logging.getLogger("opsched.simkubelet")


def node_spec(pool: Pool, name: str, gpu_resource: str) -> NodeSpec:
    """A new node of the pool, as the simulated kubelet registers it."""
    gpus = int(pool.allocatable.get(gpu_resource, 0))
    return NodeSpec(name, gpus, pool.labels.get(GPU_PRODUCT_LABEL, DEFAULT_PRODUCT),
                    labels={**pool.labels, POOL_LABEL: pool.name}, taints=pool.taints,
                    resources={r: q for r, q in pool.quantities.items() if r != gpu_resource})


class SimAutoscaler:
    """Runs ``Autoscaling`` against the API server for ``kubelet``'s cluster, in a daemon thread."""

    def __init__(self, kubelet: SimKubelet, pools: list[Pool], stock: dict[str, int] | None = None, *,
                 scan_interval: float = SCAN_INTERVAL_S) -> None:
        self.kubelet = kubelet
        self.pools = {p.name: p for p in pools}
        self.scaling = Autoscaling(pools, stock)
        self.scan_interval = scan_interval
        self.pending: list[NodeToAdd] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SimAutoscaler:
        self._thread = threading.Thread(target=self._loop, name="simkubelet-autoscaler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.step()
            except Exception as e:  # noqa: BLE001 - the API server restarting: the next pass tries again
                log.warning("autoscaler pass failed: %s", e)
            self._stopping.wait(self.scan_interval)

    def step(self) -> None:
        """One pass: list, plan, act."""
        core = self.kubelet.core
        pods = [PodView.of(p) for p in raw(core.list_pod_for_all_namespaces)["items"]]
        nodes = [NodeView.of(n) for n in raw(core.list_node)["items"]]
        now = time.monotonic()
        actions = self.scaling.plan(now, pods, nodes, self.pending)
        for add in actions.add:
            log.info("autoscaler: node %s of pool %s coming in %.1fs", add.name, add.pool, max(0.0, add.at - now))
        self.pending += actions.add
        for name in actions.taint:
            self._set_taint(name, True)
        for name in actions.untaint:
            self._set_taint(name, False)
        for name in actions.delete:
            self.kubelet.remove_node(name)
        due = [a for a in self.pending if a.at <= now]
        for add in due:
            self.kubelet.add_node(node_spec(self.pools[add.pool], add.name, self.kubelet.resources.gpu_resource))
            self.pending.remove(add)

    def _set_taint(self, name: str, on: bool) -> None:
        core = self.kubelet.core
        for _ in range(10):
            node: dict[str, Any] = raw(core.read_node, name)
            taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != TO_BE_DELETED_TAINT]
            if on:
                taints.append(taint_for_deletion(int(time.time())))
            node.setdefault("spec", {})["taints"] = taints or None
            try:
                raw(core.replace_node, name, node)  # carries resourceVersion: 409 if someone else wrote
            except client.ApiException as e:
                if e.status == 409:
                    continue
                if e.status == 404:
                    return
                raise
            log.info("autoscaler: node %s %s", name, f"tainted {TO_BE_DELETED_TAINT}" if on else "untainted")
            return
