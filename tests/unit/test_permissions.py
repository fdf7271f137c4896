"""The NATS allow-lists (``proto.permissions``): each service publishes exactly the events it owns, each client
role only its verbs under its own ``cmd.<user>.`` prefix, and no client may manage streams or durables."""
from __future__ import annotations

import pytest

from opsched.proto import permissions, subjects
from tests.builders.streams import matches


def may_publish(p: permissions.Permissions, subject: str) -> bool:
    return any(matches(allowed, subject) for allowed in p.publish) and not any(
        matches(denied, subject) for denied in p.deny)


def may_subscribe(p: permissions.Permissions, subject: str) -> bool:
    return any(matches(allowed, subject) for allowed in p.subscribe)


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
    *(("viewer", verb, False) for verb in ("submit", "stop", "touch", "approve", subjects.SET_QUEUES,
                                           subjects.SCHEDULE_CREATE)),
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
                                 "$JS.API.STREAM.INFO.OPSCHED_OPS", "$JS.API.CONSUMER.CREATE.OPSCHED_CMD",
                                 "$JS.API.CONSUMER.CREATE.OPSCHED_OPS.x", "$JS.API.CONSUMER.MSG.NEXT.OPSCHED_CMD.x",
                                 "$JS.ACK.OPSCHED_CMD.admission-commands.1.2.3.4.0", "$JS.FC.x",
                                 "$KV.opsched_leases.admission", "$JS.opsched.API.STREAM.INFO.OPSCHED_OPS",
                                 "$JS.opsched.API.CONSUMER.CREATE.OPSCHED_OPS", "$JS.opsched.API.DIRECT.GET.OPSCHED_CMD",
                                 "_INBOX.admission.x", "_INBOX.bob.x"])
def test_a_client_reaches_no_jetstream_api_but_the_direct_gets_nor_another_inbox(role, api):
    assert not may_publish(permissions.client(role, "alice"), api)


@pytest.mark.parametrize("role", permissions.ROLES)
def test_a_client_reads_the_views_streams_by_direct_gets_and_takes_its_replies_on_its_own_inbox(role):
    p = permissions.client(role, "alice")
    for stream in permissions.READ_STREAMS:
        assert may_publish(p, f"{subjects.READ_API_PREFIX}.DIRECT.GET.{stream}")
    assert may_subscribe(p, "_INBOX.alice.x") and not may_subscribe(p, "_INBOX.bob.x")
    assert not may_subscribe(p, "_INBOX.admission.x") and may_subscribe(p, subjects.event("admitted", "x"))
    assert p.account == subjects.CLIENTS_ACCOUNT and not p.allow_responses


def test_what_the_clients_import_is_what_they_may_publish_and_nothing_more():
    imported = {permissions.imported_as(subject) for kind, subject, _ in permissions.EXPORTS if kind == "service"}
    admin = permissions.client("admin", "admin")
    assert all(any(matches(i, allowed) or matches(allowed, i) for i in imported) for allowed in admin.publish)


def test_each_service_reaches_only_its_own_durables_and_writes_only_its_own_buckets():
    for name in permissions.SERVICES:
        p = permissions.service(name, ("agent-2",))
        for other in permissions.SERVICES:
            for durable in permissions.durables_of(other, ("agent-2",)):
                for api in (f"$JS.API.CONSUMER.DURABLE.CREATE.OPSCHED_CMD.{durable}",
                            f"$JS.API.CONSUMER.MSG.NEXT.OPSCHED_CMD.{durable}",
                            f"$JS.API.CONSUMER.DELETE.OPSCHED_OPS.{durable}",
                            f"$JS.ACK.OPSCHED_OPS.{durable}.1.2.3.4.0"):
                    assert may_publish(p, api) is (other == name), (name, api)
        for bucket in (subjects.LEASE_BUCKET, subjects.CACHE_BUCKET, subjects.ATTEMPT_FATE_BUCKET):
            assert may_publish(p, f"$KV.{bucket}.k") is (bucket in permissions.BUCKETS[name]), (name, bucket)
        assert may_publish(p, f"$KV.{subjects.IN_HAND_BUCKET}.k")
        assert not may_publish(p, "$JS.API.STREAM.DELETE.OPSCHED_OPS")
        keeper = name == permissions.STREAM_KEEPER
        assert may_publish(p, "$JS.API.STREAM.UPDATE.OPSCHED_OPS") is keeper
        assert may_publish(p, "$JS.API.STREAM.PURGE.OPSCHED_OPS") is keeper
        assert may_publish(p, "$JS.API.STREAM.PURGE.OPSCHED_CMD") is keeper  # the commands it consumed
        assert not may_publish(p, "$JS.API.STREAM.PURGE.OPSCHED_DLQ")
        assert not may_subscribe(p, "_INBOX.alice.x") and may_subscribe(p, f"_INBOX.{name}.x")
        assert p.allow_responses and p.account == subjects.SERVICES_ACCOUNT


@pytest.mark.parametrize("name", ["admission", subjects.ANONYMOUS, "Alice", "a.b", "a*", ""])
def test_a_client_user_name_is_a_token_and_no_service_nor_anonymous(name):
    with pytest.raises(ValueError, match="user name"):
        permissions.client("submitter", name)


def test_an_unknown_role_or_service_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown role 'root'"):
        permissions.client("root", "alice")
    with pytest.raises(ValueError, match="unknown service 'gpu'"):
        permissions.service("gpu")


def test_each_service_answers_for_its_own_health_only_and_every_client_may_ask():
    for name in permissions.SERVICES:
        answers = [s for s in permissions.SERVICES if may_subscribe(permissions.service(name), subjects.health_query(s))]
        assert answers == [name]
    for role in permissions.ROLES:
        assert all(may_publish(permissions.client(role, "alice"), subjects.health_query(s)) for s in permissions.SERVICES)


def test_every_client_role_may_ask_for_logs_and_only_the_dispatcher_answers_with_a_stream():
    from opsched.proto.queries import LOGS_ANSWER_CHUNKS

    for role in permissions.ROLES:
        assert subjects.QUERY_LOGS in permissions.client(role, "alice").publish
    assert ("service", subjects.QUERY_LOGS, "stream") in permissions.EXPORTS
    assert permissions.service("dispatcher").max_responses == LOGS_ANSWER_CHUNKS
    assert {permissions.service(s).max_responses for s in ("admission", "cost", "cache")} == {1}
