"""Sizes: a message is measured as the NATS server measures it (headers counted) and refused before it is
sent; a spec over MAX_SPEC_BYTES is refused at submit; an event too large to publish ends its op with the
reason; and even a spec at the bound fits in every event that carries it."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from opsched.bus import logging as oplog
from opsched.bus.addressing import Fence, cloudevent_headers, default_msg_id, subject_for
from opsched.bus.bus import as_unavailable
from opsched.bus.errors import InvalidInput, MessageTooLarge
from opsched.bus.sizes import check_size, wire_size
from opsched.proto import codec
from opsched.proto.commands import RestartOperation, ResumeOperation
from opsched.proto.events import OperationAdmitted, OperationRejected, OperationSubmitted
from opsched.proto.limits import MAX_NAME_CHARS, MAX_SPEC_BYTES
from opsched.rules.spec_size import SPEC_TOO_LARGE, SpecTooLarge, spec_bytes, too_large
from opsched.services.admission.handlers import on_rerun, on_resume, on_submit
from opsched.services.admission.state.admission_state import AdmissionState, Status
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, failed, op, submit, submitted
from tests.builders.bus import memory_bus
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import fold, queues, ready

NATS_DEFAULT_MAX_PAYLOAD = 1024 * 1024


def sized(total: int, name: str = "big"):
    """A spec whose encoding is exactly ``total`` bytes (a param padded to fit)."""
    base = spec_bytes(op(name).params(blob="").build())
    return op(name).params(blob="x" * (total - base)).build()


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


# ---- the size the server counts ----------------------------------------------------------------------

@pytest.mark.parametrize("headers", [None, {}, {"Nats-Msg-Id": "a.submitted.0", "ce-time": " 2026-01-01T00:00:00Z "},
                                     {"k": "line\r\nbreak", " padded ": "v"}], ids=repr)
def test_the_size_counted_is_the_headers_and_the_body_exactly_as_nats_py_sends_them(headers):
    from nats.aio.client import Client

    sent: list[bytes] = []
    nc = Client()

    async def capture(cmd, priority=False):
        sent.append(bytes(cmd))
    nc._send_command = capture  # type: ignore[method-assign]
    body = b'{"spec": "' + b"x" * 1000 + b'"}'
    import asyncio
    asyncio.run(nc._send_publish("ops.submitted.a", "", body, len(body), headers))
    # PUB <subject> <size> or HPUB <subject> <header size> <total size>: the server checks the last number
    total = int(sent[0].split(b"\r\n", 1)[0].split()[-1])
    assert wire_size(body, headers) == total


def test_a_message_over_the_limit_with_its_headers_is_refused_naming_subject_size_and_limit():
    headers = {"Nats-Msg-Id": "a.submitted.0"}
    limit = wire_size(b"x" * 100, headers)
    check_size("ops.submitted.a", b"x" * 100, headers, limit)  # exactly at the limit: the server takes it
    with pytest.raises(MessageTooLarge) as refused:
        check_size("ops.submitted.a", b"x" * 101, headers, limit)  # the body alone is far under it
    exc = refused.value
    assert (exc.subject, exc.size, exc.limit) == ("ops.submitted.a", limit + 1, limit)
    assert f"{limit + 1} bytes" in str(exc) and f"max payload of {limit} bytes" in str(exc)


def test_a_message_too_large_is_bad_input_never_an_outage_to_wait_out():
    exc = MessageTooLarge("ops.admitted.a", 2_000_000, NATS_DEFAULT_MAX_PAYLOAD)
    assert isinstance(exc, InvalidInput) and exc.reason == "message_too_large"
    assert as_unavailable(exc) is None


async def test_the_bus_refuses_it_before_anything_is_stored():
    bus = memory_bus()
    await bus.ensure_streams()
    bus.max_payload = 2000
    spec = sized(1900)
    with pytest.raises(MessageTooLarge):
        await bus.publish(submit(spec, op_id="a"))
    assert bus.published == []


# ---- every event carrying a spec at the bound fits -----------------------------------------------------

def _wire(message, fence: Fence | None = None) -> int:
    """What ``Bus.publish`` sends for ``message``: its body and every header it adds, the fence's too."""
    mid, subject = default_msg_id(message), subject_for(message)
    headers = {"Nats-Msg-Id": mid, **cloudevent_headers(message, mid, "admission"),
               **(fence.headers_for(subject) if fence else {})}
    return wire_size(codec.encode(message), headers)


