"""The packing benchmark's simulation (``bench.packing``), on a stream small enough to follow by hand: two small
ops then an 8-GPU op on two 8-GPU nodes. binpack keeps a node whole for it; spread and today's placement do not."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from bench.packing import WORKLOAD, Arrival, PackingWorkload, Simulation, arrivals, load


def workload() -> PackingWorkload:
    return PackingWorkload.model_validate({"seeds": [1], "nodes": {"count": 2, "gpusPerNode": 8}, "ops": {
        "count": 3, "arrivalsPerMinute": 1, "sizes": {1: 0.5, 8: 0.5}, "minutes": {"min": 1, "max": 2}}})


STREAM = [Arrival("s1", 0.0, 1, 600.0), Arrival("s2", 10.0, 1, 600.0), Arrival("big", 20.0, 8, 60.0)]


@pytest.mark.parametrize("policy, big_starts", [("binpack", 20.0), ("spread", 600.0), ("today", 600.0)])
def test_an_eight_gpu_op_runs_at_once_under_binpack_and_waits_for_a_small_op_under_spread(policy, big_starts):
    sim = Simulation(workload(), policy, list(STREAM))
    figures = sim.run()
    assert sim.started["big"] == big_starts
    assert (sim.nodes["s1"] == sim.nodes["s2"]) == (policy == "binpack")
    assert figures["big_wait_mean_min"] == pytest.approx((big_starts - 20.0) / 60)


def test_every_policy_sees_the_same_arrivals_for_a_seed_and_the_file_is_valid():
    w = load(WORKLOAD)
    assert arrivals(w, 3) == arrivals(w, 3) and arrivals(w, 3) != arrivals(w, 4)
    assert abs(sum(w.ops.sizes.values()) - 1.0) < 1e-9
    with pytest.raises(ValidationError, match="gpusPerNod"):
        PackingWorkload.model_validate({"seeds": [1], "nodes": {"count": 2, "gpusPerNod": 8}, "ops": {
            "count": 1, "arrivalsPerMinute": 1, "sizes": {1: 1.0}, "minutes": {"min": 1, "max": 2}}})
