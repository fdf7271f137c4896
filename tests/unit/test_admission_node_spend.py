"""Admission's fold takes a node's charge (``node_cost_recorded``) as its pool's spend, like a rollup: no op's
event, never a stray, and once however often it is replayed."""
from __future__ import annotations

from opsched.proto.events import NodeCostRecorded
from opsched.services.admission.state.fold import OpFold
from tests.builders import T0, t


def charge(token: str = "node-1", amount: float = 5.0) -> NodeCostRecorded:
    return NodeCostRecorded(op_id=token, at=t(7200), node="a100-0", pool="a100", created=T0, seconds=7200.0,
                            amount=amount, gpu_hours=16.0, idle=amount)


def test_a_node_charge_counts_in_its_pools_spend_once_and_is_no_stray():
    fold = OpFold()
    assert fold.apply(charge(), seq=5)
    assert not fold.apply(charge(), seq=6)  # published again
    assert fold.spend.of("pool", "a100", "day", t(7200)) == (5.0, 16.0)
    assert fold.spend.of("queue", "a100", "day", t(7200)) == (0.0, 0.0)
    assert "node-1" not in fold.ops
    assert fold.strays.found == []