def test_every_event_carrying_a_spec_at_the_bound_fits_the_default_max_payload_with_its_headers():
    spec = sized(MAX_SPEC_BYTES)
    assert too_large(spec) is None and spec_bytes(spec) == MAX_SPEC_BYTES
    op_id, name = "o" * MAX_NAME_CHARS, "q" * MAX_NAME_CHARS
    at = datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
    fence = Fence("ops.lease.admission.claimed", 2**63 - 1)
    worst = [
        submit(spec, op_id=op_id, at=at),
        OperationSubmitted(op_id=op_id, at=at, spec=spec, queue=name, submitted_at=at, priority=-10**9,
                           original_op_id=op_id, relation="restart", requested_by=name, attempt=2**31),
        OperationAdmitted(op_id=op_id, at=at, attempt=2**31, spec=spec, queue=name, namespace=name,
                          pod_name=name, flavors={f"vendor-{i}.example.com/gpu": name for i in range(16)},
                          node_selector={f"label-{i}.example.com/{name}": name for i in range(64)},
                          tolerations=[{"key": f"{name}/{i}", "operator": "Equal", "value": name,
                                        "effect": "NoSchedule"} for i in range(64)],
                          borrowing=True, effective_priority=-1e9, pending_timeout_s=1e9),
    ]
    for message in worst:
        assert _wire(message, fence) < NATS_DEFAULT_MAX_PAYLOAD * 0.4, type(message).__name__


# ---- the spec bound at submit ----------------------------------------------------------------------

def test_a_spec_at_the_bound_is_taken_one_byte_over_it_is_refused_naming_its_size_and_the_bound():
    assert too_large(sized(MAX_SPEC_BYTES)) is None
    message = too_large(sized(MAX_SPEC_BYTES + 1))
    assert message is not None
    assert f"{MAX_SPEC_BYTES + 1} bytes" in message and f"bound of {MAX_SPEC_BYTES} bytes" in message


def test_admission_rejects_a_900_kb_spec_at_submit_with_the_reason(ctx):
    event = on_submit(submit(sized(900_000), op_id="a"), ctx, AdmissionState(), queues(("default", 1)))
    assert isinstance(event, OperationRejected)
    assert event.reason == SPEC_TOO_LARGE and "900000 bytes" in event.message


def test_a_restart_whose_params_make_the_spec_too_large_is_rejected(ctx):
    state = fold(submitted(op("a").build(), op_id="a"))
    cmd = RestartOperation(op_id="a", new_op_id="b", params={"blob": "x" * MAX_SPEC_BYTES})
    event = on_rerun(cmd, ctx, state, queues(("default", 1)))
    assert isinstance(event, OperationRejected) and (event.op_id, event.reason) == ("b", SPEC_TOO_LARGE)


def test_a_resume_whose_params_make_the_spec_too_large_is_refused_and_the_op_left_as_it_was(ctx):
    state = fold(*ready("a"))
    state.ops["a"].status = Status.FAILED
    with pytest.raises(InvalidInput) as refused:
        on_resume(ResumeOperation(op_id="a", params={"blob": "x" * MAX_SPEC_BYTES}), ctx, state,
                  queues(("default", 1)))
    assert refused.value.reason == SPEC_TOO_LARGE and refused.value.op_id == "a"
    assert state.ops["a"].status == Status.FAILED


