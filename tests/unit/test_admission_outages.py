"""Admission and the failures that are not an op's own: a dispatch waiting out an API-server outage shows in
``why``; a service that gave up on a message an op waited on (``handler_failed``) ends the op, or retries
its attempt, and its quota is released: no op stays non-terminal holding quota."""
from __future__ import annotations

import pytest

from opsched.proto.events import DispatchDelayed, HandlerFailed, OperationAdmitted, OperationRejected, RetryScheduled
from opsched.proto.reasons import Failure, Reason
from opsched.rules.failures import MAX_INFRASTRUCTURE_RETRIES
from opsched.services.admission import queries
from opsched.services.admission.state.admission_state import AdmissionState, Status
from tests.builders import admitted, case, case_name, dispatched, op, running, submitted, t
from tests.unit.admission_scenarios import decide, fold, queues, ready

BOOK = queues(("default", 10))


def gave_up(op_id: str, failed_type: str, *, attempt: int = 0, service: str = "dispatcher") -> HandlerFailed:
    return HandlerFailed(op_id=op_id, at=t(5), attempt=attempt, service=service, subject=f"ops.{failed_type}.{op_id}",
                         failed_type=failed_type, error="gave up after 5 deliveries: KeyError('x')")


def admitted_op(op_id: str = "a", *, retries: int = 0) -> list:
    spec = op(op_id).max_retries(retries).build()
    return [submitted(spec, op_id=op_id), *ready(op_id)[1:], admitted(submitted(spec, op_id=op_id))]


def holds_no_quota(state: AdmissionState, op_id: str) -> bool:
    return not state.ops[op_id].holds_quota and op_id not in state.usage.active.get("default", ())


def rejection(decisions: list, op_id: str) -> OperationRejected:
    [event] = [d for d in decisions if isinstance(d, OperationRejected) and d.op_id == op_id]
    return event


@pytest.mark.parametrize("c", [
    case("the cost service gave up on a pending op's submitted", events=[submitted(op("a").build(), op_id="a")],
         failure=gave_up("a", "submitted", service="cost")),
    case("the cache gave up on a queued op's submitted: it is rejected, never admitted", events=ready("a"),
         failure=gave_up("a", "submitted", service="cache")),
    case("the dispatcher gave up on a running op's stop", events=[*admitted_op(), dispatched("a"), running("a")],
         failure=gave_up("a", "stop_requested")),
], ids=case_name)
def test_an_op_a_service_gave_up_on_ends_rejected_with_the_reason_and_frees_its_quota(c):
    state = fold(*c.events, c.failure)
    decisions = decide(state, BOOK)
    ended = rejection(decisions, "a")
    assert ended.reason == Reason.HANDLER_FAILED and "KeyError" in ended.message and c.failure.service in ended.message
    assert not any(isinstance(d, OperationAdmitted) for d in decisions)
    assert state.ops["a"].status == Status.REJECTED and holds_no_quota(state, "a")
    assert state.queues.waiting("default") == 0


def test_a_dispatch_a_service_gave_up_on_is_retried_as_an_infrastructure_failure():
    state = fold(*admitted_op(retries=0), gave_up("a", "admitted"))
    assert state.ops["a"].status == Status.RETRYING and holds_no_quota(state, "a")
    [retry] = [d for d in decide(state, BOOK) if isinstance(d, RetryScheduled)]
    assert retry.reason == Failure.HANDLER_GAVE_UP and retry.retries_used == 0  # not one of the op's own retries
    assert state.ops["a"].attempt == 1 and state.ops["a"].status == Status.QUEUED


def test_a_dispatch_given_up_on_once_too_often_ends_the_op():
    state = fold(*admitted_op())
    state.ops["a"].infra_failures = MAX_INFRASTRUCTURE_RETRIES
    fold(gave_up("a", "admitted"), state=state)
    assert rejection(decide(state, BOOK), "a").reason == Reason.HANDLER_FAILED
    assert state.ops["a"].status == Status.REJECTED and holds_no_quota(state, "a")


@pytest.mark.parametrize("c", [
    case("bookkeeping: the cost ledger gave up on running", failure=gave_up("a", "running", service="cost")),
    case("news of an attempt that is over", failure=gave_up("a", "admitted", attempt=7)),
], ids=case_name)
def test_a_failure_the_op_does_not_wait_on_leaves_it_alone(c):
    state = fold(*admitted_op(), dispatched("a"), running("a"))
    assert state.apply(c.failure) is False
    assert state.ops["a"].status == Status.RUNNING and state.ops["a"].holds_quota


def test_an_end_whose_publish_failed_is_published_again_by_the_next_cycle():
    state = fold(*ready("a"), gave_up("a", "submitted", service="cost"))
    first = rejection(decide(state, BOOK), "a")
    state.fold.unassume("a", t(6), OperationRejected)  # as when the publish fails
    again = decide(state, BOOK, now=t(7))
    assert rejection(again, "a").message == first.message and not any(isinstance(d, OperationAdmitted) for d in again)


def test_why_says_an_admitted_op_waits_for_the_kubernetes_api_until_it_is_dispatched():
    state = fold(*admitted_op(), DispatchDelayed(op_id="a", at=t(3), message="503 Service Unavailable"))
    [reason] = queries.why(state, BOOK, "a").reasons
    assert reason.code == Reason.WAITING_FOR_DEPENDENCY
    assert "waiting for the Kubernetes API since" in reason.message and "503" in reason.message
    fold(dispatched("a"), state=state)
    assert queries.why(state, BOOK, "a").reasons == []
