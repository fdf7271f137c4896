"""Scenario (a0)'s arithmetic (bench/anchor.py) and what the report makes of it (bench/report.py): the two
regimes and their nodes, the rates, (a) ÷ (a0) per round and its median over the rounds, the targets. No
benchmark runs here (the pod watch is fed given pods)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from bench import anchor
from bench.report import load_targets, summarize


def test_the_two_regimes_give_capacity_for_all_and_a_third_of_it() -> None:
    fit, over = anchor.regimes(300)

    assert (fit.name, fit.pods, fit.gpus) == ("fit", 300, 300)
    assert (over.name, over.pods, over.gpus) == ("over", 300, 100)
    assert anchor.regimes(2)[1].gpus == 1  # never a cluster without a GPU
    assert anchor.regimes(10, gpus=40)[1].gpus == 13  # 4-GPU ops: the GPUs they ask for, not the pods


def test_no_regime_without_pods() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        anchor.regimes(0)


def test_nodes_hold_exactly_the_regimes_gpus_spread_evenly() -> None:
    assert anchor.split(300) == [60, 60, 60, 60, 60]
    assert anchor.split(100) == [50, 50]
    assert anchor.split(30) == [30]
    assert anchor.split(130, per_node=64) == [44, 43, 43]
    assert anchor.regimes(90)[1].nodes("bench-r0", "A100") == ["bench-r0-over-0:30:A100"]
    with pytest.raises(ValueError):
        anchor.split(0)


def test_a_rate_is_what_ended_over_the_time_to_the_last_one() -> None:
    assert anchor.rate(300, began=10.0, last=22.0) == pytest.approx(25.0)
    assert anchor.rate(0, began=10.0, last=None) == 0.0
    assert anchor.rate(5, began=10.0, last=10.0) == 0.0


def test_the_ratio_is_a_over_a0_and_undefined_without_a0() -> None:
    assert anchor.ratio(16.6, 22.7) == pytest.approx(0.731, abs=1e-3)
    assert math.isnan(anchor.ratio(16.6, 0.0))
    assert math.isnan(anchor.ratio(16.6, math.nan))
    assert math.isnan(anchor.ratio(math.nan, 22.7))


def test_a_bare_pod_is_the_dispatchers_body_left_to_kube_scheduler() -> None:
    from bench.workload import gpu_spec

    pod = anchor.bare_pod(3, "bench-r0-fit-a0", gpu_spec(seconds=0.5))

    assert pod["metadata"]["namespace"] == "bench-r0-fit-a0"
    assert pod["metadata"]["name"] == "op-a00000003-0"
    assert "nodeName" not in pod["spec"]
    assert pod["spec"]["containers"][0]["command"] == ["sh", "-c", "sleep 0.5"]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def _pod(name: str, phase: str | None) -> SimpleNamespace:
    return SimpleNamespace(metadata=SimpleNamespace(name=name), status=SimpleNamespace(phase=phase))


def test_the_watch_keeps_the_first_time_each_pod_ended_and_is_done_when_all_have() -> None:
    times = iter([1.0, 2.0, 3.0])
    watch = anchor.PhaseWatch(core=None, namespace="ns", expected=2, clock=lambda: next(times))

    watch._seen([_pod("p0", "Running"), _pod("p1", "Succeeded")])
    watch._seen([_pod("p1", "Succeeded")])  # seen again later: the first time stays
    assert not watch.done.is_set()
    watch._seen([_pod("p0", "Failed")])

    assert watch.ended == {"p1": ("Succeeded", 1.0), "p0": ("Failed", 3.0)}
    assert watch.done.is_set()


def _round(a_fit: float, a0_fit: float, a_over: float, a0_over: float) -> dict:
    return {"a_kubernetes": {"succeeded_per_s": a_fit, "over": {"succeeded_per_s": a_over}},
            "a0_bare": {"fit": {"succeeded_per_s": a0_fit}, "over": {"succeeded_per_s": a0_over}}}


def test_the_ratios_are_taken_within_each_round_then_their_median_is_checked() -> None:
    rounds = [_round(16.6, 22.7, 12.0, 8.0), _round(20.0, 20.0, 10.0, 10.0), _round(30.0, 25.0, 9.0, 6.0)]

    summary, ratios, verdicts = summarize(rounds, load_targets())

    fit, over = ratios["a_vs_a0_fit"], ratios["a_vs_a0_over"]
    assert (fit["median"], fit["min"], fit["max"]) == pytest.approx((1.0, 16.6 / 22.7, 1.2))
    assert (over["median"], over["min"], over["max"]) == pytest.approx((1.5, 1.0, 1.5))
    assert (fit["target"], over["target"]) == ("≥ 0.9", "≥ 1.3")
    assert fit["pass"] is True and over["pass"] is True
    assert summary["a0_bare.over.succeeded_per_s"]["median"] == 8.0
    status = {v.name: v.status for v in verdicts}
    assert status["a_vs_a0_fit"] == status["a_vs_a0_over"] == "pass"


def test_a_median_below_its_floor_fails_and_a_missing_anchor_is_not_measured() -> None:
    _, ratios, verdicts = summarize([_round(16.6, 22.7, 12.0, 0.0)], load_targets())

    status = {v.name: v.status for v in verdicts}
    assert status["a_vs_a0_fit"] == "fail"  # 0.73 < 0.9, as the issue measured
    assert status["a_vs_a0_over"] == "missing"
    assert ratios["a_vs_a0_fit"]["pass"] is False


def test_the_old_create_rate_anchor_is_reported_without_a_target() -> None:
    spec = load_targets()
    _, ratios, _ = summarize([{"a_kubernetes": {"ops_per_s": 80.0}, "calibration": {
        "k8s_create_8_threads_per_s": 400.0}}], spec)

    assert "a_vs_api_concurrent" not in spec.targets
    assert ratios["a_vs_api_concurrent"]["median"] == pytest.approx(0.2)
    assert ratios["a_vs_api_concurrent"]["target"] is None
