"""Agents (``services.admission.model.agents``): an op runs on its flavor's agent, else its queue's; a queue
spanning agents places by flavor order; capacity is kept per agent; an ``agent/queue`` that does not match its
queue is refused; requests for a named agent's dispatcher go on its own subjects, and only it consumes them."""
from __future__ import annotations

from datetime import datetime, timezone

import msgspec
import pytest

from opsched.bus.addressing import subject_for
from opsched.proto import subjects
from opsched.proto.cluster import NodeObserved
from opsched.proto.commands import SubmitOperation
from opsched.proto.events import OperationAdmitted, OperationRejected, OperationRunning, StopRequested
from opsched.proto.queues import Agent, Flavor, FlavorQuota, Queue, QueuesConfig, ResourceQuota
from opsched.rules.queues_file import problems
from opsched.services.admission.model import agents
from opsched.services.admission.model.queues import compile_book
from opsched.services.dispatcher.attempts import Attempts, folded_subjects
from opsched.services.dispatcher.nodewatch import NodeFacts
from tests.builders import GPU, T0, admitted, node, op
from tests.builders.admission import fold, queued
from tests.unit.admission_scenarios import decide

A100 = {"nvidia.com/gpu.product": "A100"}


def config(**queue_fields) -> QueuesConfig:
    """Queue ``gpu``: flavor ``home`` (the default agent's A100s), then ``remote`` (agent b's A100s)."""
    flavors = [Flavor(name="home", node_labels=A100), Flavor(name="remote", node_labels=A100, agent="b")]
    quota = ResourceQuota(resource=GPU, flavors=[FlavorQuota(name="home", nominal=8), FlavorQuota(name="remote",
                                                                                                  nominal=8)])
    return QueuesConfig(agents=[Agent(name="b")], flavors=flavors, default_queue="gpu",
                        queues=[Queue(name="gpu", resources=[quota], **queue_fields), Queue(name="only-b", agent="b")])


def agent_node(name: str, agent: str, gpus: int = 2) -> NodeObserved:
    return msgspec.structs.replace(node(name, gpus=gpus, product="A100"), agent=agent)


def gpu_op(op_id: str, gpus: int = 2, agent: str | None = None, queue: str = "gpu") -> list:
    spec = msgspec.structs.replace(op(op_id).gpus(gpus, product="A100").build(), agent=agent, queue=queue)
    return queued(spec, op_id=op_id)


def admitted_events(state, book) -> dict[str, OperationAdmitted]:
    return {d.op_id: d for d in decide(state, book) if isinstance(d, OperationAdmitted)}


def test_ops_fill_the_first_flavors_agent_then_go_to_the_next_agent_never_split():
    book = compile_book(config())
    state = fold(agent_node("gpu-0", ""), agent_node("gpu-0", "b"), *gpu_op("one"), *gpu_op("two"), *gpu_op("big", 4))
    decided = admitted_events(state, book)
    assert (decided["one"].agent, decided["two"].agent) == ("", "b")  # same node name in two clusters: no clash
    assert decided["one"].flavors == {GPU: "home"} and decided["two"].flavors == {GPU: "remote"}
    assert "big" not in decided  # 4 GPUs fit no single cluster's node: it waits, it is not split
    assert set(state.nodes) == {"gpu-0", "b/gpu-0"}


def test_a_running_op_takes_its_own_clusters_node_and_the_next_op_sees_it():
    book = compile_book(config())
    state = fold(agent_node("gpu-0", ""), agent_node("gpu-0", "b"), *gpu_op("one"))
    (first,) = admitted_events(state, book).values()
    fold(OperationRunning(op_id="one", at=T0, pod_name=first.pod_name, node="gpu-0"), state=state)
    assert state.ops["one"].node == "gpu-0"
    fold(*gpu_op("two"), state=state)
    assert admitted_events(state, book)["two"].agent == "b"


def test_an_agent_that_has_reported_no_nodes_does_not_hold_or_reject_its_ops():
    book = compile_book(config())
    state = fold(agent_node("gpu-0", ""), *gpu_op("b-only", 2, agent="b"))  # agent b: no nodes yet
    decided = admitted_events(state, book)
    assert decided["b-only"].agent == "b" and decided["b-only"].flavors == {GPU: "remote"}


def test_an_op_whose_file_names_an_agent_runs_only_there():
    book = compile_book(config())
    state = fold(agent_node("gpu-0", ""), agent_node("gpu-0", "b"), *gpu_op("pinned", agent="b"))
    assert admitted_events(state, book)["pinned"].agent == "b"


@pytest.mark.parametrize("queue, runs_on", [("gpu", {"", "b"}), ("only-b", {"b"})])
def test_the_agents_a_queue_runs_on(queue, runs_on):
    assert agents.agents_of(compile_book(config()), queue) == runs_on


