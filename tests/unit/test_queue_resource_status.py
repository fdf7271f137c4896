"""What the dispatcher writes in a queue resource's status (``services.dispatcher.queue_resources``): the Applied
condition for each case, the counts of an OpsQueue, and a status written only when what it says changes (its
transition time kept while the condition's status stays)."""
from __future__ import annotations

from datetime import datetime, timezone

from opsched.proto.queries import FlavorUsage, QueueStatus
from opsched.rules.queue_resources import Assembly
from opsched.services.dispatcher.kobjects import CustomObject, ObjectMeta
from opsched.services.dispatcher.queue_resources import _differs, _stamped, status_of
from tests.builders import queues_configured

CONFIG = queues_configured("queues:\n  - name: default\n").config
NOW = datetime(2026, 11, 29, 3, 0, tzinfo=timezone.utc)


def obj(generation: int = 2, status: dict | None = None) -> CustomObject:
    return CustomObject(metadata=ObjectMeta(name="default", generation=generation), spec={}, status=status)


def condition(status: dict) -> dict:
    (only,) = status["conditions"]
    return only


def test_in_force_it_is_applied_at_its_generation():
    status = status_of(("OpsQueue", "default"), obj(), Assembly(config=CONFIG), True, "resources#abc", None)
    assert status == {"observedGeneration": 2, "conditions": [{
        "type": "Applied", "status": "True", "reason": "Applied", "message": "in force (resources#abc)",
        "observedGeneration": 2}]}


def test_sent_and_not_yet_in_force_it_is_pending():
    assert condition(status_of(("OpsQueue", "default"), obj(), Assembly(config=CONFIG), False, "command:admin#1", None))["reason"] \
        == "Pending"


def test_its_own_problems_make_it_invalid_saying_the_last_valid_configuration_stays():
    problems = ["spec.concurency: unknown field (misspelt? it would be ignored)"]
    said = condition(status_of(("OpsQueue", "default"), obj(), Assembly(config=None, problems={
        ("OpsQueue", "default"): problems}), False, "resources#abc", None))
    assert said["status"] == "False" and said["reason"] == "Invalid"
    assert said["message"] == problems[0] + " (the last valid queue configuration stays in force)"


def test_another_invalid_resource_blocks_a_change_but_not_what_is_in_force():
    assembly = Assembly(config=None, problems={("OpsFlavor", "a100"): ["spec.pool.maxNodes: ..."]})
    changed = condition(status_of(("OpsQueue", "default"), obj(3), assembly, False, "resources#abc", None))
    assert changed["reason"] == "Blocked" and "OpsFlavor/a100" in changed["message"]
    applied = {"conditions": [{"type": "Applied", "status": "True", "reason": "Applied", "message": "in force (x)",
                               "observedGeneration": 3, "lastTransitionTime": "2026-11-29T02:00:00Z"}]}
    kept = condition(status_of(("OpsQueue", "default"), obj(3, applied), assembly, False, "resources#abc", None))
    assert kept["status"] == "True" and kept["message"] == "in force (x)"  # unchanged: it is still what is in force


def test_an_opsconfig_not_named_opsched_is_ignored():
    said = condition(status_of(("OpsConfig", "other"), obj(), Assembly(config=CONFIG, ignored=[("OpsConfig", "other")]),
                               True, "resources#abc", None))
    assert said["reason"] == "Ignored" and "'opsched'" in said["message"]


def test_a_queue_carries_admissions_counts():
    counts = QueueStatus(name="default", pending=3, running=2, stop_policy="Hold",
                         usage=[FlavorUsage(resource="nvidia.com/gpu", flavor="a100", used=2.0, nominal=4.0)])
    status = status_of(("OpsQueue", "default"), obj(), Assembly(config=CONFIG), True, "resources#abc", counts)
    assert (status["pending"], status["admitted"], status["stopPolicy"]) == (3, 2, "Hold")
    assert status["usage"] == [{"resource": "nvidia.com/gpu", "flavor": "a100", "used": 2.0, "nominal": 4.0,
                                "borrowed": 0.0}]


def test_a_status_is_written_only_when_what_it_says_changes_and_keeps_its_transition_time():
    wanted = status_of(("OpsQueue", "default"), obj(), Assembly(config=CONFIG), True, "resources#abc", None)
    written = _stamped(wanted, {}, NOW)
    assert condition(written)["lastTransitionTime"] == "2026-11-29T03:00:00Z"
    assert not _differs(wanted, written)  # as the API server gives it back: nothing to write
    later = status_of(("OpsQueue", "default"), obj(3), Assembly(config=CONFIG), True, "resources#def", None)
    assert _differs(later, written)
    restamped = _stamped(later, written, NOW.replace(hour=4))
    assert condition(restamped)["lastTransitionTime"] == "2026-11-29T03:00:00Z"  # still True: the same transition
    pending = status_of(("OpsQueue", "default"), obj(3), Assembly(config=CONFIG), False, "resources#abc", None)
    assert condition(_stamped(pending, written, NOW.replace(hour=4)))["lastTransitionTime"] == "2026-11-29T04:00:00Z"


def test_what_the_configuration_in_force_holds_stays_applied_even_before_its_status_said_so():
    """Put in force at generation 1 (seen by this dispatcher), then another resource made invalid before this one's
    status was written: it is in force all the same."""
    assembly = Assembly(config=None, problems={("OpsConfig", "opsched"): ["spec.defaultQueue: ..."]})
    pending = {"conditions": [{"type": "Applied", "status": "False", "reason": "Pending", "message": "sent",
                               "observedGeneration": 1}]}
    said = condition(status_of(("OpsQueue", "default"), obj(1, pending), assembly, False, "resources#abc", None, applied=1))
    assert said["status"] == "True" and said["reason"] == "Applied"
    assert condition(status_of(("OpsQueue", "default"), obj(2, pending), assembly, False, "resources#abc", None,
                               applied=1))["reason"] == "Blocked"  # changed since: not in force
