"""Command handlers: turn a submit or stop request into the events that follow from it."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import msgspec

from opsched.bus.errors import InvalidInput
from opsched.proto import subjects
from opsched.proto.access import NOT_ALLOWED, Access, acts_on_all, refusal
from opsched.proto.commands import (
    ApproveOperation,
    CopyOperation,
    RejectOperation,
    RestartOperation,
    ResumeOperation,
    StopOperation,
    SubmitOperation,
    TouchOperation,
)
from opsched.proto.events import (
    Event,
    OperationApproved,
    OperationRejected,
    OperationResumed,
    OperationSkipped,
    OperationStopped,
    OperationSubmitted,
    OperationTouched,
    StopRequested,
)
from opsched.proto.queue_stops import STATES, QueueStopSet, SetQueueStop
from opsched.proto.queues import not_covered
from opsched.proto.reasons import Ending, Reason, Refusal
from opsched.proto.reasons import message as reason_message
from opsched.proto.spec import SERVICE_KIND, EnvVar, OpSpec
from opsched.rules import connections
from opsched.rules.conditions import ConditionError
from opsched.rules.spec_size import SPEC_TOO_LARGE, too_large
from opsched.rules.templating import TemplateError
from opsched.services.admission import hooks
from opsched.services.admission.command_rate import CommandRate
from opsched.services.admission.model import agents
from opsched.services.admission.model.ordering import requester_of
from opsched.services.admission.model.queue_stops import QueueStops
from opsched.services.admission.model.queues import Book
from opsched.services.admission.model.records import requests_of
from opsched.services.admission.policies import service_ops
from opsched.services.admission.policies.priority import TOO_HIGH, PriorityTooHigh, UnknownPriorityClass, priority_of
from opsched.services.admission.policies.routing import route
from opsched.services.admission.rendering import INVALID_CONDITION, INVALID_TEMPLATE, rendered, routing_fields
from opsched.services.admission.state.admission_state import AdmissionState, Status
from opsched.services.admission.submit_rate import RATE_LIMITED, SubmitRate, requester
from opsched.services.runtime.sealing import UNSEALABLE_ENV, Sealer, Unsealable
from opsched.services.runtime.service import Context


@dataclass(frozen=True)
class OverRate:
    """The requester of the command in hand is over its command rate (``command_rate``): a token in ``wait_s``."""

    rate: CommandRate
    wait_s: float


def on_submit(cmd: SubmitOperation, ctx: Context, state: AdmissionState, book: Book,
              rate: SubmitRate | None = None, over: OverRate | None = None) -> Event | list[Event] | None:
    """``submitted`` (and ``skipped`` when its conditions are false), or ``rejected``: a rejected op keeps its
    name and queue on its ``rejected`` (views show them). ``over``: its requester is over the command rate, the
    op is rejected ``rate_limited`` before anything else is judged."""
    try:
        events = _on_submit(cmd, ctx, state, book, rate, over)
    except InvalidInput as exc:
        for event in exc.events:
            _named(event, cmd)
        raise
    sealer = Sealer.of(ctx.settings.env_key_file)
    for event in events if isinstance(events, list) else [events] if events is not None else []:
        _named(event, cmd)
        if isinstance(event, OperationSubmitted):  # checked and rendered as written; recorded sealed (``sealing``)
            event.spec = sealer.seal(event.spec)
    return events


def _named(event: Event, cmd: SubmitOperation) -> None:
    if isinstance(event, OperationRejected) and event.op_id == cmd.op_id:
        event.name = event.name or cmd.spec.name or ""
        event.queue = event.queue or cmd.spec.queue or ""
        event.request_id = event.request_id or cmd.request_id


def _on_submit(cmd: SubmitOperation, ctx: Context, state: AdmissionState, book: Book,
               rate: SubmitRate | None, over: OverRate | None) -> Event | list[Event] | None:
    if not subjects.valid_token(cmd.op_id):
        raise InvalidInput(Refusal.INVALID_OP_ID, f"op id {cmd.op_id!r} must be lowercase letters, digits and dashes")
    if cmd.op_id in state.ops or cmd.op_id in state.fold.gone:
        ctx.log.info("duplicate_submit_ignored")
        return None
    now = ctx.clock.now()
    if over is not None:  # over the command rate: refused at once, its spec not even looked at
        raise _invalid(cmd.op_id, now, RATE_LIMITED, over.rate.refusal(requester(cmd, ctx.subject), over.wait_s, now))
    refused = refusal(subjects.requester_of(ctx.subject), cmd.spec.project, book.config.access)
    if refused is not None:
        return OperationRejected(op_id=cmd.op_id, at=now, reason=NOT_ALLOWED, message=f"cannot submit: {refused}")
    if rate is not None and not cmd.hook_of:  # a hook's op: one of at most MAX_HOOKS per end of an op charged already
        _within_rate(cmd, ctx, rate)
    oversized = too_large(cmd.spec)
    if oversized is not None:
        return OperationRejected(op_id=cmd.op_id, at=now, reason=SPEC_TOO_LARGE, message=oversized)
    hook_condition = None
    if cmd.hook_of:
        cmd, hook_condition = _hook_followed(cmd, ctx, state, book)
    spec, condition = _routing_fields(cmd, now)
    condition = hook_condition if hook_condition is not None else condition
    events = _submitted(cmd, spec, ctx, state, book)
    if isinstance(events[0], OperationSubmitted):
        _check_templates(events[0], ctx, book)
        # counted for maxPendingPerUser from now, until the fold sees its submitted (``QueueManager.pending_of``)
        state.queues.accept(cmd.op_id, events[0].queue, requester_of(events[0].requested_by), now)
    if condition is False and isinstance(events[0], OperationSubmitted):
        events.append(OperationSkipped(op_id=cmd.op_id, at=now, reason=Ending.CONDITION_FALSE,
                                       message=f"conditions {(cmd.spec.conditions or '').strip()} is false"))
    return events[0] if len(events) == 1 else events


def _routing_fields(cmd: SubmitOperation, now: datetime) -> tuple[OpSpec, bool | None]:
    """``routing_fields`` of the op's spec; a condition or template that cannot be evaluated refuses it."""
    try:
        return routing_fields(cmd.spec, cmd.op_id, now)
    except ConditionError as exc:  # bad input: rejected, with an error event and a dead-letter copy
        raise _invalid(cmd.op_id, now, INVALID_CONDITION, f"cannot evaluate the op's conditions: {exc}") from None
    except TemplateError as exc:
        raise _invalid_template(cmd.op_id, now, exc) from None


