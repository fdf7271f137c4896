"""The client-side view of operations: folded from events, shown as a table."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto import codec
from opsched.proto.events import DispatchDelayed, ErrorRaised, Money
from opsched.ui.feed import timeline_entry
from opsched.view import OpsView, gpus_text, money_text, table
from tests.builders import (
    T0,
    admitted,
    cache_hit,
    case,
    case_name,
    cost_estimated,
    dispatched,
    failed,
    failure_final,
    gates_cleared,
    op,
    rejected,
    retry_scheduled,
    running,
    stop_requested,
    stopped,
    submitted,
    succeeded,
)

SPEC = op("train").queue("gpu-a").gpus(2).build()


def view_of(*events) -> OpsView:
    view = OpsView()
    for event in events:
        view.fold(event)
    return view


def row_of(*events):
    return view_of(*events).rows["op-1"]


SUBMITTED = submitted(SPEC, op_id="op-1")
ADMITTED = admitted(SUBMITTED, namespace="ml")


@pytest.mark.parametrize("c", [
    case("a submitted op is pending", events=[SUBMITTED], status="pending", terminal=False),
    case("an op waiting for its gates is still pending", events=[SUBMITTED, *gates_cleared()],
         status="pending", terminal=False),
    case("an admitted op", events=[SUBMITTED, ADMITTED], status="admitted", terminal=False),
    case("a dispatched op", events=[SUBMITTED, ADMITTED, dispatched()], status="dispatched", terminal=False),
    case("a running op", events=[SUBMITTED, ADMITTED, dispatched(), running()], status="running", terminal=False),
    case("a stop requested before it ran", events=[SUBMITTED, ADMITTED, stop_requested()],
         status="stopping", terminal=False),
    case("a succeeded op", events=[SUBMITTED, ADMITTED, running(), succeeded()], status="succeeded", terminal=True),
    case("a failed attempt waits for admission's decision", events=[SUBMITTED, ADMITTED, running(), failed()],
         status="attempt_failed", terminal=False),
    case("a failed attempt admission retries", events=[SUBMITTED, ADMITTED, running(), failed(), retry_scheduled()],
         status="retrying", terminal=False),
    case("a failed op: admission's final decision", events=[SUBMITTED, ADMITTED, running(), failed(), failure_final()],
         status="failed", terminal=True),
    case("the final decision alone ends it (its failed not seen)", events=[SUBMITTED, failure_final()],
         status="failed", terminal=True),
    case("a rejected op", events=[rejected()], status="rejected", terminal=True),
    case("a stopped op", events=[SUBMITTED, stopped()], status="stopped", terminal=True),
    case("a late running after success keeps it succeeded",
         events=[SUBMITTED, succeeded(), running()], status="succeeded", terminal=True),
    case("a late dispatched after running keeps it running",
         events=[SUBMITTED, running(), dispatched()], status="running", terminal=False),
    case("a late cost estimate after admission keeps it admitted",
         events=[SUBMITTED, ADMITTED, cost_estimated()], status="admitted", terminal=False),
    case("a terminal status is final even for another terminal event",
         events=[SUBMITTED, failed(), failure_final(), succeeded()], status="failed", terminal=True),
], ids=case_name)
def test_status(c):
    row = row_of(*c.events)
    assert (row.status, row.terminal) == (c.status, c.terminal)


def test_a_running_op_asked_to_stop_shows_stopping():
    assert row_of(SUBMITTED, ADMITTED, running(), stop_requested()).status == "stopping"


def test_an_admitted_op_whose_dispatch_waits_for_the_kubernetes_api_says_so_until_it_is_dispatched():
    delayed = DispatchDelayed(op_id="op-1", at=T0, dependency="kubernetes", message="connection refused")
    row = row_of(SUBMITTED, ADMITTED, delayed)
    assert row.status == "admitted" and not row.terminal
    assert row.reason == "waiting for the Kubernetes API since 12:00:00 (connection refused)"
    assert row_of(SUBMITTED, ADMITTED, delayed, dispatched(namespace="ml")).reason == "pod ml/op-op-1-0"


def test_the_row_shows_name_queue_gpus_and_cost():
    row = row_of(SUBMITTED, cost_estimated(amount=12.345))
    assert (row.name, row.queue, row.gpus, money_text(row.estimate)) == ("train", "gpu-a", 2, "12.35 USD")


def test_the_cost_of_an_admitted_op_is_its_estimate_on_the_flavor_it_was_admitted_to():
    on_t4 = msgspec.structs.replace(ADMITTED, estimate=0.7, pool="t4-pool")
    assert row_of(SUBMITTED, cost_estimated(amount=4.0), on_t4).estimate == Money(amount=0.7, currency="USD")
    older = row_of(SUBMITTED, cost_estimated(amount=4.0), ADMITTED)  # an older admitted: as estimated
    assert older.estimate == Money(amount=4.0, currency="USD")
    assert timeline_entry(on_t4)["detail"]["estimate"] == "0.70 (pool t4-pool)"


def test_gpus_of_another_vendor_name_the_vendor():
    spec = op().gpus(4, resource="amd.com/gpu").build()
    row = row_of(submitted(spec, op_id="op-1"))
    assert (row.gpus, row.accelerators, gpus_text(row.accelerators)) == (4, {"amd.com/gpu": 4.0}, "4xamd.com")


def test_an_op_without_gpus_shows_a_dash():
    row = row_of(submitted(op().cpu("1").build(), op_id="op-1"))
    assert (row.gpus, gpus_text(row.accelerators)) == (0, "-")


@pytest.mark.parametrize("c", [
    case("the node it runs on", events=[SUBMITTED, running(node="gpu-7")], node="gpu-7"),
    case("the node it finished on", events=[SUBMITTED, running(node=None), succeeded(node="gpu-8")], node="gpu-8"),
    case("no node before it runs", events=[SUBMITTED, ADMITTED], node=""),
], ids=case_name)
def test_node(c):
    assert row_of(*c.events).node == c.node


@pytest.mark.parametrize("c", [
    case("a failure shows reason and message",
         events=[SUBMITTED, failed(reason="OOMKilled", message="out of memory")], reason="OOMKilled: out of memory"),
    case("a failure without message shows the reason", events=[SUBMITTED, failed(reason="Error")], reason="Error"),
    case("a rejection shows why", events=[rejected(reason="unknown_queue", message="unknown queue 'x'")],
         reason="unknown_queue: unknown queue 'x'"),
    case("an admission shows the pod", events=[SUBMITTED, ADMITTED], reason="pod ml/op-op-1-0"),
    case("a cache hit names the original", events=[SUBMITTED, cache_hit(original="op-0")],
         reason="cache hit of op-0"),
    case("a success by cache says so", events=[SUBMITTED, succeeded(reason="cache_hit")], reason="cache_hit"),
    case("an ordinary success shows no reason", events=[SUBMITTED, succeeded()], reason=""),
    case("a stop shows its message", events=[SUBMITTED, stopped(message="no longer needed")],
         reason="no longer needed"),
], ids=case_name)
def test_reason(c):
    assert row_of(*c.events).reason == c.reason


def test_the_view_follows_admissions_decision_whatever_maxretries_says():
    """No rule of its own: an op with maxRetries 0 whose failure admission retried (an infrastructure failure, say)
    shows retrying; one with retries left that admission ended shows failed."""
    no_retries = submitted(op("a").max_retries(0).build(), op_id="op-1")
    assert row_of(no_retries, ADMITTED, failed(reason="Error"), retry_scheduled()).status == "retrying"
    many = submitted(op("a").max_retries(5).build(), op_id="op-1")
    final = failure_final(reason="PodRejected", message="PodRejected is never retried: retrying cannot help")
    row = row_of(many, ADMITTED, failed(reason="PodRejected", message="bad pod"), final)
    assert (row.status, row.terminal) == ("failed", True)
    assert row.reason == "PodRejected: bad pod; PodRejected is never retried: retrying cannot help"


def test_a_retried_op_whose_next_attempt_fails_for_good_ends_failed_at_that_attempt():
    row = row_of(SUBMITTED, ADMITTED, running(), failed(), retry_scheduled(),
                 admitted(SUBMITTED, attempt=1), running(attempt=1), failed(attempt=1),
                 failure_final(attempt=1, retries_used=1, max_retries=1))
    assert (row.status, row.attempt, row.terminal) == ("failed", 1, True)


def test_history_and_attempt_follow_the_events():
    row = row_of(SUBMITTED, ADMITTED, running(attempt=1))
    assert row.history == ["submitted", "admitted", "running"]
    assert row.attempt == 1


def test_errors_are_collected_and_an_error_for_no_op_makes_no_row():
    error = ErrorRaised(op_id="-", at=T0, service="admission", subject="cmd.submit._",
                        reason="malformed_message", message="bad")
    view = view_of(error)
    assert view.errors == [error] and view.rows == {}


def test_fold_bytes_decodes_and_ignores_garbage():
    view = OpsView()
    assert view.fold_bytes(codec.encode(SUBMITTED)).status == "pending"
    assert view.fold_bytes(b"{garbage") is None
    assert list(view.rows) == ["op-1"]


def test_the_table_has_a_header_and_one_aligned_line_per_row():
    from datetime import timedelta

    view = view_of(SUBMITTED, running(node="gpu-7"),
                   submitted(op("eval").build(), op_id="op-22"), failed("op-22", reason="Error"),
                   failure_final("op-22", message=""))
    lines = table(list(view.rows.values()), now=T0 + timedelta(minutes=3, seconds=12), width=200).splitlines()
    assert lines[0].split() == ["ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", "GPUS", "NODE", "EST.", "COST", "AGE",
                                "STARTED", "DURATION", "REASON"]
    started = T0.astimezone().strftime("%H:%M")
    assert lines[1].split() == ["op-1", "train", "gpu-a", "running", "0", "2", "gpu-7", "-", "3m12s", started,
                                "3m12s"]
    assert lines[2].split() == ["op-22", "eval", "default", "failed", "0", "-", "-", "-", "3m12s", "-", "-", "Error"]
    assert lines[0].index("STATUS") == lines[1].index("running") == lines[2].index("failed")


def test_a_budget_scope_s_rolled_up_spend_is_no_op_row():
    from datetime import datetime, timezone

    from opsched.proto.events import SpendRolled

    view = OpsView()
    rolled = SpendRolled(op_id="queue-0123456789abcdef0123", at=datetime(2026, 1, 1, tzinfo=timezone.utc),
                         scope="queue", name="default", through_seq=7)
    assert view.fold_bytes(codec.encode(rolled)) is None
    assert view.rows == {}


def test_a_submit_rejected_before_it_was_an_op_shows_its_name_and_queue_live_and_from_its_summary():
    from opsched.proto.events import OperationRejected
    from opsched.proto.summaries import OpSummary

    live = row_of(OperationRejected(op_id="op-1", at=T0, reason="unknown_queue", message="unknown queue 'x'",
                                    name="train", queue="x"))
    assert (live.name, live.queue, live.status) == ("train", "x", "rejected")
    # once its stray left the stream, its summary (written by admission's retention) says the same
    gone = OpsView().add_summary(OpSummary(op_id="op-1", status="rejected", name="train", queue="x",
                                           reason="unknown_queue", message="unknown queue 'x'"))
    assert (gone.name, gone.queue, gone.reason) == ("train", "x", "unknown_queue: unknown queue 'x'")
