"""Spend per budget window and its rollups: a fold of a stream whose rolled-up charges are gone counts what
a fold of the whole stream counts (rules.spend_totals)."""
from datetime import datetime, timezone

from opsched.proto.events import CostRecorded, NodeCostRecorded
from opsched.rules.spend_totals import SpendTotals

T0 = datetime(2026, 3, 10, 12, tzinfo=timezone.utc)


def charge(op_id: str, amount: float, project: str = "") -> CostRecorded:
    return CostRecorded(op_id=op_id, at=T0, amount=amount, seconds=60.0, queue="q", project=project, gpu_hours=1.0)


def spent(totals: SpendTotals) -> list[tuple[float, float]]:
    return [totals.of(scope, name, window, T0) for scope, name in (("queue", "q"), ("project", "p"))
            for window in ("day", "week", "month")]


def test_a_replay_of_the_rolled_up_stream_counts_what_the_whole_stream_counts():
    leader = SpendTotals()
    stream = [(1, charge("a", 1.0, "p")), (2, charge("b", 2.0)), (3, charge("c", 4.0, "p"))]
    for seq, e in stream:
        leader.record(e, seq)
    rollups = leader.rollups(2, T0)  # c (seq 3) is folded but not yet consumed by everyone: not rolled
    assert [(r.scope, r.name, r.through_seq) for r in rollups] == [("project", "p", 2), ("queue", "q", 2)]
    for r in rollups:
        leader.roll(r)  # the leader folds its own rollups: nothing changes
    assert spent(leader) == [(7.0, 3.0)] * 3 + [(5.0, 2.0)] * 3

    fresh = SpendTotals()  # a and b left the stream with their ops; c and the rollups stayed
    fresh.record(stream[2][1], 3)
    for r in rollups:
        fresh.roll(r)
    assert spent(fresh) == spent(leader)
    assert fresh.unrolled == leader.unrolled == [(3, stream[2][1])]


def test_a_charge_the_rollup_counts_is_not_counted_again_and_an_older_rollup_changes_nothing():
    leader = SpendTotals()
    leader.record(charge("a", 1.0), 1)
    first = leader.rollups(1, T0)
    leader.roll(first[0])
    leader.record(charge("b", 2.0), 3)
    second = leader.rollups(3, T0)

    late = SpendTotals()
    late.roll(second[0])
    late.record(charge("b", 2.0), 3)  # a replica that read the rollup first: the charge is in it
    late.roll(first[0])  # and an older one: ignored
    assert late.of("queue", "q", "month", T0) == leader.of("queue", "q", "month", T0) == (3.0, 2.0)


def test_rollups_name_only_scopes_with_new_charges():
    totals = SpendTotals()
    totals.record(charge("a", 1.0), 1)
    for r in totals.rollups(1, T0):
        totals.roll(r)
    assert totals.rollups(5, T0) == []
    assert totals.unrolled == []


def node_charge(token: str, amount: float, pool: str = "a100") -> NodeCostRecorded:
    return NodeCostRecorded(op_id=token, at=T0, node="gpu-a", pool=pool, created=T0, seconds=3600.0,
                            amount=amount, gpu_hours=8.0, idle=amount)


def test_a_node_charge_counts_in_its_pool_only():
    totals = SpendTotals()
    totals.record(charge("a", 1.0, "p"), 1)
    assert totals.record(node_charge("node-1", 5.0), 2)
    assert not totals.record(node_charge("node-1", 5.0), 3)  # redelivered: once
    totals.record(node_charge("node-2", 7.0, pool=""), 4)  # a node of no pool: no budget scope
    assert totals.of("pool", "a100", "day", T0) == (5.0, 8.0)
    assert spent(totals) == [(1.0, 1.0)] * 6  # never in a queue or a project
    assert totals.scopes() == {("queue", "q"), ("project", "p"), ("pool", "a100")}


def test_rollups_of_a_pool_scope_round_trip():
    leader = SpendTotals()
    leader.record(node_charge("node-1", 5.0), 1)
    leader.record(node_charge("node-2", 2.0), 2)
    [rolled] = leader.rollups(1, T0)
    assert (rolled.scope, rolled.name, rolled.through_seq) == ("pool", "a100", 1)
    fresh = SpendTotals()  # node-1's charge left the stream; node-2's and the rollup stayed
    fresh.record(node_charge("node-2", 2.0), 2)
    fresh.roll(rolled)
    assert fresh.of("pool", "a100", "month", T0) == leader.of("pool", "a100", "month", T0) == (7.0, 16.0)