def _hook_followed(cmd: SubmitOperation, ctx: Context, state: AdmissionState,
                   book: Book) -> tuple[SubmitOperation, bool | None]:
    """A hook's follow-up op (``hooks``): admission's alone to submit; evaluated in the finished op's context (a
    template or condition that fails rejects it), and its requester's, as the finished op was."""
    now = ctx.clock.now()
    if subjects.requester_of(ctx.subject) != ADMISSION:
        raise InvalidInput(NOT_ALLOWED, f"cannot submit {cmd.op_id} as a hook of {cmd.hook_of}: only admission "
                                        "submits a hook's op (when its op ends)", op_id=cmd.op_id)
    upstream = state.ops.get(cmd.hook_of)
    if upstream is None:
        raise _invalid(cmd.op_id, now, Reason.UNKNOWN_OP, f"hook of {cmd.hook_of}: that op is not held any more "
                                                         "(it left memory before its hook was submitted)")
    try:
        spec, condition = hooks.followed(_opened(cmd.spec, ctx, upstream.op_id), upstream,  # as written: sealed anew
                                         _opened(upstream.spec, ctx, upstream.op_id), book.config,
                                         namespace=ctx.settings.namespace)
    except ConditionError as exc:
        raise _invalid(cmd.op_id, now, INVALID_CONDITION,
                       f"cannot evaluate the hook's conditions over {upstream.op_id}: {exc}") from None
    except TemplateError as exc:
        raise _invalid(cmd.op_id, now, INVALID_TEMPLATE,
                       f"cannot render the hook's params over {upstream.op_id}: {exc}") from None
    return msgspec.structs.replace(cmd, spec=spec, requested_by=upstream.requested_by or ""), condition


