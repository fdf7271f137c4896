"""Who asked and whether they may (``proto.access``): the requester is the subject's user, never the payload's;
a submitter acts only on the ops of its projects (by name or group); admins, services and an open server on all."""
from __future__ import annotations

from datetime import datetime, timezone

import msgspec
import pytest
import structlog

from opsched.bus.errors import InvalidInput
from opsched.proto import subjects
from opsched.proto.access import NOT_ALLOWED, Access, Project, acts_on_all, refusal, requester
from opsched.proto.commands import RejectOperation, StopOperation
from opsched.proto.events import OperationOnHold, OperationRejected, OperationStopped, OperationSubmitted
from opsched.proto.queues import FlavorQuota, Queue, QueuesConfig, ResourceQuota, not_covered
from opsched.proto.reasons import Reason
from opsched.rules.queues_file import problems
from opsched.services.admission import handlers
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.service import sent_by
from opsched.services.admission.state.admission_state import AdmissionState, Status
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import op
from tests.builders.clock import FakeClock
from tests.builders.commands import submit

ACCESS = Access(groups={"speech-team": ["carol"]},
                projects=[Project(name="vision", users=["alice"]), Project(name="speech", groups=["speech-team"])])


@pytest.mark.parametrize("user,project,allowed", [
    ("alice", "vision", True), ("carol", "speech", True), ("carol", "vision", False), ("alice", "speech", False),
    ("alice", "unlisted", False), ("admin", "vision", True), ("admin", "unlisted", True),
    ("admission", "vision", True), (subjects.ANONYMOUS, "vision", True),
])
def test_a_user_acts_on_the_ops_of_its_projects_only(user, project, allowed):
    assert (refusal(user, project, ACCESS) is None) is allowed


@pytest.mark.parametrize("user,owner,allowed", [
    ("ann", "ann", True), ("bob", "ann", False), ("ann", None, True),  # None: a new op (a submit), its own
    ("ann", "", False),  # an op whose submitter was not recorded: the admins'
    ("admin", "ann", True), ("admission", "ann", True), (subjects.ANONYMOUS, "ann", True),  # an open server: all
])
def test_without_projects_a_user_acts_on_its_own_ops_only_and_admins_on_all(user, owner, allowed):
    assert (refusal(user, "anything", Access(), owner=owner) is None) is allowed
    assert acts_on_all(user, Access()) is (user in ("admin", "admission", subjects.ANONYMOUS))


def test_a_refusal_of_another_users_op_names_both_users():
    assert refusal("bob", "p", Access(), owner="ann") == (
        "user 'bob' may act only on its own ops, and this one was submitted by 'ann' (the queue configuration lists "
        "no access.projects: a submitter acts on its own ops, access.admins on all)")


def test_with_projects_a_member_acts_on_every_op_of_its_project_whoever_submitted_it():
    assert refusal("alice", "vision", ACCESS, owner="dave") is None
    assert refusal("carol", "vision", ACCESS, owner="carol") is not None  # no longer a member: the project decides


def test_a_refusal_names_the_user_the_project_and_its_members():
    assert refusal("carol", "vision", ACCESS) == ("user 'carol' is not a member of project 'vision' "
                                                  "(access.projects: users ['alice'], groups [])")
    assert "does not list it" in (refusal("alice", "unlisted", ACCESS) or "")


@pytest.mark.parametrize("subject,claimed,who", [
    ("cmd.alice.submit.gpu", "admin", "alice"), ("cmd.alice.approve", "", "alice"),
    (subjects.submit(None), "sdk", "sdk"), (subjects.submit(None), "", subjects.ANONYMOUS),
])
def test_the_requester_is_the_subjects_user_and_a_label_only_on_an_open_server(subject, claimed, who):
    assert requester(subject, claimed) == who


def test_a_command_handled_by_admission_carries_the_subjects_user():
    cmd = sent_by(StopOperation(op_id="x", requested_by="admin"), "cmd.alice.stop")
    assert cmd.requested_by == "alice"


