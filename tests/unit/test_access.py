"""Who asked and whether they may (``proto.access``): the requester is the subject's user, never the payload's;
a submitter acts only on the ops of its projects (by name or group); admins, services and an open server on all."""
from __future__ import annotations

from datetime import datetime, timezone

import msgspec
import pytest
import structlog

from proto import subjects
from proto.access import NOT_ALLOWED, Access, Project, refusal, requester
from proto.commands import StopOperation
from proto.events import OperationRejected, OperationStopped, OperationSubmitted
from proto.queues import QueuesConfig
from proto.queues_file import problems
from services.admission import handlers
from services.admission.queues import compile_book
from services.admission.service import sent_by
from services.admission.state import AdmissionState
from services.runtime.errors import InvalidInput
from services.runtime.service import Context
from services.runtime.settings import Settings
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


def test_without_projects_every_user_acts_on_every_op():
    assert refusal("alice", "anything", Access()) is None


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
