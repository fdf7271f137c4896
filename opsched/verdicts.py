"""Admission's verdict on one command (stop, touch, approve, reject, restart, copy, resume), read from the op
stream.

A command carries a ``request_id`` chosen by its sender; its Nats-Msg-Id is ``<op_id>.<verb>.<request_id>``
(``bus.addressing``). Admission answers every such command, on the op's subjects:

- done: the event its handler returns carries the ``request_id`` (stop: ``stop_requested``, or ``stopped`` for an
  op that held no pod; touch: ``touched``; approve: ``approved``; reject: ``rejected``; resume: ``resumed``); a restart or copy is
  answered by the NEW op's ``submitted`` (or ``rejected``), whose id the sender chose;
- refused, or nothing to do: an ``error`` event whose ``command_msg_id`` is the command's Nats-Msg-Id (reasons
  ``unknown_op``, ``already_ended``, ``not_resumable``, ``not_on_hold``, ``not_allowed``, ...; nothing to do:
  ``already_approved``, ``already_stopping``).

So a sender never takes another user's answer about the same op for its own. It follows the op's subjects
(from the start of the stream: nothing published after it subscribed can be missed) BEFORE it publishes, and
waits for the first event that matches (``verdict_of``), at most ``timeout`` seconds (``VerdictUnknown``)."""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opsched.proto import codec, subjects
from opsched.proto.config import QueuesConfigured, SetQueues
from opsched.proto.events import (
    NO_OP_ID,
    ErrorRaised,
    Event,
    OperationApproved,
    OperationRejected,
    OperationResumed,
    OperationStopped,
    OperationSubmitted,
    OperationTouched,
    StopRequested,
)
from opsched.proto.outputs import VerdictItem, VerdictList
from opsched.proto.queue_stops import QueueStopSet, SetQueueStop
from opsched.proto.reasons import Reason, Refusal

VERDICT_TIMEOUT_S = 10.0
NOTHING_TO_DO = frozenset({Refusal.ALREADY_APPROVED, Refusal.ALREADY_STOPPING, Refusal.QUEUE_UNCHANGED})  # the op is as asked already: exit 0
# refusals of what was typed (an id naming nothing, params that cannot render, ...): exit 2; others exit 1
BAD_INPUT = frozenset({Reason.UNKNOWN_OP, Refusal.INVALID_OP_ID, Refusal.INVALID_TEMPLATE, Refusal.INVALID_CONDITION,
                       Refusal.SPEC_TOO_LARGE, Refusal.INVALID_SPEC, Refusal.MALFORMED_MESSAGE, Refusal.DUPLICATE_OP_ID,
                       Refusal.UNKNOWN_QUEUE, Refusal.UNKNOWN_PRIORITY_CLASS, Refusal.AGENT_MISMATCH,
                       Refusal.UNKNOWN_CONNECTION, Refusal.INVALID_QUEUES})
EXIT_DONE, EXIT_REFUSED, EXIT_BAD_INPUT, EXIT_NO_VERDICT = 0, 1, 2, 4
RERUNS = ("restart", "copy")
# the events that say a command was done (a rerun's: of the new op)
DONE: dict[str, tuple[type[Event], ...]] = {
    "stop": (StopRequested, OperationStopped), "touch": (OperationTouched,), "approve": (OperationApproved,), "reject": (OperationRejected,),
    "resume": (OperationResumed,), "restart": (OperationSubmitted,), "copy": (OperationSubmitted,),
}


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class Request:
    """One command as its sender knows it: what it asked, of which op, and the ids its answer carries."""

    verb: str
    op_id: str
    request_id: str
    new_op_id: str = ""  # a restart or copy: the new op

    @property
    def msg_id(self) -> str:
        return subjects.msg_id(self.op_id, self.verb, self.request_id)

    @property
    def filters(self) -> list[str]:
        """The subjects the answer comes on: the op's (and a rerun's new op's), routed ones too."""
        return subjects.all_events_for(self.op_id) + (subjects.all_events_for(self.new_op_id) if self.new_op_id
                                                       else [])


@dataclass(frozen=True)
class Verdict:
    verb: str
    op_id: str
    outcome: str  # the answering event's type ("stop_requested", "approved", ...) or the refusal's reason
    message: str  # for people
    refused: bool = False
    nothing_to_do: bool = False
    new_op_id: str = ""  # a restart or copy: the new op's id

    @property
    def done(self) -> bool:
        return not self.refused and not self.nothing_to_do

    @property
    def exit_code(self) -> int:
        """0 done or nothing to do, 2 a refusal of what was typed (``BAD_INPUT``), 1 any other refusal."""
        if not self.refused:
            return EXIT_DONE
        return EXIT_BAD_INPUT if self.outcome in BAD_INPUT else EXIT_REFUSED


