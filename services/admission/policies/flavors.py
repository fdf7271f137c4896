"""Flavor assignment: for each resource the queue has quota for, the flavors an op may use, in the
queue's order, skipping those whose node labels contradict the op's own node selector."""
from __future__ import annotations

import itertools
from typing import Any

from opsched.services.admission.model.queues import DEFAULT_FLAVOR, Book

MAX_COMBOS = 64


def candidates(book: Book, queue: str, resource: str, selector: dict[str, str]) -> list[str]:
    out = []
    for name in book.flavor_order[queue].get(resource, []):
        labels = book.flavors[name].node_labels if name in book.flavors else {}
        if all(selector.get(k, v) == v for k, v in labels.items()):
            out.append(name)
    return out


def combos(book: Book, queue: str, request: dict[str, float], selector: dict[str, str]) -> list[dict[str, str]]:
    """Every assignment resource -> flavor, most preferred first (queue order per resource).
    Resources the queue sets no quota for are not assigned (the queue does not limit them)."""
    limited = [r for r in request if r in book.flavor_order[queue] and request[r] > 0]
    choices = [candidates(book, queue, r, selector) for r in limited]
    out = []
    for combo in itertools.islice(itertools.product(*choices), MAX_COMBOS):
        out.append(dict(zip(limited, combo)))
    return out


def placement(book: Book, queue: str, assignment: dict[str, str]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Node selector and tolerations that admission adds to the pod: queue defaults + flavors'."""
    q = book.queues[queue]
    selector = dict(q.node_selector)
    tolerations = list(q.tolerations)
    for flavor in sorted(set(assignment.values())):
        if flavor == DEFAULT_FLAVOR or flavor not in book.flavors:
            continue
        f = book.flavors[flavor]
        selector.update(f.node_labels)
        tolerations += [t for t in f.tolerations if t not in tolerations]
    return selector, tolerations
