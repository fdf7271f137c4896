"""What a node costs from its creation to its removal (``services.cost.node_meter``), split by what ran on it, and
the open nodes' spend so far."""
from __future__ import annotations

from datetime import timedelta

import pytest

from opsched.proto.cluster import NodeObserved, NodeRemoved
from opsched.proto.events import OperationRunning
from opsched.proto.prices import PricePool, Prices
from opsched.rules.node_pools import token_of
from opsched.rules.pricing import node_hourly
from opsched.services.cost.node_meter import NodeMeter
from opsched.services.cost.occupancy import Occupancy
from tests.builders import GPU, GPU_PRODUCT, T0, op, submitted, succeeded, t

HOUR = 3600.0
LABELS = {"pool": "a100", GPU_PRODUCT: "A100"}
ALLOC = {GPU: "8", "cpu": "96", "memory": "1000Gi"}
PRICED = Prices(pools=[PricePool(name="a100-nodes", match={"pool": "a100"}, node_hour=16.0)])


def pool_of(agent: str, labels: dict[str, str]) -> str:
    return "a100" if labels.get("pool") == "a100" else ""


def meter_with_one_4_gpu_op_for_the_first_hour() -> NodeMeter:
    occ = Occupancy()
    occ.fold(submitted(op().gpus(4).build()))
    occ.fold(OperationRunning(op_id="op-1", at=T0, pod_name="p", node="gpu-a"))
    occ.fold(succeeded(at=t(HOUR)))
    meter = NodeMeter(occ)
    meter.observe(NodeObserved(node="gpu-a", at=T0, labels=LABELS, allocatable=ALLOC, created=T0))
    return meter


def removal(**kw) -> NodeRemoved:
    return NodeRemoved(node="gpu-a", at=t(2 * HOUR), **{"created": T0, "labels": LABELS, "allocatable": ALLOC, **kw})


def test_an_8_gpu_node_for_2_hours_with_a_4_gpu_op_for_one_splits_busy_stranded_idle():
    meter = meter_with_one_4_gpu_op_for_the_first_hour()
    charge = meter.charge(removal(), pool_of, Prices())
    assert charge is not None
    _, hourly = node_hourly(Prices(), LABELS, ALLOC)
    assert charge.amount == pytest.approx(2 * hourly)
    # busy 4 GPU-h, stranded 4 GPU-h, idle 8 GPU-h of 16: pro rata of the amount
    assert (charge.busy, charge.stranded, charge.idle) == pytest.approx(
        (charge.amount / 4, charge.amount / 4, charge.amount / 2))
    assert charge.busy + charge.stranded + charge.idle == pytest.approx(charge.amount)
    assert (charge.pool, charge.price_pool, charge.gpu_hours, charge.seconds) == ("a100", "", 16.0, 2 * HOUR)
    assert (charge.op_id, charge.at, charge.created) == (token_of("", "gpu-a", T0), t(2 * HOUR), T0)


def test_node_hour_overrides_allocatable_pricing():
    charge = meter_with_one_4_gpu_op_for_the_first_hour().charge(removal(), pool_of, PRICED)
    assert charge is not None
    assert (charge.price_pool, charge.amount, charge.busy, charge.stranded, charge.idle) == (
        "a100-nodes", 32.0, 8.0, 8.0, 16.0)


def test_a_removal_without_a_node_observed_before_it_is_charged_from_its_own_created():
    charge = NodeMeter(Occupancy()).charge(removal(), pool_of, PRICED)
    assert charge is not None
    assert (charge.amount, charge.idle, charge.busy) == (32.0, 32.0, 0.0)


def test_without_a_creation_time_the_first_fact_seen_is_the_start():
    meter = NodeMeter(Occupancy())
    meter.observe(NodeObserved(node="gpu-a", at=t(HOUR), labels=LABELS, allocatable=ALLOC))
    charge = meter.charge(NodeRemoved(node="gpu-a", at=t(2 * HOUR)), pool_of, PRICED)
    assert charge is not None
    assert (charge.created, charge.amount) == (t(HOUR), 16.0)


def test_a_node_never_seen_and_without_created_is_not_charged():
    assert NodeMeter(Occupancy()).charge(NodeRemoved(node="gpu-a", at=T0), pool_of, PRICED) is None


def test_a_node_charged_already_is_not_charged_again():
    meter = NodeMeter(Occupancy())
    charge = meter.charge(removal(), pool_of, PRICED)
    assert charge is not None
    meter.fold(charge)  # folded from the op stream
    assert meter.charge(removal(), pool_of, PRICED) is None


def test_the_token_is_stable_and_names_agent_node_and_creation():
    assert token_of("", "gpu-a", T0) == token_of("", "gpu-a", T0)
    assert token_of("", "gpu-a", T0).startswith("node-")
    assert len({token_of("", "gpu-a", T0), token_of("east", "gpu-a", T0), token_of("", "gpu-b", T0),
                token_of("", "gpu-a", T0 + timedelta(seconds=1))}) == 4


def test_an_open_node_has_a_spend_so_far_and_a_removed_one_none():
    meter = meter_with_one_4_gpu_op_for_the_first_hour()
    [spend] = meter.open_spend(t(HOUR), pool_of, PRICED)
    assert (spend.pool, spend.amount, spend.busy, spend.stranded, spend.idle) == ("a100", 16.0, 8.0, 8.0, 0.0)
    meter.observe(removal())
    assert meter.open_spend(t(3 * HOUR), pool_of, PRICED) == []