class CommandRefused(Exception):
    """Admission refused the command (``verdict`` says why); the op is as it was."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(f"{verdict.verb} {verdict.op_id} refused ({verdict.outcome}): {verdict.message}")
        self.verdict = verdict


class VerdictUnknown(Exception):
    """No verdict came within the timeout: the command may or may not have taken effect."""

    def __init__(self, request: Request, timeout: float, see: str = "") -> None:
        super().__init__(f"no verdict on {request.verb} {request.op_id} within {timeout:g}s: it may or may not "
                         f"have taken effect (is admission running? see `{see or 'opsched why ' + request.op_id}`)")
        self.request, self.timeout = request, timeout


def verdict_of(event: Event, request: Request) -> Verdict | None:
    """``event``'s verdict on ``request``, or None: it is not the answer to that command."""
    if isinstance(event, ErrorRaised):
        if not event.command_msg_id or event.command_msg_id != request.msg_id:
            return None
        idle = event.reason in NOTHING_TO_DO
        return Verdict(request.verb, request.op_id, event.reason, event.message, refused=not idle,
                       nothing_to_do=idle, new_op_id=request.new_op_id)
    if request.verb in RERUNS:
        return _rerun_verdict(event, request)
    if event.op_id != request.op_id or getattr(event, "request_id", "") != request.request_id:
        return None
    if not isinstance(event, DONE[request.verb]):
        return None
    return Verdict(request.verb, request.op_id, codec.type_of(event), _done_text(event))


def _rerun_verdict(event: Event, request: Request) -> Verdict | None:
    if event.op_id != request.new_op_id:
        return None
    if isinstance(event, OperationSubmitted):
        return Verdict(request.verb, request.op_id, "submitted", f"{request.new_op_id}: submitted, a "
                       f"{event.relation or request.verb} of {request.op_id}", new_op_id=request.new_op_id)
    if isinstance(event, OperationRejected):
        return Verdict(request.verb, request.op_id, event.reason, f"{request.new_op_id} rejected: {event.message}",
                       refused=True, new_op_id=request.new_op_id)
    return None


def _done_text(event: Event) -> str:
    if isinstance(event, StopRequested):
        return f"{event.op_id}: stop requested (attempt {event.attempt}); its pods are being deleted"
    if isinstance(event, OperationStopped):
        return f"{event.op_id}: stopped"
    if isinstance(event, OperationTouched):
        return f"{event.op_id}: touched; its idle time counts from now"
    if isinstance(event, OperationApproved):
        return f"{event.op_id}: approved" + (f" by {event.approved_by}" if event.approved_by else "")
    if isinstance(event, OperationRejected):
        return f"{event.op_id}: rejected ({event.message})"
    if isinstance(event, OperationResumed):
        return f"{event.op_id}: resumed as attempt {event.attempt}"
    return f"{event.op_id}: {codec.type_of(event)}"


