"""The agents of a queue configuration, checked when it is loaded: each declared once, with a name that is a
subject token (``OPSCHED_AGENT``, ``ops.admitted.<agent>.<id>``); every agent a queue or flavor names declared;
a queue of one agent lists no flavor that lives in another."""
from __future__ import annotations

from opsched.proto.queues import QueuesConfig
from opsched.proto.subjects import valid_token


def agent_problems(config: QueuesConfig) -> list[str]:
    declared = [a.name for a in config.agents]
    return _declared_problems(config, declared) + _reference_problems(config, declared)


def _declared_problems(config: QueuesConfig, declared: list[str]) -> list[str]:
    """The agents and the default agent: valid names, each declared once."""
    out: list[str] = []
    for i, name in enumerate(declared):
        if not valid_token(name):
            out.append(f"agents[{i}].name: {name!r} is not a valid agent name (lowercase letters, digits and '-')")
    for dup in sorted({n for n in declared if declared.count(n) > 1}):
        out.append(f"agents: the name {dup!r} is used twice")
    if config.default_agent is not None and not valid_token(config.default_agent):
        out.append(f"defaultAgent: {config.default_agent!r} is not a valid agent name (lowercase letters, digits "
                   "and '-')")
    if config.default_agent is not None and config.default_agent in declared:
        out.append(f"defaultAgent: {config.default_agent!r} is also declared under agents; name it once")
    return out


def _reference_problems(config: QueuesConfig, declared: list[str]) -> list[str]:
    """The agents flavors and queues name: declared; a queue's flavors in its own agent."""
    out: list[str] = []
    known = ", ".join(declared) or "none"
    flavor_agents = {f.name: f.agent for f in config.flavors}
    for i, f in enumerate(config.flavors):
        if f.agent is not None and f.agent not in declared:
            out.append(f"flavors[{i}].agent: {f.agent!r} is not declared under agents (declared: {known})")
    for i, q in enumerate(config.queues):
        if q.agent is not None and q.agent not in declared:
            out.append(f"queues[{i}].agent: {q.agent!r} is not declared under agents (declared: {known})")
        for j, rq in enumerate(q.resources):
            for k, fq in enumerate(rq.flavors):
                other = flavor_agents.get(fq.name)
                if q.agent is not None and other is not None and other != q.agent:
                    out.append(f"queues[{i}].resources[{j}].flavors[{k}]: flavor {fq.name!r} lives in agent "
                               f"{other!r}, not in the queue's agent {q.agent!r}")
    return out