def test_an_access_section_with_an_unknown_group_or_a_project_twice_is_refused_by_name():
    config = QueuesConfig(access=Access(projects=[Project(name="p", groups=["ghosts"]), Project(name="p")]))
    assert problems(config) == ["access.projects: 'p' is listed twice",
                                "access.projects[p].groups: unknown group 'ghosts' (access.groups defines none)"]


def test_the_access_section_is_read_from_yaml_in_camel_case_like_the_rest():
    config = msgspec.yaml.decode(b"access: {admins: [root], groups: {g: [a]}, projects: [{name: p, groups: [g]}]}",
                                 type=QueuesConfig)
    assert config.access.admins == ["root"] and config.access.projects[0].groups == ["g"]


T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def ctx(subject: str) -> Context:
    return Context("admission", FakeClock(T0), Settings(), structlog.get_logger(), subject)


def book():
    return compile_book(QueuesConfig(access=ACCESS))


def test_a_submit_to_a_foreign_project_ends_its_op_rejected_not_allowed():
    spec = msgspec.structs.replace(op("x").build(), project="vision")
    event = handlers.on_submit(submit(spec, op_id="op-1"), ctx(subjects.submit(None, "carol")), AdmissionState(),
                               book())
    assert isinstance(event, OperationRejected) and event.reason == NOT_ALLOWED and "carol" in event.message


def test_a_submit_to_an_own_project_is_submitted():
    spec = msgspec.structs.replace(op("x").build(), project="vision")
    event = handlers.on_submit(submit(spec, op_id="op-1"), ctx(subjects.submit(None, "alice")), AdmissionState(),
                               book())
    assert isinstance(event, OperationSubmitted)


def test_a_stop_of_a_foreign_projects_op_is_refused_and_changes_nothing():
    state, b = AdmissionState(), book()
    spec = msgspec.structs.replace(op("x").build(), project="vision")
    submitted = handlers.on_submit(submit(spec, op_id="op-1"), ctx(subjects.submit(None, "alice")), state, b)
    assert isinstance(submitted, OperationSubmitted) and state.apply(submitted) and "op-1" in state.ops
    with pytest.raises(InvalidInput) as refused:
        handlers.check_owner("stop", "op-1", ctx(subjects.command("stop", "carol")), state, b)
    assert refused.value.reason == NOT_ALLOWED and refused.value.op_id == "op-1"
    handlers.check_owner("stop", "op-1", ctx(subjects.command("stop", "alice")), state, b)
    stopped = handlers.on_stop(StopOperation(op_id="op-1"), ctx(subjects.command("stop", "alice")), state)
    assert isinstance(stopped, OperationStopped)


# ---- no access.projects: the own-ops default; an approver rejects only ops held for approval ----------------------

def submitted_by(user: str, state: AdmissionState, b, op_id: str = "op-1") -> None:
    subject = subjects.submit(None, user)
    event = handlers.on_submit(sent_by(submit(op("x").build(), op_id=op_id), subject), ctx(subject), state, b)
    assert isinstance(event, OperationSubmitted) and event.requested_by == user and state.apply(event)


@pytest.mark.parametrize("verb", ["stop", "restart or copy", "resume"])
def test_without_projects_another_submitters_op_is_refused_and_the_owners_and_admins_pass(verb):
    state, b = AdmissionState(), compile_book(QueuesConfig())
    submitted_by("ann", state, b)
    with pytest.raises(InvalidInput) as refused:
        handlers.check_owner(verb, "op-1", ctx(subjects.command("stop", "bob")), state, b)
    assert refused.value.reason == NOT_ALLOWED and refused.value.op_id == "op-1"
    assert f"cannot {verb} op-1: user 'bob' may act only on its own ops" in refused.value.message
    for user in ("ann", "admin", subjects.ANONYMOUS):
        handlers.check_owner(verb, "op-1", ctx(subjects.command("stop", user)), state, b)


def test_admins_are_the_configurations_access_admins():
    state, b = AdmissionState(), compile_book(QueuesConfig(access=Access(admins=["root"])))
    submitted_by("ann", state, b)
    handlers.check_owner("stop", "op-1", ctx(subjects.command("stop", "root")), state, b)
    with pytest.raises(InvalidInput):
        handlers.check_owner("stop", "op-1", ctx(subjects.command("stop", "admin")), state, b)


