"""Simulated GPU nodes: specs, registration and taint clean-up through the API server, and
the pod statuses their simulated kubelet reports (what a pod does, and how it ends).

What a pod does (``pod_behaviour``), first match wins:
  * run time: annotation ``opsched.io/sim-runtime-seconds``, else the sum of ``sleep N`` in the
    container's command and args, else 1 s;
  * exit code of the first container: annotation ``opsched.io/sim-exit-codes`` (comma-separated,
    indexed by the pod's attempt label ``opsched.io/attempt``: ``"1,1,0"`` exits 1 on attempts 0
    and 1 and 0 on attempt 2; attempts beyond the list use its last value), else annotation
    ``opsched.io/sim-exit-code``, else ``exit N`` in its command, else 0. Other containers use
    ``exit N`` in their own command, else 0.
A malformed annotation is logged and ignored (the next source applies).

What a container prints (``container_log``, served by the simulated kubelet's log endpoint): when it starts, one
line per ``echo``/``printf`` of its command and args that writes to stdout (not redirected to a file), in order
(``sh -c SCRIPT`` is read inside); then, while it runs, one line ``[sim] second N`` at each whole second N after its
start, until it ends. Each line's time is its start (plus a microsecond per echoed line, in order) or that second:
deterministic, given the pod's status.

Without kube-controller-manager nobody removes the ``node.kubernetes.io/not-ready`` taint that
the API server adds when a node is created, so the simulated kubelet does it here.
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from kubernetes import client

from opsched.localcluster.rawcalls import raw
from opsched.proto.resources import GPU_MEMORY, GPU_MEMORY_CARDS

NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
SIMULATED_LABEL = "opsched.io/simulated"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_PRODUCT = "simulated"
RUNTIME_ANNOTATION = "opsched.io/sim-runtime-seconds"
EXIT_CODE_ANNOTATION = "opsched.io/sim-exit-code"
EXIT_CODES_ANNOTATION = "opsched.io/sim-exit-codes"  # "1,1,0": per attempt, the last one repeats
ATTEMPT_LABEL = "opsched.io/attempt"  # set by the dispatcher on every pod (kept equal to its LABEL_ATTEMPT)
DEFAULT_RUNTIME = 1.0
_SLEEP_RE = re.compile(r"\bsleep\s+(\d+(?:\.\d*)?|\.\d+)")
_EXIT_RE = re.compile(r"\bexit\s+(\d+)")
TERMINATION_LOG = "/dev/termination-log"  # Kubernetes' default terminationMessagePath
TERMINATION_MESSAGE_BYTES = 4096  # the kubelet keeps at most this much of it
_SEPARATORS = (";", "&&", "||", "|", "&")
_SHARED_RE = re.compile(r"^(\d+)x(\d+)Gi$")
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
log = logging.getLogger("opsched.simkubelet")


@dataclass(frozen=True)
class NodeSpec:
    """One simulated node: its name, how many GPUs it has and the GPU product label; with ``cards``,
    it shares GPU memory instead (Alibaba's gpushare: ``cards`` GPUs of ``card_gib`` GiB each, advertised
    as ``aliyun.com/gpu-mem`` and ``aliyun.com/gpu-count``)."""

    name: str
    gpus: int
    product: str = DEFAULT_PRODUCT
    cards: int = 0
    card_gib: int = 0
    labels: dict[str, str] = field(default_factory=dict, hash=False)  # extra labels (a pool's, when autoscaled)
    taints: tuple[dict[str, Any], ...] = field(default=(), hash=False)  # taints it registers with (a pool's)
    resources: dict[str, str] = field(default_factory=dict, hash=False)  # allocatable besides NodeResources' (a pool's)

    @property
    def gpus_text(self) -> str:
        """What ``--node`` says of its GPUs: ``2``, or ``2x16Gi`` for shared cards."""
        return f"{self.cards}x{self.card_gib}Gi" if self.cards else str(self.gpus)

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ValueError(f"invalid node name {self.name!r} (lowercase DNS name expected)")
        if self.gpus < 0:
            raise ValueError(f"node {self.name}: GPU count must be >= 0, got {self.gpus}")
        if not _LABEL_VALUE_RE.match(self.product):
            raise ValueError(f"node {self.name}: invalid GPU product label value {self.product!r}")


@dataclass(frozen=True)
class NodeResources:
    """What every simulated node offers besides its GPUs."""

    gpu_resource: str = DEFAULT_GPU_RESOURCE
    cpu: str = "32"
    memory: str = "256Gi"
    pods: int = 110


def parse_node_spec(text: str) -> NodeSpec:
    """Parse ``NAME:GPUS[:PRODUCT]``, e.g. ``gpu-a:2:A100``; GPUS ``2x16Gi`` shares the memory of 2 cards
    of 16 GiB (``aliyun.com/gpu-mem``)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"expected NAME:GPUS[:PRODUCT], got {text!r}")
    return _spec(parts[0], parts[1], parts[2] if len(parts) == 3 else DEFAULT_PRODUCT)


