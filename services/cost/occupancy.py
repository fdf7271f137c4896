"""What ran on each node, and when: the op pods' intervals per node, folded from the op stream (``submitted`` gives
each pod's accelerators, ``running.nodes`` each pod's node, an attempt's end or its ``cost_recorded`` closes its
pods), so that a node's cost can be split into what op pods held (busy), what sat free beside them (stranded) and
what ran nothing at all (idle). Times come from the events only: a replay of the same stream gives the same split.
Pure: no I/O, no clock."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.events import CostRecorded, Event, NodeCostRecorded, OperationRunning, OperationSubmitted
from opsched.proto.lifecycle import ATTEMPT_ENDS
from opsched.proto.pod_resources import pod_limits
from opsched.proto.resources import is_device
from opsched.proto.spec import OpSpec
from opsched.rules.pricing import pod_shapes

Attempt = tuple[str, int]  # op, attempt


@dataclass(frozen=True)
class PodInterval:
    """One pod of one attempt on one node, from ``since`` (its ``running``) to ``until`` (None: still running)."""

    op_id: str
    attempt: int
    pod: int  # its index, pods in name order
    accelerators: float  # whole devices it holds
    since: datetime
    until: datetime | None = None


@dataclass(frozen=True)
class Split:
    """A node's accelerator-seconds (a node without accelerators: its seconds) by use; they sum to its whole."""

    busy: float = 0.0
    stranded: float = 0.0
    idle: float = 0.0

    @property
    def total(self) -> float:
        return self.busy + self.stranded + self.idle


def devices_per_pod(op_id: str, spec: OpSpec) -> list[float]:
    """The whole accelerator devices each pod of the op holds, pods in name order (``running.nodes``' order)."""
    per_shape = [sum(v for r, v in limits.items() if is_device(r)) for limits, _pods in pod_limits(spec)]
    return [per_shape[i] if i < len(per_shape) else 0.0 for i in pod_shapes(op_id, spec)]


@dataclass
class Occupancy:
    devices: dict[str, list[float]] = field(default_factory=dict)  # op -> each pod's devices (name order)
    running: dict[Attempt, list[tuple[str, PodInterval]]] = field(default_factory=dict)  # open: (node, pod)
    ended: dict[str, list[PodInterval]] = field(default_factory=dict)  # node -> its closed pod intervals

    def fold(self, e: Event) -> None:
        if isinstance(e, OperationSubmitted):
            self.devices.setdefault(e.op_id, devices_per_pod(e.op_id, e.spec))
        elif isinstance(e, OperationRunning):
            self._started(e)
        elif isinstance(e, (CostRecorded, *ATTEMPT_ENDS)):
            self._ended((e.op_id, e.attempt), e.at)
        elif isinstance(e, NodeCostRecorded):
            self.forget(e.node)

    def _started(self, e: OperationRunning) -> None:
        key = (e.op_id, e.attempt)
        if key in self.running:
            return  # published again
        devices = self.devices.get(e.op_id, [])
        nodes = e.nodes or [e.node or ""] * max(1, len(devices))
        self.running[key] = [
            (node, PodInterval(e.op_id, e.attempt, i, devices[i] if i < len(devices) else 0.0, e.at))
            for i, node in enumerate(nodes) if node]

    def _ended(self, key: Attempt, at: datetime) -> None:
        for node, pod in self.running.pop(key, []):
            self.ended.setdefault(node, []).append(
                PodInterval(pod.op_id, pod.attempt, pod.pod, pod.accelerators, pod.since, max(at, pod.since)))

    def forget(self, node: str) -> None:
        """The node was charged: its ended intervals count no more (a node name is not reused while it exists)."""
        self.ended.pop(node, None)

    def on(self, node: str) -> list[PodInterval]:
        """Every pod interval on ``node``, ended and running."""
        return [*self.ended.get(node, []), *(p for pods in self.running.values() for n, p in pods if n == node)]

    def split(self, node: str, created: datetime, removed: datetime, gpus: float) -> Split:
        """``node``'s accelerator-seconds from ``created`` to ``removed`` (a running pod counts to ``removed``)."""
        return split_of(self.on(node), created, removed, gpus)


def split_of(pods: Iterable[PodInterval], start: datetime, end: datetime, gpus: float) -> Split:
    """Between ``start`` and ``end``: accelerator-seconds held by the pods (at most ``gpus`` at a time), free while
    some pod ran (stranded), and all of them while none ran (idle). A node without accelerators (``gpus`` 0): its
    seconds occupied by some pod (busy) or by none (idle)."""
    if end <= start:
        return Split()
    changes: dict[datetime, float] = {}  # time -> change of devices held
    running: dict[datetime, int] = {}  # time -> change of pods running
    for p in pods:
        since, until = max(p.since, start), min(p.until or end, end)
        if until <= since:
            continue
        changes[since] = changes.get(since, 0.0) + p.accelerators
        changes[until] = changes.get(until, 0.0) - p.accelerators
        running[since] = running.get(since, 0) + 1
        running[until] = running.get(until, 0) - 1
    busy = stranded = idle = 0.0
    held, pods_on, at = 0.0, 0, start
    for t in sorted({*changes, end}):
        seconds = (t - at).total_seconds()
        if seconds > 0:
            if gpus > 0:
                used = min(gpus, max(0.0, held))
                busy += used * seconds
                if pods_on > 0:
                    stranded += (gpus - used) * seconds
                else:
                    idle += gpus * seconds
            elif pods_on > 0:
                busy += seconds
            else:
                idle += seconds
        held += changes.get(t, 0.0)
        pods_on += running.get(t, 0)
        at = t
    return Split(busy, stranded, idle)