def _within_rate(cmd: SubmitOperation, ctx: Context, rate: SubmitRate) -> None:
    """Charge the requester one submit, or refuse it (``submit_rate``): the op rejected ``rate_limited``."""
    who, now = requester(cmd, ctx.subject), ctx.clock.now()
    wait_s = rate.take(who, cmd.op_id, now)
    if wait_s is not None:
        raise _invalid(cmd.op_id, now, RATE_LIMITED, rate.refusal(who, wait_s, now))


def _submitted(cmd: SubmitOperation, spec: OpSpec, ctx: Context, state: AdmissionState, book: Book) -> list[Event]:
    now = ctx.clock.now()
    queue = route(spec, book)
    config = book.queues.get(queue)
    if config is None:
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=Refusal.UNKNOWN_QUEUE,
                                  message=f"unknown queue {queue!r}; known queues: {', '.join(book.names)}")]
    if spec.agent is not None and spec.agent == book.config.default_agent:
        spec = msgspec.structs.replace(spec, agent=agents.DEFAULT)  # the default agent, by its name
    runs_on = agents.agents_of(book, queue)
    if spec.agent is not None and spec.agent not in runs_on:
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=Refusal.AGENT_MISMATCH,
                                  message=f"queue {queue} runs on {', '.join(sorted(map(agents.named, runs_on)))}, "
                                          f"not on agent {spec.agent} (the file's queue {spec.agent}/{queue})")]
    request = requests_of(spec)[1]
    uncovered = not_covered(config, request)
    if uncovered:
        resource = uncovered[0]
        covered = ", ".join(q.resource for q in config.resources)
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=Reason.RESOURCE_NOT_COVERED,
                                  message=reason_message(Reason.RESOURCE_NOT_COVERED, queue=queue, resource=resource,
                                                         covered=covered, amount=request[resource]))]
    waiting = state.queues.waiting(queue)
    if config.max_queued is not None and waiting >= config.max_queued:
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=Refusal.QUEUE_FULL,
                                  message=f"queue {queue} already holds {waiting} waiting ops (maxQueued "
                                          f"{config.max_queued}); retry later or use another queue")]
    user = requester_of(cmd.requested_by)  # as the fold counts it: the submitted event's requested_by
    cap, count = config.max_pending_per_user, state.queues.pending_of(queue, user, now)
    if cap and count >= cap:
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=Reason.USER_PENDING_CAP,
                                  message=reason_message(Reason.USER_PENDING_CAP, user=user, count=count, queue=queue,
                                                         cap=cap))]
    spec = service_ops.with_defaults(spec, config)  # recorded on its submitted: what it runs with
    try:
        priority = priority_of(spec, queue, book)
    except UnknownPriorityClass as exc:
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=Refusal.UNKNOWN_PRIORITY_CLASS, message=str(exc))]
    except PriorityTooHigh as exc:
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=TOO_HIGH, message=str(exc))]
    unusable = connections.resolve(spec, book.config, queue)[1]
    if unusable:
        return [OperationRejected(op_id=cmd.op_id, at=now, queue=queue, reason=Refusal.UNKNOWN_CONNECTION,
                                  message="; ".join(unusable))]
    return [OperationSubmitted(op_id=cmd.op_id, at=now, spec=spec, queue=queue, submitted_at=now, priority=priority,
                               requested_by=cmd.requested_by or None, request_id=cmd.request_id)]


def _check_templates(e: OperationSubmitted, ctx: Context, book: Book) -> None:
    """Render every container once with the op's real globals: an op that can't render is rejected."""
    try:
        rendered(e.op_id, e.spec, e.queue, book.config, namespace=ctx.settings.namespace, created_at=e.submitted_at,
                 requested_by=e.requested_by)
    except TemplateError as exc:
        raise _invalid_template(e.op_id, e.at, exc) from None


def _invalid_template(op_id: str, now, exc: TemplateError) -> InvalidInput:
    return _invalid(op_id, now, INVALID_TEMPLATE, f"cannot render the op's templates: {exc}")


def _invalid(op_id: str, now, reason: str, message: str) -> InvalidInput:
    rejected = OperationRejected(op_id=op_id, at=now, reason=reason, message=message)
    return InvalidInput(reason, message, op_id=op_id, events=[rejected])


ALREADY_ENDED = Refusal.ALREADY_ENDED  # a stop, approve or reject of an op that has ended: refused
ALREADY_APPROVED = Refusal.ALREADY_APPROVED  # an approve of an op approved before: nothing to do (its sender exits 0)
ALREADY_STOPPING = Refusal.ALREADY_STOPPING  # a stop of an attempt whose stop was requested before: nothing to do


