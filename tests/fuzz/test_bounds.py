"""Generated inputs past issue 14's bounds, each class of them in its own test: a spec past a bound of
``proto.limits`` (replicas, groups, env, labels, names, tags, size), a bad quantity, a raw priority past
``MAX_PRIORITY``, a negative or zero cost, an unbounded schedule, an evaluator or template bomb.

Each class is refused where the contract says (on decode, at submit, or by disabling a schedule). They run
without shrinking (``KNOWN``): one failing example names the class; shrinking it costs minutes."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import Phase, Verbosity, assume, given, settings
from hypothesis import strategies as st

from opsched.proto import codec
from opsched.proto.events import OperationRunning, OperationSubmitted, OperationSucceeded
from opsched.proto.limits import (
    MAX_ENV_PER_CONTAINER,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_PODS_PER_OP,
    MAX_PRIORITY,
    MAX_REPLICA_GROUPS,
    MAX_SPEC_BYTES,
    MAX_TAGS,
)
from opsched.proto.spec import OpSpec
from tests.fuzz.harness import DECODE_ERRORS, AdmissionHarness, CostHarness
from tests.fuzz.mutations import BAD_QUANTITIES
from tests.fuzz.test_admission import check_memory
from tests.fuzz.wire import RESOURCES, T0, encode, message

KNOWN = settings(max_examples=10, phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
                 verbosity=Verbosity.quiet)  # quiet: no patch of "failing examples" written for an xfail
_specs = message(OpSpec)


def _container(spec: dict[str, Any], group: bool) -> dict[str, Any]:
    """The main container, or a replica group's (one is added)."""
    if not group:
        return spec["container"]
    spec["replicas"] = [{"name": "worker", "count": 1, "container": {"image": "python:3.11-slim"}}]
    return spec["replicas"][0]["container"]


def _past(spec: dict[str, Any], how: str, group: bool) -> dict[str, Any]:
    """``spec`` with one field past its bound."""
    container, env = _container(spec, group), spec.setdefault("environment", {})
    if how == "replicas":
        spec["replicas"] = [{"name": "worker", "count": MAX_PODS_PER_OP, "container": {"image": "i"}}]
    elif how == "negative_replicas":
        spec["replicas"] = [{"name": "worker", "count": -1, "container": {"image": "i"}}]
    elif how == "groups":
        spec["replicas"] = [{"name": f"g{i}", "count": 1, "container": {"image": "i"}}
                            for i in range(MAX_REPLICA_GROUPS + 1)]
    elif how == "env":
        container["env"] = [{"name": f"E{i}", "value": ""} for i in range(MAX_ENV_PER_CONTAINER + 1)]
    elif how == "labels":
        env["labels"] = {f"l{i}": "v" for i in range(MAX_LABELS + 1)}
    elif how == "label_value":
        env["labels"] = {"team": "v" * (MAX_LABEL_VALUE_CHARS + 1)}
    elif how == "name":
        spec["name"] = "Not_A.DNS label!"
    elif how == "tags":
        spec["tags"] = [f"t{i}" for i in range(MAX_TAGS + 1)]
    elif how == "size":
        container["args"] = ["x" * MAX_SPEC_BYTES]
    return spec


SIZES = ("replicas", "negative_replicas", "groups", "env", "labels", "label_value", "name", "tags", "size")
DECODE_REFUSES = tuple(h for h in SIZES if h != "size")  # a spec's size is checked at submit (below), not on decode
WHOLE_ONLY = ("0.5", "1e-400")  # bad only for devices: half a CPU, or a tiny memory quantity, is well-formed


def _bad_for(resource: str, value: str) -> bool:
    return "/" in resource or value not in WHOLE_ONLY


@KNOWN
@given(spec=_specs, how=st.sampled_from(DECODE_REFUSES), group=st.booleans())
def test_a_spec_past_a_bound_of_the_contract_is_refused_on_decode(spec, how, group):
    with pytest.raises(DECODE_ERRORS):
        codec.decode_spec(encode(_past(spec, how, group)))


@KNOWN
@given(spec=_specs, resource=st.sampled_from(RESOURCES), value=st.sampled_from(BAD_QUANTITIES),
       where=st.sampled_from(("limits", "requests")), group=st.booleans())
def test_a_spec_with_a_bad_quantity_is_refused_on_decode(spec, resource, value, where, group):
    assume(_bad_for(resource, value))
    _container(spec, group).setdefault("resources", {})[where] = {resource: value}
    with pytest.raises(DECODE_ERRORS):
        codec.decode_spec(encode(spec))


def _submitted_with(spec: dict[str, Any]) -> bytes:
    return encode({"type": "submitted", "opId": "a", "at": "2026-01-01T00:00:00Z", "queue": "default",
                   "submittedAt": "2026-01-01T00:00:00Z", "spec": spec})


@KNOWN
@given(spec=_specs, resource=st.sampled_from(RESOURCES), value=st.sampled_from(BAD_QUANTITIES), group=st.booleans())
def test_a_submitted_op_with_a_bad_quantity_on_the_stream_is_folded_without_raising(spec, resource, value, group):
    _container(spec, group).setdefault("resources", {})["limits"] = {resource: value}
    h = AdmissionHarness()
    h.fold(_submitted_with(spec))
    h.cycle()
    h.check_every_op_has_a_state_with_a_reason()


