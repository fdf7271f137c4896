"""Scenario (s)'s arithmetic (bench/scaling_figures.py) and its CPU tally (bench/scaling.Pids), on given
numbers: which setups run, CPU per op, the rate it predicts, the table. No benchmark runs here."""
from __future__ import annotations

import math

import pytest

from bench import scaling_figures as sf
from bench.report import fmt, summarize
from bench.scaling import MACHINE, WALL, Pids


def test_setups_scale_cost_cache_and_dispatcher_and_keep_one_admission_leader() -> None:
    plan = {s.name: s for s in sf.setups()}

    assert list(plan) == ["r1", "r2", "r4", "r1_admission2", "r1_nats3"]
    assert dict(plan["r4"].replicas) == {"admission": 1, "cost": 4, "cache": 4, "dispatcher": 4}
    assert dict(plan["r1_admission2"].replicas) == {"admission": 2, "cost": 1, "cache": 1, "dispatcher": 1}
    assert (plan["r1_nats3"].nats_nodes, plan["r1_nats3"].stream_replicas) == (3, 3)
    assert (plan["r1"].nats_nodes, plan["r1"].stream_replicas) == (1, 1)


def test_setups_without_standby_or_cluster_and_with_other_counts() -> None:
    assert [s.name for s in sf.setups((1, 8), standby=False, cluster=0)] == ["r1", "r8"]
    assert sf.setups((1,), standby=False, cluster=5)[-1].stream_replicas == 3  # streams have at most 3 replicas
    with pytest.raises(ValueError):
        sf.setups((0, 2))


def test_cpu_per_op_is_milliseconds_per_completed_op_with_a_total() -> None:
    per_op = sf.per_op_ms({"admission": 1.0, "nats": 0.5}, ops=500)

    assert per_op == pytest.approx({"admission": 2.0, "nats": 1.0, "total": 3.0})
    assert math.isnan(sf.per_op_ms({"admission": 1.0}, ops=0)["total"])


def test_the_cores_bound_when_the_work_is_spread() -> None:
    # 8 ms of CPU per op over 2 cores: 250 ops/s; the busiest process (2 ms/op) alone would allow 500
    got = sf.predicted_per_s({"total": 8.0}, busiest_ms=2.0, cores=2)

    assert got == pytest.approx({"cores_bound_per_s": 250.0, "process_bound_per_s": 500.0, "predicted_per_s": 250.0,
                                 "predicted_free_per_s": 250.0})


def test_other_work_on_the_machine_leaves_fewer_cores() -> None:
    # other processes kept 0.5 of the 2 cores busy: 1.5 cores ÷ 8 ms per op
    got = sf.predicted_per_s({"total": 8.0}, busiest_ms=2.0, cores=2, others_cores=0.5)

    assert got["predicted_per_s"] == pytest.approx(250.0)
    assert got["predicted_free_per_s"] == pytest.approx(187.5)
    assert sf.predicted_per_s({"total": 8.0}, 2.0, 2, others_cores=math.nan)["predicted_free_per_s"] == 250.0


def test_one_busy_process_bounds_the_rate_below_the_cores() -> None:
    # 4 ms per op in total would allow 500 ops/s on 2 cores, but one process takes 3 ms of each op: 333/s
    got = sf.predicted_per_s({"total": 4.0}, busiest_ms=3.0, cores=2)

    assert got["predicted_per_s"] == pytest.approx(1000 / 3)


def test_figures_of_a_setup() -> None:
    burst = {"completed": 1000.0, "ops_per_s": 200.0, "burst_dispatch_p50_ms": 5.0}
    cpu_s = {"admission": 1.0, "cost": 1.0, "cache": 1.0, "dispatcher": 1.0, "nats": 1.5, "bench": 0.5}

    row = sf.figures(burst, sf.Tally(cpu_s, busiest=("admission-0", 1.0), others_cores=0.25), cores=2)

    assert row["cpu_ms_per_op_total"] == pytest.approx(6.0)
    assert row["cpu_ms_per_op_nats"] == pytest.approx(1.5)
    assert row["busiest_ms_per_op"] == pytest.approx(1.0)
    assert row["predicted_per_s"] == pytest.approx(2000 / 6)
    assert row["measured_vs_predicted"] == pytest.approx(200 / (2000 / 6))
    assert row["predicted_free_per_s"] == pytest.approx(1750 / 6)
    assert row["measured_vs_predicted_free"] == pytest.approx(200 / (1750 / 6))
    assert row["burst_dispatch_p50_ms"] == 5.0
    assert row["others_cores"] == 0.25


def test_the_tally_sums_replicas_and_nodes_and_finds_the_busiest_python_process() -> None:
    pids = Pids({"cost-0": ("cost", 1), "cost-1": ("cost", 2), "nats-0": ("nats", 3), "nats-1": ("nats", 4)})
    readings = iter([{"cost-0": 1.0, "cost-1": 2.0, "nats-0": 0.0, "nats-1": 0.0, "bench": 10.0,
                      MACHINE: 100.0, WALL: 50.0},
                     {"cost-0": 1.5, "cost-1": 3.0, "nats-0": 4.0, "nats-1": 2.0, "bench": 10.25,
                      MACHINE: 109.75, WALL: 55.0}])
    pids.read = lambda: next(readings)  # type: ignore[method-assign]

    tally = pids.start().stop()

    assert tally.parts["cost"] == pytest.approx(1.5)
    assert tally.parts["nats"] == pytest.approx(6.0)
    assert tally.parts["bench"] == pytest.approx(0.25)
    assert tally.parts["admission"] == 0.0
    assert tally.busiest == ("cost-1", pytest.approx(1.0))  # nats-server (multi-threaded) is not a candidate
    assert tally.others_cores == pytest.approx((9.75 - 7.75) / 5.0)  # the machine's busy seconds not ours


def test_the_table_has_a_row_per_measured_setup_in_plan_order() -> None:
    rows = {name: {"ops_per_s": rate, "predicted_per_s": 2 * rate} for name, rate in (("r4", 100.0), ("r1", 250.0))}
    summary, _, _ = summarize([{sf.SECTION: rows}], _targets())

    lines = sf.table(summary, fmt).splitlines()

    assert len(lines) == 4
    assert lines[2].startswith("| r1 | 1/1/1/1 | 1 server |") and "| 250 | 500 |" in lines[2]
    assert lines[3].startswith("| r4 | 1/4/4/4 | 1 server |") and "| 100 | 200 |" in lines[3]
    assert lines[3].rstrip(" |").endswith("–")  # a figure not measured


def test_no_table_without_the_scenario() -> None:
    assert sf.table({"b_pipeline.ops_per_s": {"median": 1.0}}, fmt) == ""


def _targets():
    from bench.report import load_targets

    return load_targets()
