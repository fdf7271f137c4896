"""How fragmented the cluster is, for `opsched queues`: per flavor (the nodes its labels select; every node
without flavors) and accelerator, the free amount, and how much of it is stranded on nodes with less free than
the largest waiting pod of that flavor asks. binpack placement (``model.placement``) keeps it low."""
from __future__ import annotations

from collections.abc import Iterable

from opsched.proto.queries import Fragmentation
from opsched.proto.resources import is_accelerator
from opsched.services.admission.model import agents
from opsched.services.admission.model.nodes import selects
from opsched.services.admission.model.queues import Book
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.state.capacity import Capacity


def fragmentation(capacity: Capacity, book: Book, waiting: Iterable[OpRecord]) -> list[Fragmentation]:
    if not capacity.known:
        return []
    flavors = {name: dict(f.node_labels) for name, f in sorted(book.flavors.items())} or {"": {}}
    in_agents = sorted({info.labels.get(agents.AGENT_LABEL, "") for info in capacity.nodes.values()
                        if not info.virtual_pool})
    groups = [(agent, flavor, {**labels, **agents.selector(agent)}) for agent in in_agents
              for flavor, labels in flavors.items() if not flavor or agent in agents.agents_of_flavor(book, flavor)]
    asks = [(op.spec.environment.node_selector, pod) for op in waiting for pod in op.pods]
    out = []
    for agent, flavor, labels in groups:
        nodes = [n for n, info in sorted(capacity.nodes.items())
                 if info.offers_room and not info.virtual_pool and selects(info, labels)]  # nodes that exist
        resources = sorted({r for n in nodes for r in capacity.nodes[n].allocatable if is_accelerator(r)})
        for resource in resources:
            free = [capacity.free[n].get(resource, 0.0) for n in nodes if resource in capacity.nodes[n].allocatable]
            largest = max((pod.get(resource, 0.0) for selector, pod in asks if _compatible(selector, labels)),
                          default=0.0)
            out.append(Fragmentation(resource=resource, flavor=flavor, agent=agent, nodes=len(free), free=sum(free),
                                     stranded=sum(f for f in free if 1e-9 < f < largest - 1e-9),
                                     largest_waiting=largest))
    return out


def _compatible(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """A pod with ``selector`` may land on nodes with ``labels`` (no label they share differs)."""
    return all(labels.get(k, v) == v for k, v in selector.items())
