"""A simulated kubelet: registers GPU nodes and runs the pods bound to them, via the API only.

Pods go Pending -> Running (after ``start_delay``) -> Succeeded/Failed. The run time and exit
code come from the annotations ``opsched.io/sim-runtime-seconds`` and
``opsched.io/sim-exit-code``, else from ``sleep N`` / ``exit N`` in the container's command and
args (``["sh", "-c", "sleep 2; exit 1"]``), else 1 s and 0. ``opsched.io/sim-exit-codes``
(``"1,1,0"``) gives one exit code per attempt, indexed by the pod's ``opsched.io/attempt`` label
(the last value repeats), and wins over ``sim-exit-code``: an op that fails twice, then succeeds
(details in ``nodes.pod_behaviour``). ``activeDeadlineSeconds`` is honoured
(reason DeadlineExceeded), and deletions are confirmed with grace period 0, as a kubelet would.
A pod with ``restartPolicy: Always`` (a service's) never ends on its own (its containers would be restarted): it
runs until it is deleted or its ``activeDeadlineSeconds`` pass; any other restartPolicy is ignored (containers are
never restarted). Readiness: a pod whose containers have readiness probes starts Running but not Ready, and becomes
Ready (condition Ready, containerStatuses ready) once the longest ``initialDelaySeconds`` of them has passed (the
first probe passes); a pod without any is Ready as it starts. A pod's init containers are reported completed, in
order, when it starts (``status.initContainerStatuses``); nothing runs, so a Secret it names need not exist. Like a kubelet it rides out an API-server
restart: its watch re-lists after 410 Gone, a dropped connection or a silent one (client read timeout),
and a timed transition that fails because the API is unreachable is tried again, never dropped.
It serves the kubelet's container-log endpoint (``kubeletlogs``: what a simulated container prints is
``nodes.container_log``'s) over HTTPS on 127.0.0.1, one port for all its nodes, and reports it as each node's
``daemonEndpoints.kubeletEndpoint.Port`` with the InternalIP 127.0.0.1, so the API server proxies ``pods/log``
(``kubectl logs``) to it.

With ``--autoscale QUEUES_FILE`` it also runs the simulated autoscaler (``autoscaler.SimAutoscaler``) for the node
pools of that queue configuration: nodes come for unschedulable pods and go when idle (``autoscaling`` has the rules);
``--stock POOL=N`` (repeatable) simulates a cloud that has only N nodes of a pool to give.

CLI: ``python -m opsched.localcluster.simkubelet --kubeconfig K --node gpu-a:2:A100 --node gpu-b:1:T4``
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config, watch

from opsched.localcluster.kubeletlogs import LogServer
from opsched.localcluster.nodes import (
    EXIT_CODE_ANNOTATION,
    EXIT_CODES_ANNOTATION,
    RUNTIME_ANNOTATION,
    NodeResources,
    NodeSpec,
    as_node_spec,
    clear_not_ready_taints,
    delete_nodes,
    now_rfc3339,
    parse_node_spec,
    pod_behaviour,
    pod_key,
    post_status,
    readiness_delay,
    ready_status,
    register_node,
    running_status,
    terminal_status,
)
from opsched.localcluster.rawcalls import raw
from opsched.proto.reasons import Failure

DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
KILLED_EXIT_CODE = 143
RETRY_S = 1.0  # a timed transition that failed (API server down) is tried again this much later
WATCH_TIMEOUT_S = 60  # the API server ends each watch after this long ...
REQUEST_TIMEOUT = (10.0, WATCH_TIMEOUT_S + 15.0)  # ... so a connection silent for longer is dead: re-list
_TERMINAL = ("Succeeded", "Failed")
LOOPBACK = "127.0.0.1"
from opsched.localcluster.launcher import spawn, terminate  # noqa: E402 - re-exported

__all__ = ["EXIT_CODE_ANNOTATION", "EXIT_CODES_ANNOTATION", "RUNTIME_ANNOTATION", "DEADLINE_MESSAGE", "SimKubelet",
           "NodeSpec", "NodeResources", "spawn", "terminate", "main"]
log = logging.getLogger("opsched.simkubelet")


def _is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _parse_time(text: str) -> float:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()


# -- the kubelet -------------------------------------------------------------------------------
@dataclass(order=True)
class _Due:
    when: float
    seq: int
    action: str = field(compare=False)
    namespace: str = field(compare=False)
    name: str = field(compare=False)
    uid: str = field(compare=False)


class SimKubelet:
    """Simulated kubelet for ``nodes``; ``start()`` runs it in background threads."""

    def __init__(self, kubeconfig: str | os.PathLike[str] | client.ApiClient,
                 nodes: Sequence[NodeSpec | str | tuple[Any, ...]], *,
                 resources: NodeResources = NodeResources(), start_delay: float = 0.2,
                 taint_check_interval: float = 1.0, heartbeat_interval: float = 10.0) -> None:
        self.api = (kubeconfig if isinstance(kubeconfig, client.ApiClient)
                    else config.new_client_from_config(config_file=os.fspath(kubeconfig)))
        self.core = client.CoreV1Api(self.api)
        self.nodes = {s.name: s for s in map(as_node_spec, nodes)}  # changed only under _nodes_lock (add/remove_node)
        self._nodes_lock = threading.Lock()
        self._node_index = {name: i for i, name in enumerate(self.nodes)}  # a node's pod IPs: 10.244.<index>.x
        self.resources = resources
        self.start_delay = start_delay
        self.taint_check_interval = taint_check_interval
        self.heartbeat_interval = heartbeat_interval
        self._addresses = {name: LOOPBACK for name in self.nodes}  # where the API server reaches its kubelet
        self._ip_counter = itertools.count()
        self._seq = itertools.count()
        self._heap: list[_Due] = []
        self._cv = threading.Condition()
        self._stopping = threading.Event()
        self._stages: dict[str, str] = {}  # pod uid -> starting | running | done | deleting
        self._watch: watch.Watch | None = None
        self._threads: list[threading.Thread] = []
        self.logs = LogServer(self._read_own_pod, LOOPBACK, self._stopping)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> SimKubelet:
        """Serve the log endpoint, register the nodes (Ready, untainted), then watch and run pods in the background."""
        self.logs.start()
        for spec in self.nodes.values():
            register_node(self.core, spec, self.resources, self._addresses[spec.name], self.logs.port)
            log.info("node %s registered (%d x %s %s)", spec.name, spec.gpus, self.resources.gpu_resource,
                     spec.product)
        for target in (self._watch_loop, self._timer_loop, self._node_loop):
            thread = threading.Thread(target=target, name=f"simkubelet-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, delete_nodes_too: bool = False) -> None:
        """Stop the threads; optionally delete the nodes. Idempotent."""
        self._stopping.set()
        if self._watch is not None:
            self._watch.stop()
        with self._cv:
            self._cv.notify_all()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        self.logs.stop()
        if delete_nodes_too:
            delete_nodes(self.core, self.nodes)
            log.info("nodes deleted: %s", ", ".join(self.nodes))

    # -- watching pods --------------------------------------------------------------------
    def _watch_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self._stream(self._relist())
            except client.ApiException as e:
                if e.status != 410:
                    log.warning("pod watch failed (%s %s); re-listing", e.status, e.reason)
                    self._stopping.wait(1.0)
            except Exception as e:  # noqa: BLE001 - connection errors of any kind; also how Watch.stop() ends a stream
                if not self._stopping.is_set():
                    log.warning("pod watch interrupted (%s); re-listing", e)
                    self._stopping.wait(1.0)

    def _relist(self) -> str:
        pods = raw(self.core.list_pod_for_all_namespaces, _request_timeout=REQUEST_TIMEOUT)
        current = pods["items"]
        known = {p["metadata"]["uid"] for p in current}
        for uid in list(self._stages):
            if uid not in known:
                self._stages.pop(uid, None)
        for pod in current:
            self._on_pod("ADDED", pod)
        return pods["metadata"]["resourceVersion"]

    def _stream(self, resource_version: str) -> None:
        while not self._stopping.is_set():
            self._watch = watch.Watch()
            # events as JSON dicts (``deserialize=False``: no model objects); the client then leaves the resource
            # version to its caller, and reports an ERROR event (410 Gone) by failing: the loop re-lists
            for event in self._watch.stream(self.core.list_pod_for_all_namespaces, timeout_seconds=WATCH_TIMEOUT_S,
                                            resource_version=resource_version, allow_watch_bookmarks=True,
                                            _request_timeout=REQUEST_TIMEOUT, deserialize=False):
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    self._on_pod(event["type"], event["object"])
                resource_version = event["object"]["metadata"].get("resourceVersion") or resource_version

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid, phase = meta["uid"], (pod.get("status") or {}).get("phase")
        if kind == "DELETED":
            self._stages.pop(uid, None)
            return
        if spec.get("nodeName") not in self.nodes:
            return
        stage = self._stages.get(uid)
        if meta.get("deletionTimestamp"):
            if stage != "deleting":
                self._stages[uid] = "deleting"
                self._schedule(time.time(), "delete", pod)
        elif phase in _TERMINAL:
            self._stages[uid] = "done"
        elif stage is None and phase == "Running":  # running before we (re)started
            self._stages[uid] = "running"
            started = _parse_time(pod["status"].get("startTime") or now_rfc3339())
            self._schedule_end(pod, started)
            self._schedule_ready(pod, started)
        elif stage is None:
            self._stages[uid] = "starting"
            self._schedule(time.time() + self.start_delay, "start", pod)

    def _schedule(self, when: float, action: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        with self._cv:
            heapq.heappush(self._heap, _Due(when, next(self._seq), action, meta["namespace"], meta["name"],
                                            meta["uid"]))
            self._cv.notify()

    def _schedule_end(self, pod: dict[str, Any], started: float) -> None:
        end = started + pod_behaviour(pod).runtime
        if pod["spec"].get("restartPolicy") == "Always":
            end = float("inf")  # restarted whenever it exits: it ends only when deleted (or at its deadline)
        deadline = pod["spec"].get("activeDeadlineSeconds")
        if deadline is not None and started + deadline < end:
            self._schedule(started + deadline, "deadline", pod)
        elif end != float("inf"):
            self._schedule(end, "finish", pod)

    def _schedule_ready(self, pod: dict[str, Any], started: float) -> None:
        delay = readiness_delay(pod)
        if delay is not None and not _is_ready(pod):
            self._schedule(started + delay, "ready", pod)

    # -- timed transitions ----------------------------------------------------------------
    def _timer_loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopping.is_set() and (not self._heap or self._heap[0].when > time.time()):
                    self._cv.wait(timeout=self._heap[0].when - time.time() if self._heap else None)
                if self._stopping.is_set():
                    return
                due = heapq.heappop(self._heap)
            try:
                self._run(due)
            except client.ApiException as e:
                if e.status != 404:  # 404: the pod is gone, nothing left to do
                    self._retry(due, f"{e.status} {e.reason}")
            except Exception as e:  # noqa: BLE001 - the API server unreachable (restarting): try again, never drop it
                self._retry(due, repr(e))

    def _retry(self, due: _Due, error: str) -> None:
        log.warning("pod %s/%s: %s failed (%s); retrying in %gs", due.namespace, due.name, due.action, error, RETRY_S)
        with self._cv:
            heapq.heappush(self._heap, _Due(time.time() + RETRY_S, next(self._seq), due.action, due.namespace,
                                            due.name, due.uid))

    def _run(self, due: _Due) -> None:
        pod = raw(self.core.read_namespaced_pod, due.name, due.namespace)
        if pod["metadata"]["uid"] != due.uid:
            return
        phase = pod.get("status", {}).get("phase")
        if due.action == "delete":
            self._confirm_deletion(pod, phase)
        elif pod["metadata"].get("deletionTimestamp"):
            return  # a "delete" is queued
        elif due.action == "start" and phase == "Pending":
            self._start_pod(pod)
        elif due.action == "start" and phase == "Running":  # an earlier try was stored, its answer lost
            self._stages[due.uid] = "running"
            started = _parse_time(pod["status"].get("startTime") or now_rfc3339())
            self._schedule_end(pod, started)
            self._schedule_ready(pod, started)
        elif due.action == "ready" and phase == "Running":
            self._patch_status(pod, ready_status(pod))
            log.info("pod %s node=%s Ready", pod_key(pod), pod["spec"]["nodeName"])
        elif due.action == "finish" and phase == "Running":
            behaviour = pod_behaviour(pod)
            self._finish(pod, terminal_status(pod, behaviour.exit_codes, messages=behaviour.messages))
        elif due.action == "deadline" and phase == "Running":
            codes = {c["name"]: KILLED_EXIT_CODE for c in pod["spec"]["containers"]}
            self._finish(pod, terminal_status(pod, codes, reason=Failure.DEADLINE_EXCEEDED, message=DEADLINE_MESSAGE))

    def _start_pod(self, pod: dict[str, Any]) -> None:
        node = pod["spec"]["nodeName"]
        started, n = time.time(), next(self._ip_counter)
        pod_ip = f"10.244.{self._node_index.get(node, 0) % 256}.{n % 250 + 2}"
        pod["status"] = self._patch_status(pod, running_status(pod, pod_ip, self._addresses[node]))
        self._stages[pod["metadata"]["uid"]] = "running"
        log.info("pod %s node=%s phase=Running ip=%s", pod_key(pod), node, pod_ip)
        self._schedule_end(pod, started)
        self._schedule_ready(pod, started)

    def _finish(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        self._patch_status(pod, status)
        if self._stages.get(pod["metadata"]["uid"]) != "deleting":
            self._stages[pod["metadata"]["uid"]] = "done"
        codes = ",".join(str(c["state"]["terminated"]["exitCode"]) for c in status["containerStatuses"])
        log.info("pod %s node=%s phase=%s exit=%s%s", pod_key(pod), pod["spec"]["nodeName"], status["phase"], codes,
                 f" reason={status['reason']}" if "reason" in status else "")

    def _confirm_deletion(self, pod: dict[str, Any], phase: str | None) -> None:
        if phase == "Running":
            codes = {c["name"]: KILLED_EXIT_CODE for c in pod["spec"]["containers"]}
            self._finish(pod, terminal_status(pod, codes))
        try:
            raw(self.core.delete_namespaced_pod, pod["metadata"]["name"], pod["metadata"]["namespace"],
                grace_period_seconds=0)
        except client.ApiException as e:
            if e.status != 404:
                raise
        log.info("pod %s node=%s phase=Deleted", pod_key(pod), pod["spec"]["nodeName"])

    def _patch_status(self, pod: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        raw(self.core.patch_namespaced_pod_status, meta["name"], meta["namespace"], {"status": status})
        return status

    # -- nodes ----------------------------------------------------------------------------
    def add_node(self, spec: NodeSpec) -> None:
        """Register one more node (Ready, its own taints kept) and run the pods bound to it (the autoscaler's)."""
        with self._nodes_lock:
            self._node_index.setdefault(spec.name, len(self._node_index))
            self._addresses[spec.name] = LOOPBACK
            self.nodes = {**self.nodes, spec.name: spec}
        register_node(self.core, spec, self.resources, LOOPBACK, self.logs.port)
        log.info("node %s added (%d x %s %s)", spec.name, spec.gpus, self.resources.gpu_resource, spec.product)

    def remove_node(self, name: str) -> None:
        """Stop its heartbeat and delete it (a node that is already gone is fine)."""
        with self._nodes_lock:
            self.nodes = {k: v for k, v in self.nodes.items() if k != name}
        delete_nodes(self.core, [name])
        log.info("node %s removed", name)

    def _node_loop(self) -> None:
        """Keep the nodes Ready and untainted; re-register a node that was deleted."""
        last_heartbeat = time.monotonic()
        while not self._stopping.wait(self.taint_check_interval):
            heartbeat = time.monotonic() - last_heartbeat >= self.heartbeat_interval
            last_heartbeat = time.monotonic() if heartbeat else last_heartbeat
            with self._nodes_lock:
                specs = list(self.nodes.values())
            for spec in specs:
                try:
                    self._check_node(spec, heartbeat)
                except Exception as e:  # noqa: BLE001 - one node's failed check must not end the others' heartbeats
                    log.warning("node %s: check failed: %s", spec.name, e)

    def _check_node(self, spec: NodeSpec, heartbeat: bool) -> None:
        address = self._addresses[spec.name]
        try:
            if clear_not_ready_taints(self.core, spec.name):
                log.info("node %s: removed a not-ready taint", spec.name)
            if heartbeat:
                post_status(self.core, spec, self.resources, address, self.logs.port)
        except client.ApiException as e:
            if e.status != 404 or self._stopping.is_set():
                raise
            with self._nodes_lock:
                if spec.name not in self.nodes:  # removed meanwhile (remove_node): not to come back
                    return
            register_node(self.core, spec, self.resources, address, self.logs.port)
            log.info("node %s re-registered", spec.name)

    def _read_own_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as the API server holds it, if it is bound to one of these nodes (the log endpoint's)."""
        try:
            pod = raw(self.core.read_namespaced_pod, name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise
        return pod if (pod.get("spec") or {}).get("nodeName") in self.nodes else None


# -- running it as a process -------------------------------------------------------------------
def _node_arg(text: str) -> NodeSpec:
    try:
        return parse_node_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _stock_arg(text: str) -> tuple[str, int]:
    pool, sep, count = text.partition("=")
    try:
        if not sep or not pool or int(count) < 0:
            raise ValueError
        return pool, int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stock: expected POOL=N (N >= 0), got {text!r}") from None


def _autoscaler(kubelet: SimKubelet, queues_file: str, stock: dict[str, int]) -> Any:
    from opsched.localcluster.autoscaler import SimAutoscaler
    from opsched.localcluster.autoscaling import pools_from
    from opsched.rules.queues_file import load_queues

    resources = kubelet.resources
    pools = pools_from(load_queues(Path(queues_file)),
                       defaults={"cpu": resources.cpu, "memory": resources.memory, "pods": str(resources.pods)})
    unknown = sorted(set(stock) - {p.name for p in pools})
    if unknown:
        raise SystemExit(f"--stock: no pool named {', '.join(unknown)} in {queues_file}")
    log.info("autoscaling pools %s", ", ".join(f"{p.name} ({p.min_nodes}..{p.max_nodes})" for p in pools) or "(none)")
    return SimAutoscaler(kubelet, pools, stock).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Simulated kubelet for GPU nodes (API server only).")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", dest="nodes", action="append", type=_node_arg, default=[],
                        metavar="NAME:GPUS[:PRODUCT]", help="repeatable, e.g. gpu-a:2:A100, or share:2x16Gi for shared GPU memory")
    parser.add_argument("--resource", default=NodeResources.gpu_resource, help="GPU extended resource name")
    parser.add_argument("--cpu", default=NodeResources.cpu)
    parser.add_argument("--memory", default=NodeResources.memory)
    parser.add_argument("--start-delay", type=float, default=0.2, help="seconds from bound to Running")
    parser.add_argument("--delete-nodes-on-exit", action="store_true")
    parser.add_argument("--autoscale", metavar="QUEUES_FILE",
                        help="run the simulated autoscaler for the node pools (flavors' pool:) of this queue file")
    parser.add_argument("--stock", action="append", type=_stock_arg, default=[], metavar="POOL=N",
                        help="repeatable: the simulated cloud has only N nodes of POOL (with --autoscale)")
    args = parser.parse_args(argv)
    if not args.nodes and not args.autoscale:
        parser.error("give at least one --node (or --autoscale)")
    if args.stock and not args.autoscale:
        parser.error("--stock needs --autoscale")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s simkubelet %(message)s")
    api = config.new_client_from_config(config_file=args.kubeconfig)
    if not api.configuration.verify_ssl:  # the user chose insecure-skip-tls-verify
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    kubelet = SimKubelet(api, args.nodes, resources=NodeResources(args.resource, args.cpu, args.memory),
                         start_delay=args.start_delay)
    kubelet.start()
    log.info("running for nodes %s", ", ".join(kubelet.nodes))
    scaler = _autoscaler(kubelet, args.autoscale, dict(args.stock)) if args.autoscale else None
    stop.wait()
    log.info("stopping")
    if scaler is not None:
        scaler.stop()
    kubelet.stop(delete_nodes_too=args.delete_nodes_on_exit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