@KNOWN
@given(spec=_specs, count=st.sampled_from((MAX_PODS_PER_OP, 5 * MAX_PODS_PER_OP)))
def test_what_an_op_holds_in_admission_stays_bounded_however_many_replicas_it_asks_for(spec, count):
    spec["replicas"] = [{"name": "worker", "count": count, "container": {"image": "i"}}]
    h = AdmissionHarness()
    h.fold(_submitted_with(spec))
    check_memory(h)


@KNOWN
@given(spec=_specs, where=st.sampled_from(("args", "env", "params", "description")))
def test_a_submit_whose_spec_is_past_the_size_bound_is_refused(spec, where):
    big = "x" * (MAX_SPEC_BYTES + 1)
    container = spec["container"]
    if where == "args":
        container["args"] = [big]
    elif where == "env":
        container["env"] = [{"name": "BIG", "value": big}]
    elif where == "params":
        spec["params"] = {"big": big}
    else:
        spec["description"] = big
    h = AdmissionHarness()
    h.command(encode({"type": "submit", "opId": "a", "spec": spec}))
    assert "a" not in h.state.ops or h.state.ops["a"].status.terminal


@KNOWN
@given(spec=_specs, priority=st.sampled_from((MAX_PRIORITY + 1, 2**63 - 1, -(2**63))))
def test_a_raw_priority_past_the_bound_never_ranks_an_op(spec, priority):
    spec["priority"] = priority
    h = AdmissionHarness()
    h.command(encode({"type": "submit", "opId": "a", "spec": spec}))
    assert all(abs(op.priority) <= MAX_PRIORITY for op in h.state.ops.values())


@KNOWN
@given(spec=_specs, cost=st.sampled_from((-5.0, -1e12, -1e-9)))
def test_a_negative_spec_cost_is_refused_on_decode(spec, cost):
    spec["cost"] = cost
    with pytest.raises(DECODE_ERRORS):
        codec.decode_spec(encode(spec))


@KNOWN
@given(spec=_specs, cost=st.sampled_from((0.0, 0.01, 1.0)))
def test_a_spec_cost_never_lowers_the_price_below_the_catalogue(spec, cost):
    spec["container"]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    spec.pop("cost", None)  # priced by the catalogue alone
    priced = codec.decode_spec(encode(spec))
    spec["cost"] = cost
    charged = codec.decode_spec(encode(spec))
    amounts = []
    for s in (priced, charged):
        h = CostHarness()
        out = h.handle(OperationSubmitted(op_id="a", at=T0, spec=s, queue="default", submitted_at=T0))
        out += h.handle(OperationRunning(op_id="a", at=T0, pod_name="p"))
        out += h.handle(OperationSucceeded(op_id="a", at=T0 + timedelta(hours=10)))
        amounts.append([getattr(e, "amount", None) or e.estimate.amount for e in out])
    assert all(b >= a >= 0 for a, b in zip(*amounts)), amounts


SCHEDULE_BOMBS = ({"kind": "interval", "frequencyS": 10**18}, {"kind": "interval", "frequencyS": 1},
                  {"kind": "datetime", "startAt": "9999-12-31T23:59:30Z"},
                  {"kind": "interval", "frequencyS": 60, "startAt": "9999-12-31T23:59:30Z"},
                  {"kind": "cron", "cron": "* * * * * *"})


@KNOWN
@given(op=_specs, bomb=st.sampled_from(SCHEDULE_BOMBS))
def test_a_schedule_past_its_bounds_is_refused_or_disabled_and_the_others_go_on(op, bomb):
    h = AdmissionHarness()
    h.command(encode({"type": "create_schedule", "scheduleId": "good", "op": op,
                      "spec": {"kind": "interval", "frequencyS": 3600}}))
    h.command(encode({"type": "create_schedule", "scheduleId": "bad", "op": op, "spec": bomb}))
    for later in (0, 3600, 400 * 86400):
        fired = h.service.schedules.due(T0 + timedelta(seconds=later))
        if later == 3600:
            assert [f.op_id for f in fired] == ["good"]


DEEP = "(" * 5000 + "1" + ")" * 5000
BIG = ("'a' * 10**7", "[0] * 10**7", "-" * 20000 + "1", "(((10**64)**64)**64)")
# (where, expression): deep or huge expressions, and evaluator bombs (conditions evaluated, templates rendered)
REFUSED = [(where, DEEP) for where in ("conditions", "args", "queue")] + [
    (where, bomb) for where in ("args", "queue") for bomb in BIG]
BOMBS = [("conditions", bomb) for bomb in BIG] + [("args", "10**10**10**10**10")]  # jinja: left to right


def _submit_bomb(spec: dict[str, Any], where: str, bomb: str) -> list:
    if where == "conditions":
        spec["conditions"] = "{{ " + bomb + " }}"
    elif where == "args":
        spec["container"]["args"] = ["{{ " + bomb + " }}"]
    else:
        spec["queue"] = "{{ " + bomb + " }}"
    h = AdmissionHarness()
    return [codec.type_of(e) for e in h.command(encode({"type": "submit", "opId": "a", "spec": spec}))]


@KNOWN
@given(spec=_specs, case=st.sampled_from(REFUSED))
def test_a_deep_or_huge_expression_in_a_template_is_refused_at_submit(spec, case):
    assert _submit_bomb(spec, *case) == ["rejected"]


@KNOWN
@given(spec=_specs, case=st.sampled_from(BOMBS))
def test_an_evaluator_bomb_in_conditions_is_refused_at_submit(spec, case):
    assert _submit_bomb(spec, *case) == ["rejected"]