def on_approve(cmd: ApproveOperation, ctx: Context, state: AdmissionState) -> Event | None:
    """``approved``; refused (an error event its sender reads) when the op is unknown or has ended, and
    ``already_approved`` when it was approved before (nothing to do)."""
    op = _acting_on("approve", cmd.op_id, state)
    if op.approved or _answered_another(op, "approve", cmd.request_id):
        raise InvalidInput(ALREADY_APPROVED, f"nothing to do: {op.op_id} is already approved", op_id=op.op_id)
    return OperationApproved(op_id=op.op_id, at=ctx.clock.now(), attempt=op.attempt,
                             approved_by=cmd.requested_by, comment=cmd.comment, request_id=cmd.request_id)


NOT_ON_HOLD = Refusal.NOT_ON_HOLD  # a reject of an op not held for approval: refused (stop it instead)


def on_reject(cmd: RejectOperation, ctx: Context, state: AdmissionState, book: Book | None = None) -> Event | None:
    """``rejected``; refused (``not_on_hold``) unless the op is held for approval, or, for an admin (a service, an
    open server's ``anonymous``), still pending its gates: an approver rejects only what waits for its approval."""
    op = _acting_on("reject", cmd.op_id, state)
    if op.status not in (Status.ON_HOLD, Status.PENDING):
        raise InvalidInput(NOT_ON_HOLD, f"cannot reject {op.op_id}: it is {op.status.label}, not on hold; "
                                        f"use stop", op_id=op.op_id)
    user = subjects.requester_of(ctx.subject)
    if op.status != Status.ON_HOLD and not acts_on_all(user, book.config.access if book else Access()):
        raise InvalidInput(NOT_ON_HOLD, f"cannot reject {op.op_id}: it is {op.status.label}, not held for approval; "
                                        f"user {user!r} may reject only ops on hold for approval (access.admins "
                                        f"may reject any op not yet queued)", op_id=op.op_id)
    if _answered_another(op, "reject", cmd.request_id):
        raise InvalidInput(ALREADY_ENDED, f"cannot reject {op.op_id}: it was rejected already", op_id=op.op_id)
    who = f" by {cmd.requested_by}" if cmd.requested_by else ""
    return OperationRejected(op_id=op.op_id, at=ctx.clock.now(), attempt=op.attempt, reason=Refusal.APPROVAL_REJECTED,
                             message=f"rejected{who}" + (f": {cmd.comment}" if cmd.comment else ""),
                             request_id=cmd.request_id)


def _answered_another(op, verb: str, request_id: str) -> bool:
    """Whether another request to ``verb`` this attempt was answered already (its answer perhaps not folded back
    yet: the same answer again would be a duplicate JetStream drops, and its sender would hear nothing); else
    this request is noted as answered. The same request again (a redelivery) is answered again."""
    key = f"{verb}.{op.attempt}"
    if op.history.answered.get(key, request_id) != request_id:
        return True
    op.history.answered[key] = request_id
    return False


def _acting_on(verb: str, op_id: str, state: AdmissionState):
    """The op a stop, approve or reject acts on; refused when it is unknown (``unknown_op``) or has ended
    (``already_ended``, also for an op that left memory)."""
    gone = state.fold.gone.get(op_id) if op_id not in state.ops else None
    if gone is not None:
        raise InvalidInput(ALREADY_ENDED, f"cannot {verb} {op_id}: it already {gone.label} (and left memory after "
                                          f"its retention ttl)", op_id=op_id)
    op = state.ops.get(op_id)
    if op is None:
        raise InvalidInput(Reason.UNKNOWN_OP, f"cannot {verb} {op_id!r}: {reason_message(Reason.UNKNOWN_OP)}",
                           op_id=op_id)
    if op.status.terminal:
        ended = f" ({op.reason})" if op.reason and op.reason != op.status.label else ""
        raise InvalidInput(ALREADY_ENDED, f"cannot {verb} {op_id}: it already {op.status.label}{ended}", op_id=op_id)
    return op


