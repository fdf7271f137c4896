"""The dispatcher's reconciler: the table of attempts folded from the op stream, the pure decision
(attempts + listed pods + time -> repairs), and the loop acting on it with a fake kube and a fake clock."""
from __future__ import annotations

import asyncio

import pytest

from opsched.bus.logging import get as get_log
from opsched.proto.events import (
    OperationFailed,
    OperationPreempted,
    OperationRunning,
    OperationStopped,
    PreemptRequested,
    RetryScheduled,
    StopRequested,
)
from opsched.proto.reasons import Reason
from opsched.services.dispatcher.attempts import Attempts, Stage
from opsched.services.dispatcher.gang import DELETED_REASON
from opsched.services.dispatcher.podstatus import view_of
from opsched.services.dispatcher.reconciler import ORPHANED, Dispatch, Reconciler, Release, Report, decide
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, case, case_name, dispatched, op, t
from tests.builders.clock import FakeClock
from tests.unit.gang_pods import gang, pod, v1pod

SPEC = op("train").gpus(1).build()
NOW, GRACE = t(60), 30.0


def adm(attempt: int = 0, at=T0):
    return admitted(SPEC, op_id="g", attempt=attempt, at=at)


def running(attempt: int = 0):
    return OperationRunning(op_id="g", at=T0, attempt=attempt, pod_name=f"op-g-{attempt}")


def failed(attempt: int = 0):
    return OperationFailed(op_id="g", at=T0, attempt=attempt, reason="Error")


def stop_requested(attempt: int = 0):
    return StopRequested(op_id="g", at=T0, attempt=attempt, pod_name=f"op-g-{attempt}", namespace="ns")


def preempted(attempt: int = 0):
    return OperationPreempted(op_id="g", at=T0, attempt=attempt, preemptor="urgent", reason="within_queue")


def fold(*events) -> Attempts:
    table = Attempts()
    for event in events:
        table.apply(event)
    return table


def described(action) -> str:
    if isinstance(action, Dispatch):
        return f"dispatch {action.attempt.op_id}/{action.attempt.attempt}"
    if isinstance(action, Report):
        return f"report {type(action.event).__name__} {action.event.op_id}/{action.event.attempt}"
    assert isinstance(action, Release)
    return f"release {','.join(v.name for v in action.pods)}"


ONE_POD = dict(size=1)