def test_the_configuration_names_only_declared_agents_and_a_queue_keeps_to_its_own():
    bad = msgspec.structs.replace(config(agent="c"), agents=[Agent(name="b"), Agent(name="b"), Agent(name="B!")])
    found = problems(bad)
    assert "agents: the name 'b' is used twice" in found
    assert any(p.startswith("agents[2].name: 'B!' is not a valid agent name") for p in found)
    assert "queues[0].agent: 'c' is not declared under agents (declared: b, b, B!)" in found
    assert problems(config()) == []
    mixed = config(agent="b")
    assert problems(mixed) == []  # its flavors: home (no agent: the queue's) and remote (b)
    stray = msgspec.structs.replace(mixed, agents=[Agent(name="b"), Agent(name="c")],
                                    flavors=[Flavor(name="home", node_labels=A100, agent="c"), mixed.flavors[1]])
    assert ("queues[0].resources[0].flavors[0]: flavor 'home' lives in agent 'c', not in the queue's agent 'b'"
            in problems(stray))


def test_requests_for_a_named_agent_go_on_its_subjects_and_its_dispatcher_consumes_only_those():
    spec = op("x").gpus(1).build()
    routed = msgspec.structs.replace(admitted(spec, op_id="x"), agent="b")
    assert subject_for(routed) == "ops.admitted.b.x"
    assert subject_for(admitted(spec, op_id="x")) == "ops.admitted.x"
    stop = StopRequested(op_id="x", at=T0, pod_name="op-x-0", namespace="ns", agent="b")
    assert subject_for(stop) == "ops.stop_requested.b.x"
    assert subjects.dispatcher_filters("b") == ["ops.admitted.b.*", "ops.stop_requested.b.*",
                                                "ops.preempt_requested.b.*"]
    assert subjects.dispatcher_filters("") == ["ops.admitted.*", "ops.stop_requested.*", "ops.preempt_requested.*"]
    assert subjects.dispatcher_durable("b") == "dispatcher-admitted-b"
    assert subjects.events_of("admitted") == "ops.admitted.>"  # who reads every admission sees both
    assert "ops.admitted.b.*" in folded_subjects("b") and "ops.admitted.*" not in folded_subjects("b")


def test_a_dispatchers_table_ignores_attempts_admitted_to_another_agent():
    table = Attempts()
    theirs = OperationRunning(op_id="theirs", at=T0, pod_name="op-theirs-0", node="gpu-0")
    table.apply(theirs)  # its admitted went to another agent's subject: never folded here
    assert table.get("theirs") is None
    mine = admitted(op("mine").build(), op_id="mine")
    table.apply(mine)
    table.apply(OperationRunning(op_id="mine", at=T0, pod_name="op-mine-0", node="gpu-0"))
    assert table.get("mine").stage.name == "RUNNING"


def test_a_named_agents_node_facts_are_its_own():
    facts = NodeFacts("b")
    facts.seed([agent_node("gpu-0", ""), agent_node("gpu-1", "b")])
    assert set(facts.published) == {"gpu-1"}  # the default agent's gpu-0 is not its to remove
    assert subjects.node("gpu-0", "b") == "cluster.node.b.gpu-0" and subjects.node("gpu-0") == "cluster.node.gpu-0"


def test_a_submit_naming_an_agent_its_queue_does_not_run_on_is_rejected():
    from opsched.services.admission.handlers import _submitted

    book = compile_book(config())
    spec = msgspec.structs.replace(op("x").build(), queue="only-b", agent="a")
    cmd = SubmitOperation(op_id="x", spec=spec, requested_at=datetime(2026, 1, 1, tzinfo=timezone.utc))

    class Ctx:
        clock = type("Clock", (), {"now": staticmethod(lambda: T0)})()

    (event,) = _submitted(cmd, spec, Ctx(), fold(), book)
    assert isinstance(event, OperationRejected) and event.reason == "agent_mismatch"
    assert event.message == "queue only-b runs on agent b, not on agent a (the file's queue a/only-b)"


def test_an_op_that_ran_on_a_named_agent_leaves_the_stream_with_its_routed_requests():
    from opsched.services.admission.purge import purge_order

    state = fold(agent_node("gpu-0", "b"), *gpu_op("remote", agent="b"))
    admitted_events(state, compile_book(config()))
    assert purge_order(state.ops["remote"]) == ["ops.*.remote", "ops.*.*.remote"]
    plain = fold(agent_node("gpu-0", ""), *gpu_op("home"))
    admitted_events(plain, compile_book(config()))
    assert purge_order(plain.ops["home"]) == ["ops.*.home"]  # no routed request: one purge, as before


