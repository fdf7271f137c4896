"""The wire contract (e): subjects, message ids and the streams that hold them."""
from __future__ import annotations

import pytest

from opsched.proto import subjects

# ---- (e) subjects -----------------------------------------------------------------------------

@pytest.mark.parametrize("value,valid", [
    ("op-1", True), ("a", True), ("0abc", True), ("a" * 63, True), ("gpu-a100", True),
    ("", False), ("-op", False), ("Op", False), ("op_1", False), ("op.1", False), ("op*", False),
    ("op>", False), ("op 1", False), ("a" * 64, False),
], ids=lambda v: repr(v))
def test_valid_token(value, valid):
    assert subjects.valid_token(value) is valid


def test_a_token_ending_in_a_dash_is_not_a_dns_label():
    assert subjects.valid_token("op-") is False


def test_subject_builders():
    assert subjects.event("admitted", "op-1") == "ops.admitted.op-1"
    assert subjects.events_of("submitted") == "ops.submitted.>"
    assert subjects.events_for("op-1") == "ops.*.op-1"
    assert subjects.submit("gpu-a", "alice") == "cmd.alice.submit.gpu-a"
    assert subjects.submit(None) == "cmd.anonymous.submit._"
    assert subjects.command("stop") == subjects.CMD_STOP == "cmd.anonymous.stop"
    assert subjects.command("approve", "bob") == "cmd.bob.approve"
    assert subjects.command(subjects.SET_QUEUES, "root") == "cmd.root.queues.set"


@pytest.mark.parametrize("subject,user", [
    ("cmd.alice.submit.gpu", "alice"), ("cmd.bob.approve", "bob"), ("cmd.root.queues.set", "root"),
    ("ops.admitted.x", subjects.ANONYMOUS), ("cmd", subjects.ANONYMOUS), ("cmd..stop", subjects.ANONYMOUS),
])
def test_the_requester_is_the_user_token_of_a_command_subject(subject, user):
    assert subjects.requester_of(subject) == user


def test_a_submit_subject_is_told_from_the_other_commands():
    assert subjects.is_submit(subjects.submit("q", "alice")) and subjects.is_submit(subjects.submit(None))
    assert not subjects.is_submit(subjects.command("stop", "submit"))
    assert not subjects.is_submit("cmd.alice.stop")
    assert subjects.dead_letter("admission") == "dlq.admission"


@pytest.mark.parametrize("op_id,kind,attempt,expected", [
    ("op-1", "admitted", 0, "op-1.admitted.0"),
    ("abc", "running", 3, "abc.running.3"),
])
def test_msg_id_is_op_id_type_attempt(op_id, kind, attempt, expected):
    assert subjects.msg_id(op_id, kind, attempt) == expected


def test_msg_id_defaults_to_attempt_zero():
    assert subjects.msg_id("op-1", "submit") == "op-1.submit.0"


def test_every_subject_is_covered_by_exactly_one_stream():
    samples = [subjects.event("running", "x"), subjects.submit("q"), subjects.command("stop"),
               subjects.dead_letter("cost"), subjects.node("gpu.a"), subjects.CONFIG_QUEUES, subjects.CONFIG_PRICES,
               subjects.CMD_SET_QUEUES, subjects.lease_claim(subjects.ADMISSION_ROLE)]
    for subject in samples:
        owners = [s for s, (patterns, _) in subjects.STREAMS.items()
                  if any(subject.startswith(p.rstrip(">")) for p in patterns)]
        assert len(owners) == 1, (subject, owners)


def test_a_leaders_claim_is_in_the_op_stream_and_no_ops_events_for_filter_matches_it():
    from tests.builders.streams import matches

    claim = subjects.lease_claim(subjects.ADMISSION_ROLE)
    assert subjects.stream_of(claim) == subjects.OPS_STREAM  # it fences the decisions stored there
    assert not matches(subjects.events_for("admission"), claim)  # an op may be named "admission"
    assert [subjects.stream_of(s) for s in (subjects.CONFIG_QUEUES, subjects.command("stop"), "nowhere")] == [
        subjects.CONFIG_STREAM, subjects.CMD_STREAM, None]