@pytest.mark.parametrize("c", [
    case("an attempt admitted within the grace is left to its handler",
         events=[adm(at=t(45))], pods=[], expect=[]),
    case("an attempt admitted longer ago than the grace and never dispatched is dispatched again",
         events=[adm()], pods=[], expect=["dispatch g/0"]),
    case("an attempt never dispatched whose pod exists is dispatched again too (409 is success)",
         events=[adm()], pods=[pod(phase="Pending", **ONE_POD)], expect=["dispatch g/0"]),
    case("a pod running while the stream says dispatched is reported running",
         events=[adm(), dispatched("g")], pods=[pod(**ONE_POD)], expect=["report OperationRunning g/0"]),
    case("a pod that succeeded while the stream says running is reported succeeded",
         events=[adm(), dispatched("g"), running()], pods=[pod(phase="Succeeded", **ONE_POD)],
         expect=["report OperationSucceeded g/0"]),
    case("a pod that failed while nobody watched is reported failed",
         events=[adm(), dispatched("g")], pods=[pod(phase="Failed", **ONE_POD)],
         expect=["report OperationFailed g/0"]),
    case("a pod running as the stream says needs nothing",
         events=[adm(), dispatched("g"), running()], pods=[pod(**ONE_POD)], expect=[]),
    case("a gang with a pod still pending is not running yet",
         events=[adm(), dispatched("g")], pods=gang("Running", "Pending"), expect=[]),
    case("a dispatched attempt without pods is only suspected in the first round",
         events=[adm(), dispatched("g")], pods=[], expect=[], vanishing_after={("g", 0)}),
    case("a dispatched attempt still without pods a round later is reported failed",
         events=[adm(), dispatched("g")], pods=[], vanishing={("g", 0)}, expect=["report OperationFailed g/0"]),
    case("a suspect whose pods are back is no longer suspected",
         events=[adm(), dispatched("g"), running()], pods=[pod(**ONE_POD)], vanishing={("g", 0)}, expect=[]),
    case("a running pod of an ended attempt is released",
         events=[adm(), dispatched("g"), failed()], pods=[pod(**ONE_POD)], expect=["release op-g-0"]),
    case("a finished pod of an ended attempt is left to its ttl",
         events=[adm(), dispatched("g"), failed()], pods=[pod(phase="Succeeded", **ONE_POD)], expect=[]),
    case("a pod being deleted is not released again",
         events=[adm(), failed()], pods=[pod(deleting=True, **ONE_POD)], expect=[]),
    case("a running pod of an attempt superseded by a later one is released",
         events=[adm(), dispatched("g"), preempted(), adm(attempt=1, at=t(50))], pods=[pod(**ONE_POD)],
         expect=["release op-g-0"]),
    case("the pods of an attempt being stopped are left to the stop handler",
         events=[adm(), dispatched("g"), stop_requested()], pods=[pod(**ONE_POD)], expect=[]),
    case("an attempt being stopped is never dispatched again",
         events=[adm(), stop_requested()], pods=[], expect=[]),
    case("a pod no op on the stream knows is released once older than the grace",
         events=[], pods=[pod(**ONE_POD)], expect=["release op-g-0"]),
    case("a pod created within the grace for an attempt not folded yet is left (the fold may lag)",
         events=[adm()], pods=[pod(attempt=1, created=t(45), **ONE_POD)], expect=["dispatch g/0"]),
], ids=case_name)
def test_what_the_reconciler_repairs(c):
    table = {a.op_id: a for a in fold(*c.events).snapshot()}
    plan = decide(table, c.pods, NOW, GRACE, frozenset(c.args.get("vanishing", ())))
    assert [described(a) for a in plan.actions] == c.expect
    if "vanishing_after" in c.args:
        assert plan.vanishing == c.vanishing_after


def test_an_attempt_whose_pods_vanished_is_reported_as_a_deleted_pod():
    table = {a.op_id: a for a in fold(adm(), dispatched("g")).snapshot()}
    [report] = decide(table, [], NOW, GRACE, frozenset({("g", 0)})).actions
    assert isinstance(report, Report) and isinstance(report.event, OperationFailed)
    assert (report.event.reason, report.event.pod_name) == (DELETED_REASON, "op-g-0")


# ---- the table of attempts ----------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("an admitted attempt is wanted and live", events=[adm()], wanted=True, stage=Stage.ADMITTED),
    case("a stop asked before a redelivered admitted wins", events=[adm(), stop_requested(), adm()],
         wanted=False, stage=Stage.RELEASING),
    case("a preemption asked makes the attempt unwanted", events=[adm(), PreemptRequested(
        op_id="g", at=T0, attempt=0, preemptor="u", reason="r", namespace="ns", pod_names=["op-g-0"])],
         wanted=False, stage=Stage.RELEASING),
    case("a stopped attempt has ended", events=[adm(), OperationStopped(op_id="g", at=T0)], wanted=False,
         stage=Stage.ENDED),
    case("a late event of an earlier attempt changes nothing", events=[adm(), preempted(), adm(1), failed(0)],
         wanted=True, stage=Stage.ADMITTED, attempt=1),
    case("an attempt not folded yet is wanted (its event is the news)", events=[], wanted=True, stage=None),
], ids=case_name)
def test_which_attempts_are_wanted(c):
    table = fold(*c.events)
    attempt = c.args.get("attempt", 0)
    assert table.wanted(("g", attempt)) is c.wanted
    latest = table.get("g")
    assert (latest.stage if latest else None) == c.stage


def test_an_ended_attempt_forgets_its_spec_and_an_earlier_attempt_is_unwanted():
    table = fold(adm(), preempted(), adm(1), failed(1))
    assert table.get("g").admitted is None
    assert not table.wanted(("g", 0)) and not table.wanted(("g", 1))


def retry_scheduled(attempt: int = 0):
    return RetryScheduled(op_id="g", at=T0, attempt=attempt, retry_after_s=60.0, reason=Reason.HANDLER_FAILED,
                          retries_used=0)


