"""How long an op is expected to run, learned from the op stream: the run time (``running`` ->
``succeeded``) of the last ``LAST_RUNS`` succeeded attempts of the same component, whose median is
the expected duration once there are at least ``MIN_RUNS`` of them.

The same component: the same project and op name (a sweep's trials, ``train-0``, ``train-1``, …, by the
name they share: ``rules.trial_names``); an op without a name is known by a stable hash of its image,
command and args. Pure: fed events by the caller (replayed on start, then live)."""
from __future__ import annotations

import hashlib
import json
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.events import (
    Event,
    OperationEvicted,
    OperationFailed,
    OperationPreempted,
    OperationRunning,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    OperationTimedOut,
)
from opsched.proto.spec import OpSpec
from opsched.rules.trial_names import trial_base

MIN_RUNS = 3
LAST_RUNS = 20
_OTHER_ENDS = (OperationFailed, OperationTimedOut, OperationStopped, OperationPreempted, OperationEvicted)


def component_key(spec: OpSpec) -> str:
    """``<project>/<name>`` (a sweep's trial: the name its batch shares), or ``<project>/#<hash of image,
    command and args>`` for an unnamed op."""
    if spec.name:
        return f"{spec.project or ''}/{trial_base(spec.name, spec.iteration)}"
    c = spec.container
    digest = hashlib.sha256(json.dumps([c.image, c.command, c.args]).encode()).hexdigest()[:16]
    return f"{spec.project or ''}/#{digest}"


def typical(runs: Sequence[float]) -> float | None:
    """The median of the last ``LAST_RUNS`` run times, or None with fewer than ``MIN_RUNS``."""
    last = list(runs)[-LAST_RUNS:]
    return float(statistics.median(last)) if len(last) >= MIN_RUNS else None


@dataclass
class Durations:
    component: dict[str, str] = field(default_factory=dict)  # op -> component key (until it succeeds)
    started: dict[tuple[str, int], datetime] = field(default_factory=dict)  # (op, attempt) -> running since
    runs: dict[str, deque[float]] = field(default_factory=dict)  # component -> last run times (s)

    def fold(self, e: Event) -> None:
        if isinstance(e, OperationSubmitted):
            self.component.setdefault(e.op_id, component_key(e.spec))
        elif isinstance(e, OperationRunning):
            self.started.setdefault((e.op_id, e.attempt), e.at)
        elif isinstance(e, OperationSucceeded):
            self._succeeded(e)
        elif isinstance(e, _OTHER_ENDS):
            self.started.pop((e.op_id, e.attempt), None)

    def _succeeded(self, e: OperationSucceeded) -> None:
        start = self.started.pop((e.op_id, e.attempt), None)
        key = self.component.pop(e.op_id, None)
        if start is None or key is None:
            return  # never ran (a cache hit), or a duplicate
        self.runs.setdefault(key, deque(maxlen=LAST_RUNS)).append(max(0.0, (e.at - start).total_seconds()))

    def runs_of(self, spec: OpSpec) -> list[float]:
        """The last run times of ``spec``'s component, oldest first."""
        return list(self.runs.get(component_key(spec), ()))