async def await_verdict(reads: Any, request: Request, publish: Callable[[], Awaitable[Any]],
                        timeout: float = VERDICT_TIMEOUT_S) -> Verdict:
    """Follow ``request``'s subjects (``reads``: what follows a stream, ``opsched.directreads.DirectReads``), ``publish()`` the command, and return admission's verdict on it (a refusal
    too: the caller decides whether to raise); ``VerdictUnknown`` after ``timeout`` seconds without one."""
    got: asyncio.Queue[bytes] = asyncio.Queue()

    async def on_message(data: bytes, seq: int) -> None:
        got.put_nowait(data)

    sub = await reads.follow(subjects.OPS_STREAM, request.filters, on_message)
    try:
        await publish()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                data = await asyncio.wait_for(got.get(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise VerdictUnknown(request, timeout) from None
            try:
                event = codec.decode_event(data)
            except Exception:  # noqa: BLE001 - somebody's malformed message, or a leader's claim: no answer
                continue
            verdict = verdict_of(event, request)
            if verdict is not None:
                return verdict
    finally:
        await sub.unsubscribe()


# ---- a queue held, drained or resumed (``proto.queue_stops``): the answer is on the config stream ----
QUEUE_VERBS = {"hold": "Hold", "drain": "HoldAndDrain", "resume": "None"}  # verb -> the stop policy it sets
QUEUE_DONE = {"Hold": "held", "HoldAndDrain": "drained (its running ops are being preempted)", "None": "resumed"}
POLL_S = 0.1


async def await_queue_stop(reads: Any, cmd: SetQueueStop, publish: Callable[[], Awaitable[Any]],
                           timeout: float = VERDICT_TIMEOUT_S) -> Verdict:
    """Publish ``cmd`` and return admission's verdict: done when the queue's ``QueueStopSet`` carrying the command's
    ``request_id`` is the latest on ``config.queue_stop.<queue>`` (polled: clients read the config stream by direct
    gets), refused (or nothing to do) by an ``error`` event matching its msg id; ``VerdictUnknown`` after
    ``timeout`` seconds without either. ``Verdict.op_id`` is the queue."""
    verb = next(v for v, policy in QUEUE_VERBS.items() if policy == cmd.stop_policy)

    async def done() -> Verdict | None:
        latest = await _latest_config(reads, subjects.queue_stop_subject(cmd.queue))
        if not isinstance(latest, QueueStopSet) or latest.request_id != cmd.request_id:
            return None
        by = f" by {latest.by}" if latest.by else ""
        return Verdict(verb, cmd.queue, "queue_stop_set", f"queue {cmd.queue}: {QUEUE_DONE[latest.stop_policy]}"
                       f"{by}" + (f" ({latest.comment})" if latest.comment else ""))
    return await _await_config(reads, Request(verb, cmd.queue, cmd.request_id),
                               subjects.queue_stop_msg_id(cmd.queue, cmd.request_id), publish, done, timeout)


async def await_queues_set(reads: Any, cmd: SetQueues, publish: Callable[[], Awaitable[Any]],
                           timeout: float = VERDICT_TIMEOUT_S) -> Verdict:
    """Publish ``cmd`` (`opsched queues --apply`) and return admission's verdict: done when the latest
    ``QueuesConfigured`` carries its ``request_id``; refused (``invalid_queues``, ``queues_from_resources``, not
    allowed) by an ``error`` event matching its msg id; ``VerdictUnknown`` after ``timeout`` seconds."""
    async def done() -> Verdict | None:
        latest = await _latest_config(reads, subjects.CONFIG_QUEUES)
        if not isinstance(latest, QueuesConfigured) or latest.request_id != cmd.request_id:
            return None
        return Verdict("apply", "queue configuration", "queues_configured",
                       f"queue configuration in force ({len(cmd.config.queues)} queues; source {latest.source})")
    return await _await_config(reads, Request("apply", "queue configuration", cmd.request_id),
                               subjects.set_queues_msg_id(cmd.request_id), publish, done, timeout)


async def _await_config(reads: Any, request: Request, msg_id: str, publish: Callable[[], Awaitable[Any]],
                        done: Callable[[], Awaitable[Verdict | None]], timeout: float) -> Verdict:
    """A configuration command's verdict: ``done()`` (its answer on the config stream, polled) or the ``error``
    event naming its msg id (followed before it is published)."""
    refused: asyncio.Queue[Verdict] = asyncio.Queue()

    async def on_error(data: bytes, seq: int) -> None:
        try:
            event = codec.decode_event(data)
        except Exception:  # noqa: BLE001 - somebody's malformed message: no answer
            return
        if isinstance(event, ErrorRaised) and event.command_msg_id == msg_id:
            idle = event.reason in NOTHING_TO_DO
            refused.put_nowait(Verdict(request.verb, request.op_id, event.reason, event.message, refused=not idle,
                                       nothing_to_do=idle))

    sub = await reads.follow(subjects.OPS_STREAM, subjects.event("error", NO_OP_ID), on_error)  # names no op
    try:
        await publish()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if not refused.empty():
                return refused.get_nowait()
            verdict = await done()
            if verdict is not None:
                return verdict
            await asyncio.sleep(POLL_S)
        raise VerdictUnknown(request, timeout, see="opsched queues")
    finally:
        await sub.unsubscribe()


async def _latest_config(reads: Any, subject: str) -> object | None:
    """The latest message of the config stream on ``subject`` (None: none, or not one of ours)."""
    seq = await reads.last_stored(subjects.CONFIG_STREAM, subject)
    stored = await reads.stored(subjects.CONFIG_STREAM, seq) if seq else None
    if stored is None:
        return None
    try:
        return codec.decode_config(stored.data)
    except Exception:  # noqa: BLE001 - not ours to judge
        return None


# ---- a bulk stop, approve or reject (``proto.commands.OperationsCommand``): a verdict per op ----
async def await_verdicts(reads: Any, verb: str, op_ids: Sequence[str], request_id: str,
                         publish: Callable[[], Awaitable[Any]],
                         timeout: float = VERDICT_TIMEOUT_S) -> dict[str, Verdict | None]:
    """Publish a bulk command (``publish()``) and collect admission's verdict on each op: each op is answered as
    its singular command with the same ``request_id`` (``verdict_of``), so this follows the verb's done events and
    the error events from the op stream's end as it was before the publish (nothing older is read). op id ->
    verdict, None for an op not answered within ``timeout`` seconds (it may or may not have been acted on)."""
    requests = {op_id: Request(verb, op_id, request_id) for op_id in op_ids}
    verdicts: dict[str, Verdict | None] = dict.fromkeys(requests)
    left = asyncio.Event()

    async def on_message(data: bytes, seq: int) -> None:
        try:
            event = codec.decode_event(data)
        except Exception:  # noqa: BLE001 - somebody's malformed message, or a leader's claim: no answer
            return
        request = requests.get(event.op_id)
        if request is None or verdicts[event.op_id] is not None:
            return
        verdict = verdict_of(event, request)
        if verdict is not None:
            verdicts[event.op_id] = verdict
            if all(v is not None for v in verdicts.values()):
                left.set()

    kinds = sorted({str(kind.__struct_config__.tag) for kind in DONE[verb]})
    start = await reads.last_stored(subjects.OPS_STREAM, subjects.OPS_ALL) + 1
    sub = await reads.follow(subjects.OPS_STREAM, [subjects.events_of(k) for k in [*kinds, "error"]], on_message,
                             from_seq=start)
    try:
        await publish()
        if requests:
            try:
                await asyncio.wait_for(left.wait(), timeout)
            except asyncio.TimeoutError:
                pass
    finally:
        await sub.unsubscribe()
    return verdicts


DONE_WORD = {"stop": "stopped", "approve": "approved", "reject": "rejected"}  # a bulk summary's first count


def bulk_exit_code(verdicts: dict[str, Verdict | None]) -> int:
    """4 if any op went unanswered, else 2 if any refusal is of what was typed (``BAD_INPUT``), else 1 if any was
    refused, else 0 (done or nothing to do)."""
    codes = {EXIT_NO_VERDICT if v is None else v.exit_code for v in verdicts.values()}
    return next((c for c in (EXIT_NO_VERDICT, EXIT_BAD_INPUT, EXIT_REFUSED) if c in codes), EXIT_DONE)


def bulk_lines(verb: str, verdicts: dict[str, Verdict | None], timeout: float) -> list[str]:
    """A line per op (its verdict), then the summary: ``approved 98, nothing to do 2, refused 0, no verdict 0``."""
    lines = []
    for op_id, v in verdicts.items():
        if v is None:
            lines.append(f"{op_id}: no verdict within {timeout:g}s (it may or may not have taken effect)")
        elif v.refused:
            lines.append(f"{op_id}: refused ({v.outcome}): {v.message}")
        else:
            lines.append(v.message if v.message.startswith(op_id) else f"{op_id}: {v.message}")
    done = sum(1 for v in verdicts.values() if v is not None and v.done)
    idle = sum(1 for v in verdicts.values() if v is not None and v.nothing_to_do)
    refused = sum(1 for v in verdicts.values() if v is not None and v.refused)
    unanswered = sum(1 for v in verdicts.values() if v is None)
    return [*lines, f"{DONE_WORD[verb]} {done}, nothing to do {idle}, refused {refused}, no verdict {unanswered}"]


def bulk_list(verb: str, verdicts: dict[str, Verdict | None]) -> VerdictList:
    """The verdicts for scripts (``-o json|yaml``, ``proto.outputs.VerdictList``): one item per op."""
    return VerdictList(items=[
        VerdictItem(op_id=op_id, verb=verb, outcome=v.outcome if v else "no_verdict", message=v.message if v else "",
                    refused=bool(v and v.refused), nothing_to_do=bool(v and v.nothing_to_do), answered=v is not None)
        for op_id, v in verdicts.items()])
