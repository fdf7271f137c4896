"""Admission fed generated and mutated messages through its real entry points: every command through its
consumer's decoder and handler table (property b: nothing escapes but the designed refusal, ``InvalidInput``),
every op-stream and cluster message through its replay fold (property c: a fold never raises), then its
cycle and its ``why`` answers; after it all, every op is in a known status with a reason (property d), and
what an op holds in memory stays bounded (property e)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsched.proto import codec
from opsched.proto.cluster import CLUSTER_EVENTS
from opsched.proto.commands import COMMANDS
from opsched.proto.config import SetQueues
from opsched.proto.events import EVENTS, OperationSubmitted
from opsched.proto.limits import MAX_PODS_PER_OP, MAX_SPEC_BYTES
from opsched.proto.queries import QueuesRequest, SchedulesRequest, WhyRequest
from opsched.proto.schedules import SCHEDULE_COMMANDS, SCHEDULE_EVENTS
from tests.fuzz.harness import AdmissionHarness, run
from tests.fuzz.mutations import encode_raw, mangled, mutated
from tests.fuzz.wire import OP_IDS, encode, message

COMMAND_TYPES = COMMANDS + (SetQueues,) + SCHEDULE_COMMANDS
STREAM_TYPES = EVENTS + SCHEDULE_EVENTS
QUERY_TYPES = (WhyRequest, QueuesRequest, SchedulesRequest)  # what admission serves


def submitted_ops() -> st.SearchStrategy[list[bytes]]:
    """A few ops submitted, each on its way (an estimate, a cache answer, an admission, a run, an end...)."""
    return st.lists(message(OperationSubmitted).map(encode), min_size=1, max_size=3)


def stream(sometimes_mutated: bool) -> st.SearchStrategy[bytes]:
    """One message of the op stream: any event, perhaps mutated or broken."""
    valid = st.sampled_from(STREAM_TYPES).flatmap(message)
    if not sometimes_mutated:
        return valid.map(encode)
    return st.one_of(valid.map(encode), valid.flatmap(mutated).map(encode_raw),
                     valid.map(encode).flatmap(mangled))


def check_memory(h: AdmissionHarness) -> None:
    """Property (e): an op's record holds a spec under the contract's size and a bounded number of pods."""
    for op in h.state.ops.values():
        assert len(op.pods) <= MAX_PODS_PER_OP, f"{op.op_id} holds {len(op.pods)} pods"
        assert len(codec.encode(op.spec)) <= MAX_SPEC_BYTES, f"{op.op_id}'s spec is over {MAX_SPEC_BYTES} B"


def feed(h: AdmissionHarness, data: st.DataObject, sometimes_mutated: bool) -> None:
    for submitted in data.draw(submitted_ops()):
        h.fold(submitted)
    for _ in range(data.draw(st.integers(1, 12))):
        h.fold(data.draw(stream(sometimes_mutated)))
        if data.draw(st.booleans()):
            h.cycle()
    h.cycle()
    check_memory(h)
    h.check_every_op_has_a_state_with_a_reason()


@settings(max_examples=50)  # 100 until 2026-11-28: half of this file's CPU, for the suite's 10 minutes
@given(data=st.data())
def test_a_generated_op_stream_folds_and_cycles_without_raising(data):
    feed(AdmissionHarness(), data, sometimes_mutated=False)


@settings(max_examples=50)
@given(data=st.data())
def test_a_mutated_op_stream_folds_and_cycles_without_raising(data):
    feed(AdmissionHarness(), data, sometimes_mutated=True)


@settings(max_examples=15)
@given(data=st.data())
def test_mutated_cluster_facts_are_folded_or_ignored(data):
    h = AdmissionHarness()
    fact = data.draw(st.sampled_from(CLUSTER_EVENTS).flatmap(message))
    h.observe(encode_raw(data.draw(mutated(fact))) if data.draw(st.booleans()) else encode(fact))
    feed(h, data, sometimes_mutated=False)


@pytest.mark.parametrize("cls", COMMAND_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=12)
@given(data=st.data())
def test_a_command_is_handled_or_refused_as_invalid_input(cls, data):
    h = AdmissionHarness()
    feed(h, data, sometimes_mutated=False)
    command = data.draw(message(cls))
    h.command(encode_raw(data.draw(mutated(command))) if data.draw(st.booleans()) else encode(command))
    h.cycle()
    h.tick()
    check_memory(h)
    h.check_every_op_has_a_state_with_a_reason()


@settings(max_examples=10)
@given(data=st.data())
def test_every_op_id_asked_about_gets_an_answer(data):
    h = AdmissionHarness()
    feed(h, data, sometimes_mutated=False)
    for op_id in OP_IDS + ("never-seen",):
        assert h.why(op_id).op_id == op_id


@settings(max_examples=30)
@given(data=st.data())
def test_every_query_even_a_broken_one_gets_an_answer(data):
    h = AdmissionHarness()
    feed(h, data, sometimes_mutated=False)
    request = data.draw(st.sampled_from(QUERY_TYPES).flatmap(message))
    raw = data.draw(st.one_of(st.just(encode(request)), mutated(request).map(encode_raw), mangled(encode(request))))
    assert codec.decode_query(run(h.service.answer(raw)))