def check_owner(verb: str, op_id: str, ctx: Context, state: AdmissionState, book: Book) -> None:
    """The requester (the subject's user) may act on the op (``proto.access``: its own op, or one of its projects'
    once projects are listed; an admin on all), else ``not_allowed``:
    an error event and a dead letter, the op unaffected. An unknown op passes: its handler says so."""
    op = state.ops.get(op_id)
    refused = op and refusal(subjects.requester_of(ctx.subject), op.spec.project, book.config.access,
                             owner=op.requested_by or "")
    if refused:
        raise InvalidInput(NOT_ALLOWED, f"cannot {verb} {op_id}: {refused}", op_id=op_id)


def _known(op_id: str, state: AdmissionState):
    op = state.ops.get(op_id)
    if op is None:
        gone = state.fold.gone.get(op_id)
        left = f" (it {gone.label} and left memory after its retention ttl)" if gone is not None else ""
        raise InvalidInput(Reason.UNKNOWN_OP, f"{reason_message(Reason.UNKNOWN_OP)} {op_id!r}{left}", op_id=op_id)
    return op


def on_stop(cmd: StopOperation, ctx: Context, state: AdmissionState) -> Event | None:
    """``stop_requested`` (its pods deleted by the dispatcher, then ``stopped``) or, holding no pod, ``stopped``;
    refused when the op is unknown or has ended; ``already_stopping`` when this attempt's stop was requested."""
    op = _acting_on("stop", cmd.op_id, state)
    now = ctx.clock.now()
    folded = op.history.stop_requested == op.attempt and f"stop.{op.attempt}" not in op.history.answered  # another leader's
    if folded or _answered_another(op, "stop", cmd.request_id):
        raise InvalidInput(ALREADY_STOPPING, f"nothing to do: a stop of {op.op_id} (attempt {op.attempt}) was "
                                             f"requested already", op_id=op.op_id)
    if op.status.active and op.pod_name and op.namespace:
        return StopRequested(op_id=op.op_id, at=now, attempt=op.attempt, pod_name=op.pod_name,
                             namespace=op.namespace, reason=cmd.reason, agent=op.agent, request_id=cmd.request_id)
    return OperationStopped(op_id=op.op_id, at=now, attempt=op.attempt, reason=Ending.STOPPED, message=cmd.reason,
                            request_id=cmd.request_id)


NOT_A_RUNNING_SERVICE = Refusal.NOT_A_RUNNING_SERVICE


def on_touch(cmd: TouchOperation, ctx: Context, state: AdmissionState) -> Event:
    """``touched``: a running service was used, so its culling idle time starts again (the dispatcher, which culls,
    folds it). Refused when the op is unknown or has ended, and (``not_a_running_service``) when it is not a service
    or not running yet."""
    op = _acting_on("touch", cmd.op_id, state)
    if op.spec.run_kind != SERVICE_KIND:
        raise InvalidInput(NOT_A_RUNNING_SERVICE, f"cannot touch {op.op_id}: it is a {op.spec.run_kind}, not a "
                                                  f"service (touch keeps a running service from being culled)",
                           op_id=op.op_id)
    if op.status != Status.RUNNING:
        raise InvalidInput(NOT_A_RUNNING_SERVICE, f"cannot touch {op.op_id}: the service is {op.status.label}, not "
                                                  "running (its idle time counts from when it runs)", op_id=op.op_id)
    return OperationTouched(op_id=op.op_id, at=ctx.clock.now(), attempt=op.attempt, touched_by=cmd.requested_by,
                            request_id=cmd.request_id)


COPY_ENV = "OPSCHED_COPY_FROM"  # a copy's container learns which op's outputs to start from
RESUMABLE = (Status.STOPPED, Status.FAILED, Status.TIMED_OUT)
ADMISSION = "admission"  # the NATS user admission publishes as (``proto.permissions``): it alone submits hooks' ops


