"""Agents: which agent (a dispatcher with its own cluster, Polyaxon's agent) runs an op. A flavor's ``agent``,
else its queue's, else the default agent (""). A queue whose flavors live in several agents places its ops
across them by flavor order, like MultiKueue's dispatch; one attempt never spans two clusters (an assignment
whose flavors name two agents is no option). A polyaxonfile's ``agent/queue`` must name an agent its queue runs
on. Admission keeps every agent's nodes apart: a node is keyed ``<agent>/<name>`` and carries the label
``AGENT_LABEL`` (for capacity matching only; never on a pod). A declared agent whose dispatcher stops sending
heartbeats gets no new ops once silent past ``heartbeatTimeoutSeconds``; past ``lostAfterSeconds`` its running ops
are reported lost (``failed``, ``AgentLost``: an infrastructure failure, retried elsewhere by the usual rules)."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opsched.services.admission.model.queues import Book

AGENT_LABEL = "opsched.io/agent"  # admission's own, on its node records: the agent whose cluster holds the node
DEFAULT = ""


def node_key(agent: str, name: str) -> str:
    """A node as admission keys it: its name in the default agent's cluster, ``<agent>/<name>`` in another's."""
    return f"{agent}/{name}" if agent else name


def agent_of(book: "Book", queue: str, assignment: dict[str, str]) -> str | None:
    """The agent of one flavor assignment; None when its flavors live in two agents."""
    fallback = (book.queues[queue].agent if queue in book.queues else None) or DEFAULT
    found = {(book.flavors[f].agent if f in book.flavors else None) or fallback for f in assignment.values()}
    if len(found) > 1:
        return None
    return found.pop() if found else fallback


def agents_of(book: "Book", queue: str) -> set[str]:
    """Every agent an op of ``queue`` may run on."""
    fallback = book.queues[queue].agent or DEFAULT
    flavors = {f for per_resource in book.flavor_order.get(queue, {}).values() for f in per_resource}
    return {(book.flavors[f].agent if f in book.flavors else None) or fallback for f in flavors} or {fallback}


def agents_of_flavor(book: "Book", flavor: str) -> set[str]:
    """The clusters a flavor's nodes are in: its own agent, else those of the queues that use it ("": the
    default agent's)."""
    found = book.flavors.get(flavor)
    if found is not None and found.agent:
        return {found.agent}
    users = {book.queues[q].agent or DEFAULT for q, order in book.flavor_order.items()
             if any(flavor in names for names in order.values())}
    return users or {DEFAULT}


def silent(book: "Book", heartbeats: dict[str, datetime], now: datetime, lost: bool = False) -> dict[str, datetime]:
    """The declared agents silent past their ``heartbeatTimeoutSeconds`` (``lost``: their ``lostAfterSeconds``) at
    ``now``: agent -> its last heartbeat. An agent never heard from is not silent (a dispatcher that sends none)."""
    out = {}
    for agent in book.config.agents:
        last = heartbeats.get(agent.name)
        limit = agent.lost_after_seconds if lost else agent.heartbeat_timeout_seconds
        if last is not None and now - last > timedelta(seconds=limit):
            out[agent.name] = last
    return out


def next_deadline(book: "Book", heartbeats: dict[str, datetime], now: datetime) -> datetime | None:
    """When an agent next turns silent or lost, if no heartbeat comes first (a cycle must run then)."""
    times = [heartbeats[a.name] + timedelta(seconds=s) for a in book.config.agents if a.name in heartbeats
             for s in (a.heartbeat_timeout_seconds, a.lost_after_seconds)]
    return min((t for t in times if t > now), default=None)


def selector(agent: str) -> dict[str, str]:
    """What restricts capacity matching to ``agent``'s nodes."""
    return {AGENT_LABEL: agent}


def named(agent: str) -> str:
    return f"agent {agent}" if agent else "the default agent"  # (``defaultAgent`` names it in polyaxonfiles)
