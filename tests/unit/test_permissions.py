"""The NATS allow-lists (``proto.permissions``): each service publishes exactly the events it owns, each client
role only its verbs under its own ``cmd.<user>.`` prefix, and no client may manage streams or durables."""
from __future__ import annotations

import pytest

from proto import permissions, subjects
from tests.builders.streams import matches


def may_publish(p: permissions.Permissions, subject: str) -> bool:
    return any(matches(allowed, subject) for allowed in p.publish) and not any(
        matches(denied, subject) for denied in p.deny)


EVERY_EVENT = sorted({kind for kinds in permissions.EMITS.values() for kind in kinds})


@pytest.mark.parametrize("kind", EVERY_EVENT)
def test_an_event_is_published_only_by_the_services_that_emit_it(kind):
    subject = subjects.event(kind, "op-1") if kind != "lease" else subjects.lease_claim(subjects.ADMISSION_ROLE)
    publishers = {name for name in permissions.SERVICES if may_publish(permissions.service(name), subject)}
    assert publishers == {name for name, kinds in permissions.EMITS.items() if kind in kinds}


@pytest.mark.parametrize("subject,owner", [
    (subjects.event("admitted", "x"), "admission"), (subjects.event("running", "x"), "dispatcher"),
    (subjects.event("cost_estimated", "x"), "cost"),
    (subjects.event("cache_hit", "x"), "cache"), (subjects.CONFIG_QUEUES, "admission"),
    (subjects.CONFIG_PRICES, "cost"), (subjects.node("gpu-0"), "dispatcher"),
])
def test_the_subject_table_of_the_readme_each_subject_one_owner(subject, owner):
    assert [n for n in permissions.SERVICES if may_publish(permissions.service(n), subject)] == [owner]


def test_an_op_succeeds_by_its_pod_or_by_a_cache_hit():
    """The dispatcher reports a pod that succeeded; admission ends a cache hit with the original's outputs."""
    assert [n for n in permissions.SERVICES
            if may_publish(permissions.service(n), subjects.event("succeeded", "x"))] == ["admission", "dispatcher"]


def test_a_service_dead_letters_only_under_its_own_name_and_reports_errors():
    cost = permissions.service("cost")
    assert may_publish(cost, subjects.dead_letter("cost")) and not may_publish(cost, subjects.dead_letter("cache"))
    assert may_publish(cost, subjects.event("error", "op-1"))


def test_only_admission_submits_and_only_as_itself():
    assert may_publish(permissions.service("admission"), subjects.submit("q", "admission"))
    assert not may_publish(permissions.service("admission"), subjects.submit("q", "alice"))
    assert not any(may_publish(permissions.service(n), subjects.command("stop", n)) for n in permissions.SERVICES)


@pytest.mark.parametrize("role,verb,allowed", [
    ("submitter", "submit", True), ("submitter", "stop", True), ("submitter", "restart", True),
    ("submitter", "copy", True), ("submitter", "resume", True), ("submitter", "approve", False),
    ("submitter", "reject", False), ("submitter", subjects.SET_QUEUES, False),
    ("submitter", subjects.SCHEDULE_CREATE, False),
    ("approver", "approve", True), ("approver", "reject", True), ("approver", "submit", False),
    ("approver", "stop", False), ("approver", subjects.SET_QUEUES, False),
    ("admin", subjects.SET_QUEUES, True), ("admin", subjects.SCHEDULE_DELETE, True), ("admin", "approve", True),
])
def test_a_role_sends_only_its_verbs(role, verb, allowed):
    subject = subjects.submit("gpu", "alice") if verb == "submit" else subjects.command(verb, "alice")
    assert may_publish(permissions.client(role, "alice"), subject) is allowed


@pytest.mark.parametrize("role", permissions.ROLES)
def test_a_client_never_speaks_for_another_user_nor_emits_events(role):
    p = permissions.client(role, "alice")
    assert not may_publish(p, subjects.command("approve", "bob")) and not may_publish(p, subjects.submit("q", "bob"))
    assert not any(may_publish(p, subjects.event(kind, "x")) for kind in EVERY_EVENT)
    assert not may_publish(p, subjects.dead_letter("admission")) and not may_publish(p, subjects.CONFIG_QUEUES)


@pytest.mark.parametrize("role", permissions.ROLES)
@pytest.mark.parametrize("api", ["$JS.API.STREAM.DELETE.OPSCHED_OPS", "$JS.API.STREAM.PURGE.OPSCHED_OPS",
                                 "$JS.API.STREAM.MSG.DELETE.OPSCHED_OPS", "$JS.API.CONSUMER.DELETE.OPSCHED_CMD.x",
                                 "$JS.API.CONSUMER.DURABLE.CREATE.OPSCHED_CMD.admission-commands",
                                 "$JS.API.CONSUMER.CREATE.OPSCHED_CMD.admission-commands",
                                 "$JS.API.CONSUMER.CREATE.OPSCHED_OPS.dispatcher-admitted.ops.admitted.>",
                                 "$KV.opsched_leases.admission"])
def test_no_client_deletes_purges_or_takes_over_what_the_services_keep(role, api):
    assert not may_publish(permissions.client(role, "alice"), api)


@pytest.mark.parametrize("role", permissions.ROLES)
def test_no_client_takes_over_a_named_agents_dispatcher_consumer_it_is_told_of(role):
    p = permissions.client(role, "alice", ("agent-2",))
    for api in ("$JS.API.CONSUMER.CREATE.OPSCHED_OPS.dispatcher-admitted-agent-2",
                "$JS.API.CONSUMER.CREATE.OPSCHED_OPS.dispatcher-admitted-agent-2.ops.admitted.agent-2.*"):
        assert not may_publish(p, api), api
    assert may_publish(p, "$JS.API.CONSUMER.CREATE.OPSCHED_OPS")  # its own ephemeral reads still


def test_a_client_reads_streams_and_only_admin_creates_them():
    read = "$JS.API.CONSUMER.CREATE.OPSCHED_OPS"
    assert all(may_publish(permissions.client(role, "alice"), read) for role in permissions.ROLES)
    create = "$JS.API.STREAM.CREATE.OPSCHED_OPS"
    assert [r for r in permissions.ROLES if may_publish(permissions.client(r, "alice"), create)] == ["admin"]


@pytest.mark.parametrize("name", ["admission", subjects.ANONYMOUS, "Alice", "a.b", "a*", ""])
def test_a_client_user_name_is_a_token_and_no_service_nor_anonymous(name):
    with pytest.raises(ValueError, match="user name"):
        permissions.client("submitter", name)


def test_an_unknown_role_or_service_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown role 'root'"):
        permissions.client("root", "alice")
    with pytest.raises(ValueError, match="unknown service 'gpu'"):
        permissions.service("gpu")


def may_subscribe(p: permissions.Permissions, subject: str) -> bool:
    return any(matches(allowed, subject) for allowed in p.subscribe)


def test_each_service_answers_for_its_own_health_only_and_every_client_may_ask():
    for name in permissions.SERVICES:
        answers = [s for s in permissions.SERVICES if may_subscribe(permissions.service(name), subjects.health_query(s))]
        assert answers == [name]
    for role in permissions.ROLES:
        assert all(may_publish(permissions.client(role, "alice"), subjects.health_query(s)) for s in permissions.SERVICES)