def on_rerun(cmd: RestartOperation | CopyOperation, ctx: Context, state: AdmissionState,
             book: Book, rate: SubmitRate | None = None, over: OverRate | None = None) -> Event | list[Event] | None:
    """Restart or copy: a new op from the original's spec (params overridden), linked to it."""
    original = _known(cmd.op_id, state)
    relation = "copy" if isinstance(cmd, CopyOperation) else "restart"
    spec = _opened(original.spec, ctx, original.op_id)  # sealed again as it is submitted
    spec = msgspec.structs.replace(spec, params={**spec.params, **cmd.params})
    if relation == "copy":
        env = [e for e in spec.container.env if e.name != COPY_ENV] + [EnvVar(name=COPY_ENV, value=original.op_id)]
        spec = msgspec.structs.replace(spec, inputs={**spec.inputs, "copy_from": original.op_id},
                                       container=msgspec.structs.replace(spec.container, env=env))
    submit = SubmitOperation(op_id=cmd.new_op_id, spec=spec, requested_at=cmd.requested_at,
                             requested_by=cmd.requested_by, request_id=cmd.request_id)
    events = on_submit(submit, ctx, state, book, rate, over)
    if events is None:  # the new op id names an op already: nothing new was made
        raise InvalidInput(Refusal.DUPLICATE_OP_ID, f"cannot {relation} {original.op_id} as {cmd.new_op_id}: an op "
                                              f"{cmd.new_op_id} exists already; choose another id", op_id=cmd.op_id)
    for event in events if isinstance(events, list) else [events]:
        if isinstance(event, OperationSubmitted):
            event.original_op_id, event.relation = original.op_id, relation
    return events


def on_resume(cmd: ResumeOperation, ctx: Context, state: AdmissionState, book: Book) -> Event | None:
    op = _known(cmd.op_id, state)
    if op.status not in RESUMABLE:
        raise InvalidInput(Refusal.NOT_RESUMABLE, f"cannot resume {op.op_id}: it is {op.status.name.lower()}; only "
                                            f"stopped, failed or timed-out ops resume", op_id=op.op_id)
    spec = msgspec.structs.replace(op.spec, params={**op.spec.params, **cmd.params})
    oversized = too_large(spec)  # as recorded (sealed): what the event holds
    if oversized is not None:
        raise InvalidInput(SPEC_TOO_LARGE, f"cannot resume {op.op_id} with these params: {oversized}", op_id=op.op_id)
    try:
        rendered(op.op_id, _opened(spec, ctx, op.op_id), op.queue, book.config,
                 namespace=ctx.settings.namespace, created_at=op.submitted_at, requested_by=op.requested_by)
    except TemplateError as exc:
        raise InvalidInput(INVALID_TEMPLATE, f"cannot resume {op.op_id} with these params: {exc}",
                           op_id=op.op_id) from None
    return OperationResumed(op_id=op.op_id, at=ctx.clock.now(), attempt=op.attempt + 1, params=cmd.params,
                            resumed_by=cmd.requested_by, request_id=cmd.request_id)


def _opened(spec: OpSpec, ctx: Context, op_id: str) -> OpSpec:
    """``spec`` with its env values as written (``sealing``); one this admission cannot open is bad input."""
    try:
        return Sealer.of(ctx.settings.env_key_file).unseal(spec)
    except Unsealable as exc:
        raise InvalidInput(UNSEALABLE_ENV, f"cannot use {op_id}'s spec: {exc}", op_id=op_id) from None


def on_set_queue_stop(cmd: SetQueueStop, stops: QueueStops, book: Book, now: datetime) -> QueueStopSet:
    """The answer to ``set_queue_stop`` (``model.queue_stops``), or ``InvalidInput``: a hold or drain of a queue the
    configuration does not have (a resume may clear a stale state), or a queue already so (``queue_unchanged``:
    nothing to do)."""
    if not subjects.valid_token(cmd.queue):
        raise InvalidInput(Refusal.UNKNOWN_QUEUE, f"{cmd.queue!r} is not a queue name")
    if cmd.stop_policy != "None" and cmd.queue not in book.queues:
        raise InvalidInput(Refusal.UNKNOWN_QUEUE, f"queue {cmd.queue!r} is not configured; queues: "
                                                  f"{', '.join(book.names) or '(none)'}")
    if stops.policy(cmd.queue) == cmd.stop_policy:
        raise InvalidInput(Refusal.QUEUE_UNCHANGED, f"queue {cmd.queue} is {STATES[cmd.stop_policy]} already")
    return QueueStopSet(queue=cmd.queue, stop_policy=cmd.stop_policy, at=now, by=cmd.requested_by,
                        comment=cmd.comment, request_id=cmd.request_id)