@pytest.mark.parametrize("c", [
    case("an attempt a retry was scheduled for is over: the retry is a new attempt",
         events=[adm(), retry_scheduled()]),
    case("a stop of the retry not admitted yet ends the op: the attempt before it is not dispatched again",
         events=[adm(), retry_scheduled(), OperationStopped(op_id="g", at=T0, attempt=1)]),
    case("a stop of a later attempt ends the earlier one even if its retry_scheduled was not folded",
         events=[adm(), OperationStopped(op_id="g", at=T0, attempt=1)]),
], ids=case_name)
def test_an_attempt_followed_by_a_retry_or_a_later_stop_is_not_dispatched_again(c):
    table = fold(*c.events)
    assert not table.wanted(("g", 0))
    assert table.get("g").stage == Stage.ENDED and table.get("g").admitted is None
    plan = decide({a.op_id: a for a in table.snapshot()}, [], NOW, GRACE, frozenset())
    assert [described(a) for a in plan.actions] == []


def test_a_late_event_of_a_later_attempt_does_not_make_its_admitted_unwanted():
    table = fold(adm(), retry_scheduled(), adm(1))
    assert table.wanted(("g", 1)) and table.get("g").stage == Stage.ADMITTED


# ---- the loop, with a fake kube and a fake clock --------------------------------------------------------

class FakeKube:
    def __init__(self, pods) -> None:
        self.pods = pods
        self.lists = 0
        self.created: list[str] = []
        self.freed: list[tuple[list[str], dict]] = []
        self.published: list = []

    async def list_pods(self):
        self.lists += 1
        return [view for view in map(view_of, self.pods) if view is not None]

    async def redispatch(self, attempt):
        self.created.append(attempt.admitted.pod_name)
        return dispatched(attempt.op_id, attempt=attempt.attempt)

    async def free(self, views, annotations) -> None:
        self.freed.append(([v.name for v in views], annotations))

    async def publish(self, event) -> None:
        self.published.append(event)


def reconciler(table: Attempts, kube: FakeKube, clock: FakeClock) -> Reconciler:
    settings = Settings(reconcile_interval_s=30, reconcile_grace_s=GRACE)
    return Reconciler(table, kube.list_pods, kube.redispatch, kube.free, kube.publish, clock, settings,
                      get_log("test"))


async def test_a_round_dispatches_reports_and_releases():
    table = fold(adm(), admitted(SPEC, op_id="old", at=T0), failed_of("old"))
    kube = FakeKube([v1pod("op-old-0", "Running")])
    kube.pods[0].metadata.labels["opsched.io/op-id"] = "old"
    kube.pods[0].metadata.labels["opsched.io/attempt"] = "0"
    await reconciler(table, kube, FakeClock(NOW)).reconcile()
    assert kube.created == ["op-g-0"]
    assert [type(e).__name__ for e in kube.published] == ["OperationDispatched"]
    assert kube.freed == [(["op-old-0"], {"opsched.io/evicted": ORPHANED})]


def failed_of(op_id: str):
    return OperationFailed(op_id=op_id, at=T0, attempt=0, reason="Error")


async def test_a_stop_folded_after_the_snapshot_wins_over_a_dispatch():
    table = fold(adm())
    kube = FakeKube([])

    async def list_then_stop():
        table.apply(stop_requested())  # the stop arrives while the pods are listed
        return []

    kube.list_pods = list_then_stop  # type: ignore[method-assign]
    await reconciler(table, kube, FakeClock(NOW)).reconcile()
    assert kube.created == [] and kube.published == []


async def test_it_reconciles_at_start_and_every_interval_and_survives_an_unreachable_api():
    table, kube, clock = fold(), FakeKube([]), FakeClock(NOW)

    async def unreachable():
        kube.lists += 1
        raise ConnectionRefusedError("the API server is down")

    kube.list_pods = unreachable  # type: ignore[method-assign]
    stop = asyncio.Event()
    loop = asyncio.create_task(reconciler(table, kube, clock).run(stop))
    await _settle()
    assert kube.lists == 1
    clock.advance(29)
    await _settle()
    assert kube.lists == 1
    clock.advance(1)
    await _settle()
    assert kube.lists == 2
    stop.set()
    await asyncio.wait_for(loop, 1)


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)
