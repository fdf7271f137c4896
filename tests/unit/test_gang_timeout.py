"""Gangs: when a gang has waited too long for all its pods to run, and how long it backs off."""
from __future__ import annotations

import pytest

from opsched.proto.events import OperationEvicted
from opsched.services.dispatcher.gang import GANG_TIMEOUT, gang_backoff, timed_out
from tests.builders import case, case_name, t
from tests.unit.gang_pods import PREEMPTED_BY, SETTINGS, TIMEOUT_ANN, gang, pod

# ---- the gang timeout -------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a gang not all running after the timeout is evicted", views=gang("Running", "Running", "Pending"),
         at=120, evicted=True),
    case("a gang just under the timeout waits", views=gang("Running", "Running", "Pending"), at=119.9,
         evicted=False),
    case("a gang all running is never evicted", views=gang("Running", "Running", "Running"), at=1000,
         evicted=False),
    case("a single pod is never a gang", views=gang("Pending"), at=1000, evicted=False),
    case("a gang with a failed pod is left to the failure", views=gang("Running", "Failed", "Pending"), at=1000,
         evicted=False),
    case("a gang being preempted is left to the preemption",
         views=gang("Running", "Pending", annotations=PREEMPTED_BY), at=1000, evicted=False),
    case("a gang being deleted is left to whoever deletes it",
         views=gang("Running", "Pending", deleting=True), at=1000, evicted=False),
    case("a gang annotated evicted but not yet deleted (a crash in between) is evicted again",
         views=gang("Running", "Pending", annotations=TIMEOUT_ANN), at=1000, evicted=True),
    case("a gang whose main pod is not there yet (it waits for the others) is timed from its first pod",
         views=gang("Running", "Pending", "Pending")[1:], at=120, evicted=True),
    case("... and waits while under the timeout", views=gang("Running", "Pending", "Pending")[1:], at=119.9,
         evicted=False),
], ids=case_name)
def test_gang_timeout_decision(c):
    event = timed_out(c.views, t(c.at), SETTINGS)
    assert (event is not None) == c.evicted
    if event is not None:
        assert event.reason == GANG_TIMEOUT and event.at == t(c.at)


def test_the_timeout_counts_from_the_main_pods_creation_and_says_how_many_run():
    views = [pod("main", created=t(0)), pod("worker-0", created=t(50)), pod("worker-1", "Pending", created=t(50))]
    event = timed_out(views, t(120), SETTINGS)
    assert event == OperationEvicted(op_id="g", at=t(120), attempt=0, reason=GANG_TIMEOUT,
                                     message="2/3 pods running after 120s", retry_after_s=10.0)


@pytest.mark.parametrize("c", [
    case("the first attempt waits the base", attempt=0, wait=10),
    case("the second waits twice as long", attempt=1, wait=20),
    case("the fourth waits eight times the base", attempt=3, wait=80),
    case("the backoff is capped", attempt=5, wait=300),
    case("a very late attempt is capped too", attempt=40, wait=300),
], ids=case_name)
def test_backoff_grows_with_the_attempt_and_is_capped(c):
    assert gang_backoff(c.attempt, SETTINGS) == c.wait
    views = [pod("main", attempt=c.attempt), pod("worker-0", "Pending", attempt=c.attempt)]
    assert timed_out(views, t(500), SETTINGS).retry_after_s == c.wait


@pytest.mark.parametrize("c", [
    case("every other pod runs and the main pod was never seen: due", views=gang("Running", "Running", "Running")[1:],
         due=True),
    case("another pod still pending: not yet", views=gang("Running", "Running", "Pending")[1:], due=False),
    case("the main pod is there: nothing to start", views=gang("Pending", "Running", "Running"), due=False),
    case("a gang being released: never", views=gang("Running", "Running", "Running", annotations=PREEMPTED_BY)[1:],
         due=False),
    case("a gang being deleted: never", views=gang("Running", "Running", "Running", deleting=True)[1:], due=False),
], ids=case_name)
def test_a_main_pod_that_waits_is_due_once_every_other_pod_runs(c):
    from opsched.services.dispatcher.gang import main_due

    assert main_due(c.views) == c.due


# ---- a gang waiting for new nodes of its pool ---------------------------------------------------------

POOL_ANN = {"opsched.io/pool": "a100", "opsched.io/provisioning-timeout-seconds": "600"}


def awaiting_gang(*bound: bool) -> list:
    """A gang of 3 admitted onto new nodes of pool a100: the main pod Running, the workers bound or not."""
    import dataclasses
    views = gang("Running", "Pending", "Pending", annotations=POOL_ANN)
    return [views[0]] + [dataclasses.replace(v, node="a100-1" if b else None) for v, b in zip(views[1:], bound)]


def test_a_gang_waiting_for_new_nodes_is_not_evicted_at_the_gang_timeout():
    assert timed_out(awaiting_gang(True, False), t(120), SETTINGS) is None
    assert timed_out(awaiting_gang(True, False), t(599.9), SETTINGS) is None


def test_a_gang_with_an_unbound_pod_past_the_provisioning_timeout_is_evicted_node_not_provisioned():
    event = timed_out(awaiting_gang(True, False), t(600), SETTINGS)
    assert event == OperationEvicted(
        op_id="g", at=t(600), attempt=0, reason="node_not_provisioned", retry_after_s=10.0,
        message="no node of pool a100 came within 600s (provisioningTimeoutSeconds): 2/3 pods on a node")


def test_a_gang_on_its_nodes_but_not_all_running_by_then_is_a_gang_timeout():
    event = timed_out(awaiting_gang(True, True), t(600), SETTINGS)
    assert event is not None and event.reason == GANG_TIMEOUT and event.message == "1/3 pods running after 600s"
