"""The cost service, the cache and the dispatcher's pod builder fed generated and mutated events (each
decoded by the real decoder first, as their consumers do): no handler raises (property b: none of these
handlers has a designed refusal of its own; their bad input is refused at decode), no fold raises
(property c), and every pod the dispatcher would create is a plain JSON document."""
from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsched.proto import codec
from opsched.proto.events import OperationAdmitted, OperationRunning, OperationSubmitted
from opsched.proto.lifecycle import ATTEMPT_ENDS, OP_ENDS
from opsched.proto.queries import CostRequest
from opsched.rules.podspec import build_pods
from opsched.services.dispatcher.dispatch import dispatch
from tests.builders.clock import FakeClock
from tests.fuzz.harness import DECODE_ERRORS, CacheHarness, CostHarness, ctx, run
from tests.fuzz.mutations import encode_raw, mutated
from tests.fuzz.wire import T0, encode, message


def decoded(data: st.DataObject, types: tuple[type, ...], sometimes_mutated: bool = True):
    """A generated event of ``types``, perhaps mutated, as its consumer decodes it (None: refused)."""
    doc = data.draw(st.sampled_from(types).flatmap(message))
    raw = encode_raw(data.draw(mutated(doc))) if sometimes_mutated and data.draw(st.booleans()) else encode(doc)
    try:
        return codec.decode_event(raw)
    except DECODE_ERRORS:
        return None


COST_TYPES = (OperationSubmitted, OperationRunning, *ATTEMPT_ENDS)
CACHE_TYPES = (OperationSubmitted, *OP_ENDS)


@settings(max_examples=40)
@given(data=st.data())
def test_the_cost_service_handles_every_event_it_consumes_and_folds_every_one(data):
    h = CostHarness()
    for _ in range(data.draw(st.integers(1, 6))):
        event = decoded(data, COST_TYPES)
        if event is not None:
            for out in h.handle(event):
                h.fold(codec.encode(out))
            h.fold(codec.encode(event))
    answer = codec.decode_query(run(h.service.state.answer(codec.encode(CostRequest()))))
    assert answer is not None


@settings(max_examples=40)
@given(data=st.data())
def test_the_cache_answers_every_event_it_consumes(data):
    h = CacheHarness()
    for _ in range(data.draw(st.integers(1, 6))):
        event = decoded(data, CACHE_TYPES)
        if event is not None:
            for out in h.handle(event):
                assert codec.decode_event(codec.encode(out)) == out


@settings(max_examples=60)
@given(data=st.data())
def test_an_admitted_op_is_dispatched_or_refused_and_its_pods_are_plain_json(data):
    admitted = decoded(data, (OperationAdmitted,))
    if admitted is None:
        return
    assert isinstance(admitted, OperationAdmitted)
    outcome = run(dispatch(admitted, ctx("dispatcher", FakeClock(T0)), None, None))
    if codec.type_of(outcome) == "rejected":
        return
    pods = build_pods(admitted)
    assert len(pods) == admitted.spec.main_pods + sum(g.count for g in admitted.spec.replicas if g.count > 0)
    for pod in pods:
        assert json.loads(json.dumps(pod)) == pod


@pytest.mark.parametrize("cls", [OperationSubmitted, OperationAdmitted], ids=lambda c: c.__name__)
@settings(max_examples=20)
@given(data=st.data())
def test_a_spec_decoded_from_the_wire_encodes_back_to_the_same_spec(cls, data):
    event = decoded(data, (cls,))
    if event is not None:
        spec = event.spec  # type: ignore[attr-defined]
        assert codec.decode_spec(msgspec.json.encode(spec)) == spec