def _spec(name: str, gpus: str, product: str) -> NodeSpec:
    shared = _SHARED_RE.match(gpus)
    if shared:
        return NodeSpec(name, 0, product, cards=int(shared[1]), card_gib=int(shared[2]))
    try:
        count = int(gpus)
    except ValueError:
        raise ValueError(f"GPU count in {name}:{gpus} is not an integer (nor CARDSxGIBGi, e.g. 2x16Gi)") from None
    return NodeSpec(name, count, product)


def as_node_spec(value: NodeSpec | str | tuple[Any, ...]) -> NodeSpec:
    """Accept a NodeSpec, ``"name:gpus[:product]"`` or ``(name, gpus[, product])``."""
    if isinstance(value, NodeSpec):
        return value
    if isinstance(value, str):
        return parse_node_spec(value)
    return _spec(str(value[0]), str(value[1]), str(value[2]) if len(value) > 2 else DEFAULT_PRODUCT)


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_labels(spec: NodeSpec) -> dict[str, str]:
    return {
        GPU_PRODUCT_LABEL: spec.product,
        **spec.labels,
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        SIMULATED_LABEL: "true",
    }


def node_status(spec: NodeSpec, resources: NodeResources, address: str, kubelet_port: int = 0) -> dict[str, Any]:
    """Capacity, allocatable, Ready conditions, addresses and (given ``kubelet_port``) where its kubelet serves
    (``daemonEndpoints``: the API server proxies ``kubectl logs`` to ``https://<InternalIP>:<port>``), as a kubelet
    would report."""
    now = now_rfc3339()
    amounts = {"cpu": resources.cpu, "memory": resources.memory, "pods": str(resources.pods),
               resources.gpu_resource: str(spec.gpus), **spec.resources}
    if spec.cards:
        amounts.update({GPU_MEMORY: str(spec.cards * spec.card_gib), GPU_MEMORY_CARDS: str(spec.cards)})

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return {
        "capacity": amounts,
        "allocatable": amounts,
        "conditions": [
            condition("Ready", "True", "KubeletReady", "simulated kubelet is posting ready status"),
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "simulated"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "simulated"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "simulated"),
        ],
        "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": spec.name}],
        **({"daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}}} if kubelet_port else {}),
        "nodeInfo": {"kubeletVersion": "v1.20.2-opsched-sim", "kubeProxyVersion": "v1.20.2-opsched-sim",
                     "operatingSystem": "linux", "architecture": "amd64", "containerRuntimeVersion": "sim://1",
                     "machineID": spec.name, "systemUUID": spec.name, "bootID": spec.name,
                     "kernelVersion": "", "osImage": "opsched simulated node"},
    }


def register_node(core: client.CoreV1Api, spec: NodeSpec, resources: NodeResources, address: str,
                  kubelet_port: int = 0) -> None:
    """Create the node (or patch it if it exists), post a Ready status and clear not-ready taints."""
    labels = node_labels(spec)
    try:
        core.create_node({"metadata": {"name": spec.name, "labels": labels},
                          **({"spec": {"taints": list(spec.taints)}} if spec.taints else {})})
    except client.ApiException as e:
        if e.status != 409:
            raise
        core.patch_node(spec.name, {"metadata": {"labels": labels}})
    post_status(core, spec, resources, address, kubelet_port)
    clear_not_ready_taints(core, spec.name)


def post_status(core: client.CoreV1Api, spec: NodeSpec, resources: NodeResources, address: str,
                kubelet_port: int = 0) -> None:
    raw(core.patch_node_status, spec.name, {"status": node_status(spec, resources, address, kubelet_port)})


def clear_not_ready_taints(core: client.CoreV1Api, name: str) -> bool:
    """Remove not-ready/unreachable taints; True if any were removed. Retries on conflicts."""
    for _ in range(10):
        node = raw(core.read_node, name)
        taints = (node.get("spec") or {}).get("taints") or []
        keep = [t for t in taints if t["key"] not in NOT_READY_TAINTS]
        if len(keep) == len(taints):
            return False
        node["spec"]["taints"] = keep or None
        try:
            raw(core.replace_node, name, node)  # carries resourceVersion: 409 if someone else wrote
            return True
        except client.ApiException as e:
            if e.status != 409:
                raise
    raise RuntimeError(f"node {name}: could not remove the not-ready taint (conflicts)")


def node_ready_and_untainted(node: client.V1Node) -> bool:
    ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
    tainted = any(t.key in NOT_READY_TAINTS for t in (node.spec.taints or []))
    return ready and not tainted


def delete_nodes(core: client.CoreV1Api, names: Iterable[str], timeout: float = 10.0) -> None:
    """Delete nodes (missing ones are fine) and wait until they are gone."""
    names = list(names)
    for name in names:
        try:
            core.delete_node(name)
        except client.ApiException as e:
            if e.status != 404:
                raise
    deadline = time.monotonic() + timeout
    while True:
        left = [n for n in names if _node_exists(core, n)]
        if not left:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes still present after {timeout}s: {', '.join(left)}")
        time.sleep(0.05)


def _node_exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_node(name)
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


# -- what a pod does ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PodBehaviour:
    runtime: float
    exit_codes: dict[str, int]  # container name -> exit code
    messages: dict[str, str] = field(default_factory=dict)  # container name -> its termination message


def termination_message(container: dict[str, Any]) -> str | None:
    """What the container's script writes to its termination message file (``terminationMessagePath``, by default
    ``/dev/termination-log``) with ``echo``/``printf`` and ``>``, as a shell would leave it there; None: nothing."""
    target = container.get("terminationMessagePath") or TERMINATION_LOG
    written = None
    scripts = [*(container.get("command") or []), *(container.get("args") or [])]  # `sh -c SCRIPT`: each on its own
    for command in (c for script in scripts for c in simple_commands(str(script))):
        if len(command) >= 3 and command[0] in ("echo", "printf") and command[-2] in (">", ">>") \
                and command[-1] == target:
            text = _printed(command[0], command[1:-2])
            written = (written or "") + text if command[-2] == ">>" else text
    return written


def simple_commands(script: str) -> Iterator[list[str]]:
    """The simple commands of a shell script, each as its words (split at ``;``, ``&&``, ``|``, ... and lines; a
    line that does not tokenize is skipped)."""
    for line in script.splitlines():
        try:
            tokens = list(shlex.shlex(line, posix=True, punctuation_chars=True))
        except ValueError:
            continue
        command: list[str] = []
        for token in [*tokens, ";"]:
            if token not in _SEPARATORS:
                command.append(token)
                continue
            if command:
                yield command
            command = []


def printed_lines(container: dict[str, Any]) -> list[str]:
    """What the container's command and args print on stdout, in order: each ``echo``/``printf`` not redirected
    (``sh -c SCRIPT``: the script's own); a ``printf`` whose text holds newlines gives a line per line."""
    lines: list[str] = []
    for script in [*(container.get("command") or []), *(container.get("args") or [])]:
        lines += _echoed(str(script))
    return lines


def _echoed(script: str) -> list[str]:
    lines: list[str] = []
    for command in simple_commands(script):
        if len(command) >= 3 and command[0] in ("sh", "bash") and command[1] == "-c":
            lines += _echoed(command[2])
        elif command[0] in ("echo", "printf") and not {">", ">>"} & set(command):
            lines += _printed(command[0], command[1:]).replace("\\n", "\n").splitlines() or [""]
    return lines


def _printed(verb: str, words: list[str]) -> str:
    """What ``echo WORDS`` or ``printf FORMAT ARGS`` prints (a trailing newline left out)."""
    if verb == "echo":
        return " ".join(w for w in words if w != "-n")
    try:
        return (words[0] % tuple(words[1:])) if words else ""
    except (TypeError, ValueError):
        return " ".join(words)


def pod_behaviour(pod: dict[str, Any]) -> PodBehaviour:
    """Run time and per-container exit codes: annotations win, else ``sleep N``/``exit N``
    (the module docstring has the order)."""
    containers = pod["spec"].get("containers") or []
    runtimes, codes, messages = [], {}, {}
    for c in containers:
        text = " ".join([*(c.get("command") or []), *(c.get("args") or [])])
        sleeps = [float(s) for s in _SLEEP_RE.findall(text)]
        runtimes.append(sum(sleeps) if sleeps else DEFAULT_RUNTIME)
        match = _EXIT_RE.search(text)
        codes[c["name"]] = int(match.group(1)) % 256 if match else 0
        message = termination_message(c)
        if message is not None:
            messages[c["name"]] = message
    meta = pod["metadata"]
    annotations = meta.get("annotations") or {}
    runtime = max(runtimes, default=DEFAULT_RUNTIME)
    if RUNTIME_ANNOTATION in annotations:
        try:
            runtime = max(0.0, float(annotations[RUNTIME_ANNOTATION]))
        except ValueError:
            log.warning("pod %s: ignoring a malformed %s annotation", pod_key(pod), RUNTIME_ANNOTATION)
    code = _annotated_exit_code(pod, annotations)
    if code is not None and containers:
        codes[containers[0]["name"]] = code
    return PodBehaviour(runtime, codes, messages)


def attempt_of(pod: dict[str, Any]) -> int:
    """The pod's attempt number from its ``opsched.io/attempt`` label (0 if absent or malformed)."""
    value = (pod["metadata"].get("labels") or {}).get(ATTEMPT_LABEL, "0")
    try:
        return max(0, int(value))
    except ValueError:
        return 0


def exit_code_for_attempt(codes: str, attempt: int) -> int:
    """``"1,1,0"`` → 1 for attempts 0 and 1, 0 for attempt 2 and later. ValueError if malformed."""
    values = [int(part) for part in codes.split(",")]  # int() accepts surrounding spaces
    return values[min(attempt, len(values) - 1)]


def _annotated_exit_code(pod: dict[str, Any], annotations: dict[str, str]) -> int | None:
    if EXIT_CODES_ANNOTATION in annotations:
        try:
            return exit_code_for_attempt(annotations[EXIT_CODES_ANNOTATION], attempt_of(pod))
        except ValueError:
            log.warning("pod %s: ignoring a malformed %s annotation", pod_key(pod), EXIT_CODES_ANNOTATION)
    if EXIT_CODE_ANNOTATION in annotations:
        try:
            return int(annotations[EXIT_CODE_ANNOTATION])
        except ValueError:
            log.warning("pod %s: ignoring a malformed %s annotation", pod_key(pod), EXIT_CODE_ANNOTATION)
    return None


def pod_key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


# -- pod status bodies -------------------------------------------------------------------------
def _conditions(status: str, now: str, reason: str | None = None) -> list[dict[str, Any]]:
    ready = {"status": status, "lastTransitionTime": now, **({"reason": reason} if reason else {})}
    return [
        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
        {"type": "Ready", **ready},
        {"type": "ContainersReady", **ready},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
    ]


def _container_status(pod: dict[str, Any], c: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    running = "running" in state
    return {"name": c["name"], "image": c.get("image", ""), "imageID": "",
            "containerID": f"sim://{pod['metadata']['uid']}/{c['name']}",
            "ready": running, "started": running, "restartCount": 0, "state": state}


def readiness_delay(pod: dict[str, Any]) -> float | None:
    """Seconds from start until the pod is Ready: the longest ``initialDelaySeconds`` of its containers' readiness
    probes (the first probe then passes); None when none has a probe (Ready as it starts, as a kubelet says)."""
    probes = [c["readinessProbe"] for c in pod["spec"]["containers"] if c.get("readinessProbe")]
    if not probes:
        return None
    return max(float(p.get("initialDelaySeconds") or 0) for p in probes)


def running_status(pod: dict[str, Any], pod_ip: str, host_ip: str, *, ready: bool | None = None) -> dict[str, Any]:
    """Running, its init containers (if any) having completed, in order, as a kubelet reports them. ``ready``:
    whether its containers passed their readiness probes (default: Ready unless one has a probe)."""
    now = now_rfc3339()
    ready = readiness_delay(pod) is None if ready is None else ready
    status = {
        "phase": "Running", "startTime": now, "hostIP": host_ip, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "conditions": _conditions("True" if ready else "False", now, None if ready else "ContainersNotReady"),
        "containerStatuses": [_container_status(pod, c, {"running": {"startedAt": now}}) | {"ready": ready}
                              for c in pod["spec"]["containers"]],
    }
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}
    init = [_container_status(pod, c, done) | {"ready": True} for c in pod["spec"].get("initContainers") or []]
    return {**status, "initContainerStatuses": init} if init else status


def ready_status(pod: dict[str, Any]) -> dict[str, Any]:
    """A running pod's status once its readiness probes passed: Ready, every container ready."""
    now, status = now_rfc3339(), dict(pod["status"])
    readiness = ("Ready", "ContainersReady")
    status["conditions"] = [{k: v for k, v in c.items() if k != "reason"} | {"status": "True", "lastTransitionTime": now}
                            if c["type"] in readiness else c for c in status.get("conditions") or []]
    status["containerStatuses"] = [c | {"ready": True} for c in status.get("containerStatuses") or []]
    return status


def terminal_status(pod: dict[str, Any], exit_codes: dict[str, int], *, reason: str | None = None,
                    message: str | None = None, messages: dict[str, str] | None = None) -> dict[str, Any]:
    """Phase Succeeded if every container exited 0, else Failed (with a pod reason/message)."""
    now = now_rfc3339()
    started = (pod.get("status") or {}).get("startTime") or now
    statuses = []
    for c in pod["spec"]["containers"]:
        code = exit_codes.get(c["name"], 0)
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                      "startedAt": started, "finishedAt": now}
        if (messages or {}).get(c["name"]):  # what it wrote to its termination message file
            terminated["message"] = messages[c["name"]][:TERMINATION_MESSAGE_BYTES]  # type: ignore[index]
        statuses.append(_container_status(pod, c, {"terminated": terminated}))
    failed = [(c["name"], exit_codes[c["name"]]) for c in pod["spec"]["containers"]
              if exit_codes.get(c["name"], 0) != 0]
    status: dict[str, Any] = {"phase": "Failed" if failed or reason else "Succeeded",
                              "conditions": _conditions("False", now, "PodCompleted"),
                              "containerStatuses": statuses}
    if failed or reason:
        status["reason"] = reason or "Error"
        status["message"] = message or f"container {failed[0][0]} exited with code {failed[0][1]}"
    return status


