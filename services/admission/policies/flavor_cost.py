"""What an op costs on the flavors admission considers: the cost service priced it in every pool of the catalogue
for every GPU product (``cost_estimated.points``), so admission prices a flavor assignment from the labels the pod
would get there (its own nodeSelector, the queue's and the flavors' node labels, the agent's: ``labels``) with
``rules.pricing.point_for``, the cost service's own rule. An op with no points (an estimate from before points
existed) costs its one estimate everywhere.

Cost quota, budgets and the admitted estimate use the price of the assignment being tried (``policies.admit``);
approval's ``costAbove`` the highest over every assignment the op could get (``highest``): the worst place it may
land. Pure."""
from __future__ import annotations

from opsched.rules.pricing import point_for
from opsched.services.admission.model import agents
from opsched.services.admission.model.queues import DEFAULT_FLAVOR, Book
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.policies import flavors as flavor_policy


def estimate_for(op: OpRecord, labels: dict[str, str]) -> tuple[float, str]:
    """The op's estimate where its pod has ``labels``, and the catalogue pool that prices it ("": the defaults)."""
    point = point_for(op.price_points, labels)
    return (point.amount, point.pool) if point is not None else (op.estimate, op.estimate_pool)


def labels(book: Book, op: OpRecord, combo: dict[str, str], agent: str) -> dict[str, str]:
    """The node selector of the op's pods on the flavor assignment ``combo`` (admitted by ``agent``)."""
    selector, _ = flavor_policy.placement(book, op.queue, combo)
    return {**op.spec.environment.node_selector, **selector, **agents.selector(agent)}


def named(combo: dict[str, str]) -> str:
    """`` on flavor a100`` (`` on flavors a, b``): the assignment a reason names; "" when it has no flavor."""
    names = sorted({f for f in combo.values() if f != DEFAULT_FLAVOR})
    if not names:
        return ""
    return f" on flavor{'s' if len(names) > 1 else ''} {', '.join(names)}"


def highest(op: OpRecord, book: Book) -> tuple[float, str]:
    """The op's highest estimate over every flavor assignment its queue could give it, and that assignment
    (``named``); its one estimate when the queue is unknown or it has none."""
    if op.queue not in book.queues:
        return op.estimate, ""
    best: tuple[float, str] | None = None
    for combo in flavor_policy.combos(book, op.queue, op.request, op.spec.environment.node_selector):
        agent = agents.agent_of(book, op.queue, combo)
        if agent is None or (op.spec.agent is not None and agent != op.spec.agent):
            continue  # never admitted there (``policies.admit._try``)
        amount, _ = estimate_for(op, labels(book, op, combo, agent))
        if best is None or amount > best[0]:
            best = (amount, named(combo))
    return best if best is not None else (op.estimate, "")
