"""A user's first day, on `opsched up` as it starts by default (TLS, a NATS user per service, subject permissions),
through the CLI only: every seed feature once — submit and wait, a sweep, the cache (a hit after the original and
one during it), approval by an approver, conditions skipping, a schedule firing, stop, restart/copy/resume with
params, preemption, a gang, cost and budgets, and `why` for a waiting, a rejected and an ended op.

One `opsched up` for the e2e suite (``default_up``, tests/e2e/conftest.py: examples/queues.yaml and the default
nodes); the steps use their own ops; a step waits on the op events (``User.until``: in the test's process), with
a timeout, never on time."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from tests.e2e.firstday import User, job


def test_the_default_is_tls_and_a_user_per_service(default_up: User):
    state = json.loads((default_up.data_dir / "up.json").read_text())
    assert state["nats_url"].startswith("tls://") and state["auth_dir"] and state["nats_ca"]


def test_submit_and_wait(default_up: User):
    out = default_up.ok("submit", "examples/train-1gpu.yaml", "--wait")
    assert "succeeded" in out.splitlines()[-1]


def test_a_sweep_runs_every_trial(default_up: User):
    before = set(default_up.ops())  # the docs' sweep block may have run on this opsched already (test_docs)
    default_up.ok("submit", "examples/sweep.yaml", "--wait", timeout=180)
    rows = [r for op_id, r in default_up.ops().items() if op_id not in before]
    assert len(rows) == 6 and {r["status"] for r in rows} == {"succeeded"}
    assert len({r["batch"] for r in rows}) == 1
    assert sorted(r["name"] for r in rows) == [f"lr-sweep-{i}" for i in range(6)]  # its trials told apart


def test_the_cache_answers_after_the_original_and_while_it_runs(default_up: User):
    cached = job("cached", "sleep 1", extra="cache: {disable: false}")
    first = default_up.submit("cached", cached, "--wait")
    again = default_up.submit("cached", cached, "--wait")
    assert default_up.ops()[again]["status"] == "succeeded" and "cache_hit" in json.dumps(default_up.why(again))
    assert first != again
    running = job("cached-long", "sleep 10", extra="cache: {disable: false}")
    original = default_up.submit("cached-long", running)
    # at once, not after `ops` shows it running: the lookup finds it in process (queued, admitted or running) for
    # as long as it takes to start plus its 10 s (a CLI call on a loaded machine takes seconds), rather than for what
    # is left of them after two more CLI calls
    during = default_up.submit("cached-long", running, "--wait")
    assert default_up.ops()[original]["status"] == "succeeded" and "cache_hit" in json.dumps(default_up.why(during))


def test_an_approver_releases_an_op_held_for_approval_and_a_submitter_cannot(default_up: User):
    alice, bob = User(default_up.data_dir, default_up.files, "alice"), User(default_up.data_dir, default_up.files, "bob")
    held = alice.submit("held", job("held", "sleep 1", extra="isApproved: false"))
    default_up.status(held, "on_hold")
    refused = alice.run("approve", held)
    assert refused.returncode != 0 and "approve" in (refused.stderr + refused.stdout)
    bob.ok("approve", held)
    default_up.status(held, "succeeded")


CONDITIONAL = """version: 1.1
kind: operation
name: conditional
conditions: "{{ params.go }}"
params: {go: {value: true}}
component:
  inputs: [{name: go, type: bool}]
  run:
    kind: job
    container: {image: python:3.11-slim, command: ["sh", "-c", "sleep 1"], resources: {limits: {nvidia.com/gpu: 1}}}
"""


def test_conditions_skip_an_op(default_up: User):
    skipped = default_up.submit("conditional", CONDITIONAL, "-P", "go=false")
    assert default_up.status(skipped, "skipped")["status"] == "skipped"
    ran = default_up.submit("conditional", CONDITIONAL, "--wait")
    assert default_up.ops()[ran]["status"] == "succeeded"


def test_a_schedule_fires(default_up: User):
    soon = (datetime.now(timezone.utc) + timedelta(seconds=2)).isoformat()
    text = job("nightly", "sleep 1", extra=f"schedule: {{kind: datetime, startAt: '{soon}'}}")
    schedule = default_up.ok("schedule", default_up.file("nightly.yaml", text), "--id", "nightly").split()[0]
    assert schedule == "nightly"
    default_up.until(lambda rows: [r for r in rows.values() if r["opId"].startswith("nightly-")
                           and r["status"] == "succeeded"], "a run of the schedule succeeded")


def test_stop_then_resume_restart_and_copy_with_params(default_up: User):
    text = job("long", "sleep {{ secs }}", inputs="inputs:\n  - {name: secs, type: int, value: 60}")
    op_id = default_up.submit("long", text)
    default_up.status(op_id, "running")
    default_up.ok("stop", op_id)
    default_up.status(op_id, "stopped")
    default_up.ok("resume", op_id, "-P", "secs=1")
    row = default_up.status(op_id, "succeeded")
    assert row["attempt"] == 1
    restarted = default_up.ok("restart", op_id, "-P", "secs=1").split()[-1]
    copied = default_up.ok("copy", op_id, "-P", "secs=1").split()[-1]
    for new in (restarted, copied):
        assert new != op_id
        default_up.status(new, "succeeded")


def test_an_urgent_op_preempts_a_batch_op_and_a_gang_runs_whole(default_up: User):
    """Every GPU busy (the a100 queue's own A100, then the default queue's 2 A100 and its T4, with batch ops): an
    urgent op in the default queue cannot borrow, so it preempts one of them."""
    def filler(i: int, *args: str) -> str:
        return default_up.submit(f"filler-{i}", job(f"filler-{i}", "sleep 60", extra="priorityClass: batch"), *args)
    fillers = [filler(0, "--queue", "a100")]
    default_up.status(fillers[0], "running")
    fillers += [filler(i) for i in range(1, 4)]
    for op_id in fillers:
        default_up.status(op_id, "running")
    urgent = default_up.ok("submit", "examples/urgent-1gpu.yaml").split()[0]
    default_up.status(urgent, "succeeded")
    preempted = [op_id for op_id, row in default_up.ops().items() if op_id in fillers and "preempted" in row["history"]]
    assert len(preempted) == 1, "one batch op was preempted"
    for op_id in fillers:
        default_up.ok("stop", op_id)
    for op_id in fillers:
        default_up.status(op_id, "stopped")
    gang = default_up.ok("submit", "examples/ddp-3x1gpu.yaml", "--wait").split()[0]
    assert default_up.ops()[gang]["status"] == "succeeded"


def test_why_for_a_waiting_a_rejected_and_an_ended_op_and_cost_with_budgets(default_up: User):
    default_up.ok("queues", "--apply", str(default_up.files / "queues.yaml"))  # the example queues and a day budget
    waiting = default_up.submit("capped", job("capped", "sleep 1", extra="project: capped"))
    default_up.until(lambda rows: "budget" in json.dumps(default_up.why(waiting)).lower(), "the capped op waiting for its budget")
    rejected = default_up.submit("nosuch", job("nosuch", "sleep 1", extra="priorityClass: nosuch"))
    default_up.status(rejected, "rejected")
    assert "nosuch" in json.dumps(default_up.why(rejected))
    ended = default_up.ok("submit", "examples/train-1gpu.yaml", "--wait").split()[0]
    assert "succeeded" in json.dumps(default_up.why(ended))
    cost = json.loads(default_up.ok("cost", "-o", "json"))
    assert "capped" in json.dumps(cost) and "default" in json.dumps(cost)
    default_up.ok("stop", waiting)
    default_up.status(waiting, "stopped")