# -- what a container prints -------------------------------------------------------------------
TICK = "[sim] second {n}"  # the line a running container prints at each whole second after its start
ECHO_SPACING_S = 1e-6  # the echoed lines' times: its start, a microsecond apart (their order, in time too)


@dataclass(frozen=True)
class LogLine:
    at: float  # seconds since the epoch
    text: str


def container_span(pod: dict[str, Any], name: str) -> tuple[float, float | None] | None:
    """When container ``name`` started and, once it ended, when it ended, as its status says; None while it has not
    started (no status, or waiting)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != name:
            continue
        state = status.get("state") or {}
        if "running" in state and state["running"].get("startedAt"):
            return _epoch(state["running"]["startedAt"]), None
        if "terminated" in state and state["terminated"].get("startedAt"):
            ended = state["terminated"].get("finishedAt") or state["terminated"]["startedAt"]
            return _epoch(state["terminated"]["startedAt"]), _epoch(ended)
    return None


def _epoch(text: str) -> float:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()


def container_log(pod: dict[str, Any], name: str, now: float) -> list[LogLine]:
    """Every line container ``name`` of ``pod`` printed up to ``now`` (the module docstring has what it prints);
    nothing before it started."""
    span = container_span(pod, name)
    container = next((c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == name), None)
    if span is None or container is None:
        return []
    started, ended = span
    until = min(now, ended) if ended is not None else now
    lines = [LogLine(started + i * ECHO_SPACING_S, text) for i, text in enumerate(printed_lines(container))]
    return lines + [LogLine(started + n, TICK.format(n=n)) for n in range(1, int(until - started) + 1)]


def next_tick(pod: dict[str, Any], name: str, after: float) -> float | None:
    """When container ``name`` prints its next line after ``after`` (None: it has not started, or it ended)."""
    span = container_span(pod, name)
    if span is None or span[1] is not None:
        return None
    return span[0] + int(after - span[0]) + 1 if after >= span[0] else span[0] + 1
