"""What a run is judged on, counted from what is stored (the op stream read from its start), the pods the
API server had (the pod ledger) and admission's own answer about its queues:

- lost: an accepted submit without a ``submitted``, or an op not terminal;
- duplicate admissions: more than one ``admitted`` for one op and attempt;
- duplicate pods: a pod name created twice, an attempt with two pods, an op with pods of two attempts
  alive at once, a pod for an attempt never admitted, or an attempt dispatched without a pod;
- quota in use: what admission still counts (running ops, GPUs used) once every op is terminal;
- over quota: more 1-GPU ops admitted and not ended at once than the queue's quota (two deciders);
- charges: an attempt that ran (its ``running`` and its end stored) without exactly one ``cost_recorded``."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from bench.faults.pods import PodRecord
from opsched.proto import codec
from opsched.proto.events import (
    CostRecorded,
    Event,
    OperationAdmitted,
    OperationDispatched,
    OperationRunning,
    OperationSubmitted,
)
from opsched.proto.lifecycle import ATTEMPT_ENDS
from opsched.proto.queries import QueuesAnswer
from opsched.view import OpsView


@dataclass
class Tally:
    accepted: int = 0  # submits the bus acknowledged
    refused: int = 0  # submits refused (NATS down): the client said so
    submitted: int = 0
    terminal: int = 0
    statuses: Counter = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    duplicate_admissions: list[str] = field(default_factory=list)
    duplicate_pods: list[str] = field(default_factory=list)
    pods: int = 0
    quota_in_use: list[str] = field(default_factory=list)
    peak_active: int = 0  # the most ops admitted and not ended at once, in stream order
    over_quota: list[str] = field(default_factory=list)
    charges: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [f"{what}: {items[:10]}{' ...' if len(items) > 10 else ''} ({len(items)})"
                for what, items in (("lost", self.lost), ("duplicate admissions", self.duplicate_admissions),
                                    ("duplicate pods", self.duplicate_pods), ("quota in use", self.quota_in_use),
                                    ("over quota", self.over_quota), ("charges", self.charges))
                if items]


def tally(accepted: list[str], refused: int, stream: list[bytes], pods: dict[str, PodRecord],
          overlaps: list[str], queues: QueuesAnswer, quota: int) -> Tally:
    """``quota``: the GPUs of the queue (every op asks for one)."""
    view = OpsView()
    admitted: Counter = Counter()
    dispatched: set[tuple[str, int]] = set()
    submitted: set[str] = set()
    active: set[str] = set()
    peak = 0
    for data in stream:
        row = view.fold_bytes(data)
        if row is not None:
            (active.add if row.active else active.discard)(row.op_id)
            peak = max(peak, len(active))
        try:
            event = codec.decode_event(data)
        except Exception:  # noqa: BLE001 - not an op event
            continue
        if isinstance(event, OperationSubmitted):
            submitted.add(event.op_id)
        elif isinstance(event, OperationAdmitted):
            admitted[(event.op_id, event.attempt)] += 1
        elif isinstance(event, OperationDispatched):
            dispatched.add((event.op_id, event.attempt))
    out = Tally(accepted=len(accepted), refused=refused, submitted=len(submitted & set(accepted)), pods=len(pods))
    for op_id in accepted:
        row = view.rows.get(op_id)
        out.statuses[row.status if row else "missing"] += 1
        if op_id not in submitted or row is None or not row.terminal:
            out.lost.append(f"{op_id} ({row.status if row else 'never submitted'})")
        else:
            out.terminal += 1
    out.duplicate_admissions = [f"{op}#{attempt} x{n}" for (op, attempt), n in admitted.items() if n > 1]
    out.duplicate_pods = duplicate_pods(pods, overlaps, set(admitted), dispatched)
    out.quota_in_use = quota_in_use(queues)
    out.peak_active = peak
    out.charges = charges(stream)
    out.over_quota = [f"{peak} ops admitted at once, quota {quota} GPUs"] if peak > quota else []
    return out


def charges(stream: list[bytes]) -> list[str]:
    """The attempts that ran and ended without exactly one ``cost_recorded`` (the cost ledger's)."""
    ran: set[tuple[str, int]] = set()
    ended: set[tuple[str, int]] = set()
    charged: Counter = Counter()
    for event in _events(stream):
        key = (event.op_id, event.attempt)
        if isinstance(event, OperationRunning):
            ran.add(key)
        elif isinstance(event, CostRecorded):
            charged[key] += 1
        if isinstance(event, ATTEMPT_ENDS):
            ended.add(key)
    return [f"{op}#{attempt}: {'never charged' if not charged[(op, attempt)] else f'charged {charged[(op, attempt)]} times'}"
            for op, attempt in sorted(ran & ended) if charged[(op, attempt)] != 1]


def _events(stream: list[bytes]) -> list[Event]:
    out = []
    for data in stream:
        try:
            out.append(codec.decode_event(data))
        except Exception:  # noqa: BLE001, S112 - not an op event
            continue
    return out


def duplicate_pods(pods: dict[str, PodRecord], overlaps: list[str], admitted: set[tuple[str, int]],
                   dispatched: set[tuple[str, int]]) -> list[str]:
    found = [f"{name} created {len(r.uids)} times" for name, r in pods.items() if len(r.uids) > 1]
    by_attempt: dict[tuple[str, int], list[str]] = defaultdict(list)
    for name, record in pods.items():
        by_attempt[(record.op_id, record.attempt)].append(name)
    found += [f"{op}#{attempt}: pods {names}" for (op, attempt), names in by_attempt.items() if len(names) > 1]
    found += [f"{op}#{attempt}: a pod but never admitted" for op, attempt in set(by_attempt) - admitted]
    found += [f"{op}#{attempt}: dispatched but no pod seen" for op, attempt in dispatched - set(by_attempt)]
    return found + overlaps


def quota_in_use(queues: QueuesAnswer) -> list[str]:
    out = [f"{q.name}: {q.running} running" for q in queues.queues if q.running]
    out += [f"{q.name}: {u.used:g} {u.resource} ({u.flavor})" for q in queues.queues for u in q.usage if u.used]
    return out
