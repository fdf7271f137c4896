"""The fault suite: during a run of 100 one-GPU ops (submitted at 25/s through the SDK, 10/s when faults strike in
turn, each pod running 0.2 s on simulated GPU nodes) a fault strikes once 30 (20) are in, lasts, and is healed: ops
arrive before it, while it lasts and after it. Each case then asserts that every
accepted op ended, none was lost, none admitted twice, each attempt had exactly one pod (and no op pods of
two attempts alive at once), and admission's quota is back to zero. The counts and recovery times are
printed (``pytest -s tests/faults``); docs/failure-modes.md's table comes from them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from bench.faults.kinds import CLI_OP_FILE, ApiServerOutage, AtOnce, Fault, InTurn, KillNatsNode, KillService, NatsDown
from bench.faults.run import Outcome, play
from bench.faults.stage import Layout

OPS, RATE = 100, 25.0  # 200 at 40/s until 2026-11-28: the same outcomes for twice the CPU (the suite's budget)
# A killed replica's messages in hand (a fetch of up to 16 here, 64 by default) wait out the ack wait before
# another replica gets them: 6 s here (30 s by default), so that the suite stays within a few minutes; the
# dependency backoff stays below it.
FAST = dict(ack_wait_s=6.0, fetch_batch=16, backoff_cap_s=2.5)
TIMEOUT_S = 120.0


def replicas(**counts: int) -> dict[str, int]:
    return {"admission": 1, "cost": 1, "cache": 1, "dispatcher": 1, **counts}


@dataclass
class Case:
    name: str
    layout: Layout
    fault: Any  # () -> Fault
    own_control_plane: bool = False  # the fault kills the API server: not the one the worker's next tests use
    rate: float = RATE  # ops submitted per second
    strike_at: float = 0.3  # the share of the ops submitted when the fault strikes


def case(name: str, fault: Any, own_control_plane: bool = False, rate: float = RATE, strike_at: float = 0.3,
         **layout: Any) -> Any:
    return pytest.param(Case(name, Layout(**FAST, **layout), fault, own_control_plane, rate, strike_at), id=name)


SERVICES = ("cost", "cache", "dispatcher", "admission")  # admission last: it waits out its old lease
# Faults are combined so that each case's services, nodes and ops are paid for once (the suite's CPU budget): the
# four restarts in turn over ops that keep coming (100 at 10/s: each fault meets new ops), and every replica fault
# of a two-replica layout at once. bench/faults plays any of them alone.
CASES = [
    case("each service killed in turn and started again a second later",
         lambda: InTurn(parts=[KillService(service=s, lasts_s=1.0) for s in SERVICES]), rate=10.0, strike_at=0.2),
    case("two replicas of each: one of cost, cache and dispatcher killed for good and the leading admission killed "
         "and started again, at once (the standby takes over)",
         lambda: AtOnce(parts=[*[KillService(service=s, restart=False) for s in SERVICES[:3]],
                               KillService(service="admission", leader=True, lasts_s=1.0)]),
         replicas=replicas(admission=2, cost=2, cache=2, dispatcher=2)),
    case("the NATS node leading the op stream killed and restarted 5 s later", lambda: KillNatsNode(lasts_s=5.0),
         nats_nodes=3),
    case("the API server killed and started again 30 s later", lambda: ApiServerOutage(lasts_s=30.0),
         own_control_plane=True),
]


def report(outcome: Outcome) -> str:
    t, r = outcome.tally, outcome.recovery
    return (f"\n[faults] {outcome.fault}: ops {t.accepted} accepted, {t.refused} refused, {t.terminal} terminal "
            f"{dict(t.statuses)}; lost {len(t.lost)}, duplicate admissions {len(t.duplicate_admissions)}, "
            f"duplicate pods {len(t.duplicate_pods)}, at most {t.peak_active} ops admitted at once; resumed {r.resumed_s:.1f}s after the heal, longest stall "
            f"{r.stall_s:.1f}s, all ended {r.finished_s:.1f}s after the heal; submit to end: median {r.median_op_s:.1f}s, "
            f"slowest {r.slowest_op_s:.1f}s")


def assert_survived(outcome: Outcome) -> None:
    print(report(outcome))
    assert outcome.unfinished == [], f"{len(outcome.unfinished)} ops not terminal: {outcome.unfinished[:10]}"
    assert outcome.tally.problems() == []
    assert outcome.tally.terminal == outcome.tally.accepted > 0


@pytest.mark.parametrize("c", CASES)
async def test_every_accepted_op_ends_once_with_one_pod_per_attempt_and_quota_freed(c: Case, stage_for, request):
    stage = await stage_for(c.layout, request.getfixturevalue("own_control_plane") if c.own_control_plane else None)
    fault: Fault = c.fault()
    outcome = await play(stage, fault, ops=OPS, rate=c.rate, strike_at=c.strike_at, timeout=TIMEOUT_S)
    assert_survived(outcome)
    assert outcome.tally.accepted == OPS


async def test_nats_down_refuses_a_cli_submit_clearly_and_loses_nothing_once_it_is_back(stage_for, tmp_path):
    stage = await stage_for(Layout(**FAST))
    op_file = tmp_path / "op.yaml"
    op_file.write_text(CLI_OP_FILE)
    fault = NatsDown(lasts_s=5.0, op_file=op_file)
    outcome = await play(stage, fault, ops=OPS, rate=RATE, timeout=TIMEOUT_S)
    assert_survived(outcome)
    [(code, stderr)] = fault.refusals
    assert code != 0
    assert "cannot reach NATS" in stderr and stage.nats_url in stderr, stderr
    assert "Traceback" not in stderr, stderr
