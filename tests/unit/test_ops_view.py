"""`opsched ops -o json`: each op as a typed ``OpItem`` (numbers as numbers, times, money, params), from its
events and from its summary once it left admission's memory (old summaries too); a sweep's trial params."""
from __future__ import annotations

from datetime import timedelta

import msgspec

from opsched.output import full
from opsched.proto.events import CostRecorded, Money
from opsched.proto.summaries import OpSummary, accelerators_of_label
from opsched.view import OpsView, trial_params
from tests.builders import T0, admitted, cost_estimated, op, running, submitted, succeeded


def trial(op_id: str, iteration: int, **params):
    spec = msgspec.structs.replace(op("sweep").gpus(1).project("vision").params(**params).build(), batch="b-1",
                                   iteration=iteration, tags=["nightly", "team=cv"])
    return submitted(spec, op_id=op_id, by="alice")


def test_an_item_from_events_has_its_facts_typed():
    view = OpsView()
    sub = trial("s-0", 0, lr=0.1, bs=64)
    for event in (sub, cost_estimated("s-0", amount=1.5), admitted(sub, at=T0 + timedelta(seconds=5)),
                  running("s-0", at=T0 + timedelta(seconds=10), node="gpu-1"),
                  succeeded("s-0", at=T0 + timedelta(seconds=70), node="gpu-1"),
                  CostRecorded(op_id="s-0", at=T0 + timedelta(seconds=70), amount=0.25, seconds=60, queue="default")):
        view.fold(event)
    [item] = view.items()
    assert (item.op_id, item.name, item.project, item.user, item.status) == ("s-0", "sweep", "vision", "alice",
                                                                            "succeeded")
    assert (item.gpus, item.accelerators, item.node) == (1, {"nvidia.com/gpu": 1.0}, "gpu-1")
    assert item.estimate == Money(amount=1.5) and item.cost == Money(amount=0.25)
    assert (item.created_at, item.admitted_at) == (T0, T0 + timedelta(seconds=5))
    assert (item.started_at, item.ended_at, item.duration_s) == (T0 + timedelta(seconds=10),
                                                                 T0 + timedelta(seconds=70), 60.0)
    assert (item.batch, item.iteration, item.params, item.tags) == ("b-1", 0, {"lr": 0.1, "bs": 64},
                                                                   ["nightly", "team=cv"])
    assert item.trial_params == {}  # alone in its batch: nothing differs
    out = full(item)
    assert out["opId"] == "s-0" and out["createdAt"] == "2026-01-01T12:00:00Z" and out["endpoint"] is None


def test_a_running_op_lasts_until_now_and_one_not_started_has_no_duration():
    view = OpsView()
    sub = trial("s-0", 0)
    view.fold(sub)
    assert view.items(now=T0)[0].duration_s is None
    view.fold(running("s-0", at=T0, node="n"))
    assert view.items(now=T0 + timedelta(seconds=42))[0].duration_s == 42.0


def test_trial_params_are_the_params_that_differ_within_the_batch():
    view = OpsView()
    for i, lr in enumerate((0.1, 0.01)):
        view.fold(trial(f"s-{i}", i, lr=lr, bs=64))
    view.fold(submitted(op("alone").params(lr=1).build(), op_id="x"))
    assert trial_params(list(view.rows.values())) == {"s-0": {"lr": 0.1}, "s-1": {"lr": 0.01}}
    assert {i.op_id: i.trial_params for i in view.items()} == {"s-0": {"lr": 0.1}, "s-1": {"lr": 0.01}, "x": {}}


def test_an_item_from_a_summary_keeps_what_the_summary_holds():
    summary = OpSummary(op_id="old", status="succeeded", name="train", queue="q", project="p", requested_by="bob",
                        gpus="2", accelerators={"nvidia.com/gpu": 2.0}, node="gpu-1", submitted_at=T0,
                        running_since=T0 + timedelta(seconds=1), ended_at=T0 + timedelta(seconds=11),
                        estimate=0.5, cost=0.4, batch="b", iteration=3, tags=["t"], params={"lr": 1})
    view = OpsView()
    view.add_summary(summary)
    [item] = view.items()
    assert (item.gpus, item.estimate, item.cost, item.duration_s) == (2, Money(amount=0.5), Money(amount=0.4), 10.0)
    assert (item.user, item.batch, item.iteration, item.tags, item.params) == ("bob", "b", 3, ["t"], {"lr": 1})
    assert item.history == [] and item.created_at == T0


def test_a_summary_written_before_accelerators_were_kept_reads_them_from_its_gpus_label():
    old = msgspec.json.decode(b'{"type":"op_summary","opId":"o","status":"failed","gpus":"2,1xamd.com"}',
                              type=OpSummary)
    view = OpsView()
    view.add_summary(old)
    [item] = view.items()
    assert (item.gpus, item.accelerators) == (3, {"nvidia.com/gpu": 2.0, "amd.com/gpu": 1.0})
    assert (item.estimate, item.cost, item.batch, item.params) == (None, None, "", {})
    assert accelerators_of_label("-") == {} and accelerators_of_label("8GiB-mem") == {}


def test_trial_params_of_a_filtered_listing_come_from_the_whole_view():
    from opsched.view import items

    view = OpsView()
    for i, lr in enumerate((0.1, 0.01)):
        view.fold(trial(f"s-{i}", i, lr=lr, bs=64))
    every = list(view.rows.values())
    assert [i.trial_params for i in items(every[1:], among=every)] == [{"lr": 0.01}]
    assert [i.trial_params for i in items(every[1:])] == [{}]