def test_an_approver_rejects_an_op_on_hold_but_not_one_still_pending_which_an_admin_may():
    state, b = AdmissionState(), compile_book(QueuesConfig())
    submitted_by("ann", state, b)
    assert state.ops["op-1"].status == Status.PENDING
    with pytest.raises(InvalidInput) as refused:
        handlers.on_reject(RejectOperation(op_id="op-1"), ctx(subjects.command("reject", "alice")), state, b)
    assert refused.value.reason == handlers.NOT_ON_HOLD and refused.value.op_id == "op-1"
    assert refused.value.message.startswith("cannot reject op-1: it is pending, not held for approval")
    rejected = handlers.on_reject(RejectOperation(op_id="op-1"), ctx(subjects.command("reject", "admin")), state, b)
    assert isinstance(rejected, OperationRejected)
    submitted_by("ann", state, b, "op-2")
    assert state.apply(OperationOnHold(op_id="op-2", at=T0, reason="is_approved_false"))
    assert state.ops["op-2"].status == Status.ON_HOLD
    held = handlers.on_reject(RejectOperation(op_id="op-2"), ctx(subjects.command("reject", "alice")), state, b)
    assert isinstance(held, OperationRejected) and held.reason == "approval_rejected"


# ---- an accelerator its queue sets no quota for ------------------------------------------------------------------

GPU_QUEUES = QueuesConfig(queues=[
    Queue(name="gpu", resources=[ResourceQuota(resource="nvidia.com/gpu",
                                               flavors=[FlavorQuota(name="default", nominal=4)])]),
    Queue(name="cpu", resources=[ResourceQuota(resource="cpu", flavors=[FlavorQuota(name="default", nominal=8)])]),
    Queue(name="open"),
], default_queue="gpu")


@pytest.mark.parametrize("queue,resource,covered", [
    ("gpu", "nvidia.com/gpu", True), ("open", "nvidia.com/gpu", True),  # no resources at all: limits nothing
    ("cpu", "nvidia.com/gpu", False), ("gpu", "amd.com/gpu", False), ("cpu", "cpu", True), ("gpu", "cpu", True),
])
def test_a_queue_that_lists_resources_covers_only_the_accelerators_it_lists(queue, resource, covered):
    config = next(q for q in GPU_QUEUES.queues if q.name == queue)
    assert (not_covered(config, {resource: 1.0, "memory": 2.0**30}) == []) is covered
    assert not_covered(config, {resource: 0.0}) == []  # asked for none


def test_a_gpu_op_in_a_queue_without_gpu_quota_is_rejected_naming_the_resource_and_the_queue():
    state, b = AdmissionState(), compile_book(GPU_QUEUES)
    spec = msgspec.structs.replace(op("x").gpus(2).build(), queue="cpu")
    event = handlers.on_submit(submit(spec, op_id="op-1"), ctx(subjects.submit(None, "ann")), state, b)
    assert isinstance(event, OperationRejected) and event.reason == Reason.RESOURCE_NOT_COVERED
    assert event.queue == "cpu" and event.message.startswith(
        "queue cpu sets no quota for nvidia.com/gpu (its resources: cpu); the op asks for 2 x nvidia.com/gpu")
    for queue in ("gpu", "open"):
        spec = msgspec.structs.replace(op("x").gpus(2).build(), queue=queue)
        ok = handlers.on_submit(submit(spec, op_id=f"op-{queue}"), ctx(subjects.submit(None, "ann")), state, b)
        assert isinstance(ok, OperationSubmitted), queue


def test_the_built_in_default_queue_takes_gpu_ops():
    spec = op("x").gpus(1).build()
    event = handlers.on_submit(submit(spec, op_id="op-1"), ctx(subjects.submit(None, "ann")), AdmissionState(),
                               compile_book(QueuesConfig()))
    assert isinstance(event, OperationSubmitted)