def test_the_default_agent_may_be_named_and_a_file_naming_it_runs_there():
    from opsched.services.admission.handlers import _submitted

    book = compile_book(msgspec.structs.replace(config(), default_agent="main"))
    spec = msgspec.structs.replace(op("x").build(), queue="gpu", agent="main")
    cmd = SubmitOperation(op_id="x", spec=spec, requested_at=datetime(2026, 1, 1, tzinfo=timezone.utc))

    class Ctx:
        clock = type("Clock", (), {"now": staticmethod(lambda: T0)})()

    (event,) = _submitted(cmd, spec, Ctx(), fold(), book)
    assert event.spec.agent == ""  # pinned to the default agent
    state = fold(agent_node("gpu-0", ""), agent_node("gpu-0", "b"), event, *queued(event.spec, op_id="x")[1:])
    assert admitted_events(state, book)["x"].agent == ""
    assert problems(msgspec.structs.replace(config(), default_agent="b")) == [
        "defaultAgent: 'b' is also declared under agents; name it once"]


def beat(agent: str, seconds: float):
    from datetime import timedelta

    from opsched.proto.cluster import AgentHeartbeat

    return AgentHeartbeat(agent=agent, at=T0 + timedelta(seconds=seconds))


def at(seconds: float):
    from datetime import timedelta

    return T0 + timedelta(seconds=seconds)


def test_a_silent_agent_gets_no_new_ops_and_they_go_to_the_next_agent_that_answers():
    from opsched.proto.queues import Agent
    from opsched.services.admission.cycle import Cycle

    timed = msgspec.structs.replace(config(), agents=[Agent(name="b", heartbeat_timeout_seconds=30,
                                                            lost_after_seconds=120)])
    # agent b is first in the flavor order of queue "burst"; the default agent is second
    flavors = [msgspec.structs.replace(f, agent=None) if f.name == "home" else f for f in timed.flavors]
    quota = ResourceQuota(resource=GPU, flavors=[FlavorQuota(name="remote", nominal=8),
                                                 FlavorQuota(name="home", nominal=8)])
    book = compile_book(msgspec.structs.replace(timed, flavors=flavors, default_queue="burst",
                                                queues=[Queue(name="burst", resources=[quota])]))
    state = fold(agent_node("gpu-0", ""), agent_node("gpu-0", "b"), beat("b", 0), *gpu_op("early", queue="burst"))
    early = [d for d in Cycle(state, book, at(10), "ns").run() if isinstance(d, OperationAdmitted)]
    assert [d.agent for d in early] == ["b"]
    fold(*gpu_op("late", queue="burst"), state=state)
    late = [d for d in Cycle(state, book, at(31), "ns").run() if isinstance(d, OperationAdmitted)]
    assert [d.agent for d in late] == [""]  # b silent for 31 s: the default agent's cluster takes it
    assert state.queues.timers and min(state.queues.timers) == at(120)  # the next look: b lost, if still silent


def test_an_agent_silent_past_its_grace_loses_its_running_ops_which_are_retried_on_one_that_answers():
    from opsched.proto.events import OperationFailed
    from opsched.proto.queues import Agent
    from opsched.services.admission.cycle import Cycle

    book = compile_book(msgspec.structs.replace(config(), agents=[Agent(name="b", heartbeat_timeout_seconds=30,
                                                                        lost_after_seconds=120)]))
    state = fold(agent_node("gpu-0", "b"), beat("b", 0), *gpu_op("remote", agent="b"))
    (admitted_b,) = [d for d in Cycle(state, book, at(1), "ns").run() if isinstance(d, OperationAdmitted)]
    fold(OperationRunning(op_id="remote", at=at(2), pod_name=admitted_b.pod_name, node="gpu-0"), state=state)
    assert not [d for d in Cycle(state, book, at(100), "ns").run() if isinstance(d, OperationFailed)]  # silent
    lost = [d for d in Cycle(state, book, at(121), "ns").run() if isinstance(d, OperationFailed)]
    assert [(d.op_id, d.reason, d.attempt) for d in lost] == [("remote", "AgentLost", 0)]
    assert "agent b silent since 12:00:00" in lost[0].message
    assert state.ops["remote"].status.name in ("RETRYING", "QUEUED")  # an infrastructure failure: retried
    fold(beat("b", 125), state=state)  # b answers again: its ops go there
    assert "b" not in agents.silent(book, state.fold.heartbeats, at(126))


def test_fragmentation_counts_a_flavor_in_the_clusters_its_queues_run_on():
    from opsched.services.admission import queries

    book = compile_book(config())
    state = fold(agent_node("gpu-0", ""), agent_node("gpu-0", "b"))
    figures = {(f.agent, f.flavor) for f in queries.queues(state, book).fragmentation}
    assert figures == {("", "home"), ("b", "remote")}  # home (no agent, queue gpu's: default) is not in b's cluster