async def test_the_sdk_refuses_a_spec_too_large_before_publishing():
    from opsched.client import Client

    bus = memory_bus()
    await bus.ensure_streams()
    with pytest.raises(SpecTooLarge, match="over the bound"):
        await Client(bus).submit(sized(900_000), op_id="a")
    assert bus.published == []


def test_the_cli_refuses_a_spec_too_large_with_exit_2_naming_the_bound(tmp_path, capsys, monkeypatch):
    from opsched.cli import main

    monkeypatch.setattr(oplog, "configure", lambda *a, **k: None)  # logging stays the tests' (not this capture's)

    path = tmp_path / "big.yaml"
    path.write_text("version: 1.1\nkind: operation\nname: big\nparams:\n  blob: {value: " + "x" * 300_000 + "}\n"
                    "component:\n  inputs:\n    - {name: blob, type: str}\n"
                    "  run:\n    kind: job\n    container:\n      image: busybox\n")
    assert main(["submit", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "refused" in err and f"bound of {MAX_SPEC_BYTES} bytes" in err


# ---- an event too large to publish ends its op -----------------------------------------------------------

@pytest.fixture
def admission(monkeypatch):
    import asyncio

    from opsched.services.admission.service import Admission

    async def no_wait(_seconds):
        return None
    monkeypatch.setattr(asyncio, "sleep", no_wait)
    return Admission(Settings(namespace="opsched"), FakeClock(T0))


async def test_an_op_whose_admitted_is_too_large_is_rejected_and_the_cycle_admits_the_others(admission):
    admission.book = queues(("default", 10))
    big = sized(30_000, "b")
    fold(*ready("a"), submitted(big, op_id="b", queue="default"), *ready("c"), state=admission.state)
    for e in ready("b")[1:]:
        admission.state.apply(e)
    bus = memory_bus("opsched-admission")
    await bus.ensure_streams()
    bus.max_payload = 20_000
    await admission.cycle_once(bus)
    published = [codec.decode(p.data) for p in bus.published]
    assert [(type(e).__name__, e.op_id) for e in published] == [
        ("OperationAdmitted", "a"), ("OperationRejected", "b"), ("OperationAdmitted", "c")]
    assert published[1].reason == "message_too_large" and "max payload of 20000 bytes" in published[1].message
    b = admission.state.ops["b"]
    assert b.status == Status.REJECTED and not b.holds_quota
    await admission.cycle_once(bus)  # not retried
    assert len(bus.published) == 3


async def test_a_submit_whose_submitted_is_too_large_is_rejected_and_the_command_dead_lettered(admission):
    from opsched.bus.bus import Received
    from opsched.services.admission.service import Admission

    bus = memory_bus("opsched-admission")
    await bus.ensure_streams()
    cmd = submit(sized(19_000), op_id="a")
    bus.max_payload = _wire(cmd) + 20  # the command fits (within ~130 B of the limit); its submitted does not
    admission.bus = bus
    admission.leadership.deciding = lambda: True  # type: ignore[method-assign]  # this replica leads

    class Raw:
        async def ack(self): ...
        async def term(self): ...
        async def nak(self, delay=None): ...
        async def in_progress(self): ...
    data = codec.encode(cmd)
    sub = Admission.commands.bind(admission)
    await admission.process(sub, Received("cmd.submit.default", data, {}, 7, 1, Raw()))
    published = [(p.subject, p.data) for p in bus.published]
    rejected = codec.decode(next(d for s, d in published if s.startswith("ops.rejected")))
    assert (rejected.op_id, rejected.reason) == ("a", "message_too_large")
    assert any(s.startswith("dlq.admission") for s, _ in published)
    assert not any(s.startswith("ops.submitted") for s, _ in published)


# ---- a fold never raises ---------------------------------------------------------------------------

@pytest.fixture
def breaks_for(monkeypatch):
    """``breaks_for("x", "_submitted")``: the fold's helper raises for op x (a bug no check foresaw)."""
    from opsched.services.admission.state.fold import OpFold

    def breaks(op_id: str, helper: str) -> None:
        original = getattr(OpFold, helper)

        def failing(self, e, *args):
            if e.op_id == op_id:
                raise ValueError("cannot convert float infinity to integer")
            return original(self, e, *args)
        monkeypatch.setattr(OpFold, helper, failing)
    return breaks


def test_an_op_whose_submitted_cannot_be_folded_is_rejected_once_the_others_go_on(breaks_for):
    from tests.unit.admission_scenarios import decide

    breaks_for("x", "_submitted")
    state = fold(*ready("a"), *ready("x"))  # no exception
    assert state.fold.failures.count == 1
    decisions = decide(state)
    ends = [e for e in decisions if e.op_id == "x"]
    assert [(type(e).__name__, e.reason) for e in ends] == [("OperationRejected", "fold_failed")]
    assert "ValueError" in ends[0].message and "submitted" in ends[0].message
    assert [e.op_id for e in decisions if isinstance(e, OperationAdmitted)] == ["a"]
    state.apply(ends[0], seq=9)  # the rejection stored and folded back
    assert [e for e in decide(state) if e.op_id == "x"] == []


def test_after_a_restart_an_op_already_ended_for_a_fold_failure_is_not_ended_again(breaks_for):
    from tests.unit.admission_scenarios import decide

    breaks_for("x", "_submitted")
    ended = OperationRejected(op_id="x", at=T0, reason="fold_failed", message="admission could not fold it")
    state = AdmissionState()
    for seq, event in enumerate([*ready("x"), ended], start=1):
        state.apply(event, seq)
    assert state.ops["x"].status == Status.REJECTED
    assert decide(state) == []


def test_an_op_that_had_started_when_its_event_could_not_be_folded_fails_for_good_and_frees_its_quota(breaks_for):
    from tests.builders import admitted, running
    from tests.unit.admission_scenarios import decide

    state = fold(*ready("a"), admitted(submitted(op("a").max_retries(3).build(), op_id="a")))
    assert state.ops["a"].holds_quota
    breaks_for("a", "_lifecycle")
    state.apply(running("a"), seq=5)
    ends = decide(state)  # its end cannot be folded either (the same helper): it ends all the same, final
    assert [(type(e).__name__, e.reason) for e in ends] == [("OperationFailed", "fold_failed"),
                                                           ("FailureFinal", "fold_failed")]
    op_record = state.ops["a"]
    assert op_record.status == Status.FAILED and not op_record.holds_quota  # maxRetries 3: not retried
    state.apply(ends[0], seq=6)
    assert decide(state) == []


def test_a_fold_failure_on_an_op_already_ended_is_only_counted(breaks_for):
    from tests.builders import rejected
    from tests.unit.admission_scenarios import decide

    state = fold(*ready("a"), rejected("a"))
    breaks_for("a", "_failed")
    state.apply(failed("a"), seq=4)
    assert state.fold.failures.count == 1 and decide(state) == []


def test_an_op_stream_message_that_does_not_decode_is_skipped_and_counted(admission):
    admission._fold(b'{"type": "submitted", "opId": 5}', 1)
    admission._fold(b"not json", 2)
    assert admission.undecodable == 2 and admission.state.ops == {}


@pytest.mark.parametrize("body", [1000, 1900], ids=["the error text shortened", "the payload cut"])
def test_a_dead_letter_copy_of_a_message_near_the_limit_still_fits(body):
    from opsched.services.runtime.deadletter import fitted

    headers = {"Nats-Msg-Id": "dlq.admission.7", "Opsched-Original-Subject": "cmd.submit.default",
               "Opsched-Error-Reason": "message_too_large", "Opsched-Error": "e" * 1000}
    data, fit = fitted(b"x" * body, headers, 2000)
    assert wire_size(data, fit) <= 2000
    assert fit["Opsched-Original-Subject"] == "cmd.submit.default"
    assert (data == b"x" * body) == (body == 1000)
    assert fit.get("Opsched-Truncated-From") == (None if body == 1000 else str(body))
