"""Placement: to which of the nodes a pod fits admission assigns it (a flavor's ``placement``, else the
configuration's; ``proto.queues.Placement``).

- ``binpack`` (the default): the node with the least of the pod's accelerator free, ties by name. Free GPUs
  gather on few nodes, so an op that needs a whole node finds one (kube-scheduler alone spreads pods).
- ``spread``: the node with the most free, ties by name (fewer ops share a node's PCIe/NVLink and memory).
- ``firstFit``: the first node by name (opsched before placement policies); kube-scheduler is not told.

Under every policy a real node that fits comes before a virtual one (a new node of a pool, named ``VIRTUAL...``):
an op takes a new node only when no node that exists has room.

A pod that asks no accelerator is placed first-fit and gets no preference. binpack and spread are carried to the
pod as a preferred node affinity on the node's ``kubernetes.io/hostname`` (``preferred_hosts``), so the scheduler
that binds it agrees with the capacity admission assumed."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsched.proto.resources import is_accelerator
from opsched.rules.podspec import HOSTNAME_LABEL

if TYPE_CHECKING:
    from opsched.services.admission.model.queues import Book

BINPACK, SPREAD, FIRST_FIT = "binpack", "spread", "firstFit"
VIRTUAL = "~"  # the first character of a virtual node's name (never of a Kubernetes node's)


def is_virtual(node: str) -> bool:
    return node.startswith(VIRTUAL)


@dataclass(frozen=True)
class Rule:
    """How an op's pods are placed: ``policy``, and for a gang the node label whose value names a topology
    domain (``topology``: a rack, an NVLink domain) it is kept within when it fits in one."""

    policy: str = FIRST_FIT
    topology: str | None = None


def rule_of(book: "Book", assignment: dict[str, str]) -> Rule:
    """The rule of an op given its flavors: its accelerator flavor's placement (else the configuration's) and
    topology key."""
    for resource, flavor in sorted(assignment.items()):
        found = book.flavors.get(flavor)
        if is_accelerator(resource) and found is not None:
            return Rule(found.placement or book.config.placement, found.topology_key)
    return Rule(book.config.placement)


def domains(candidates: Sequence[str], key: str, labels: Callable[[str], dict[str, str]], resource: str | None,
            free: Callable[[str], dict[str, float]], policy: str) -> list[list[str]]:
    """The candidates grouped by their ``key`` label (nodes without it are in none), tightest first under
    binpack (least of ``resource`` free), roomiest first under spread, by value under firstFit."""
    groups: dict[str, list[str]] = {}
    for name in candidates:
        value = labels(name).get(key)
        if value is not None:
            groups.setdefault(value, []).append(name)
    sign = {BINPACK: 1.0, SPREAD: -1.0}.get(policy, 0.0)

    def order(value: str) -> tuple[float, str]:
        room = sum(free(n).get(resource, 0.0) for n in groups[value]) if resource else 0.0
        return sign * room, value
    return [groups[value] for value in sorted(groups, key=order)]


def accelerator_of(pod: dict[str, float]) -> str | None:
    """The accelerator a pod asks most of (ties by name), or None."""
    asked = [(-amount, resource) for resource, amount in pod.items() if amount > 0 and is_accelerator(resource)]
    return min(asked)[1] if asked else None


def choose(candidates: Sequence[str], pod: dict[str, float], policy: str, fits: Callable[[str], bool],
           free: Callable[[str], dict[str, float]]) -> str | None:
    """The node of ``candidates`` (sorted by name) ``pod`` goes to under ``policy``, among those it ``fits``."""
    resource = accelerator_of(pod)
    if policy == FIRST_FIT or resource is None:
        return next((n for n in candidates if not is_virtual(n) and fits(n)), None) or next(
            (n for n in candidates if is_virtual(n) and fits(n)), None)
    sign = 1.0 if policy == BINPACK else -1.0
    best: tuple[bool, float, str] | None = None
    for name in candidates:
        if fits(name):
            key = (is_virtual(name), sign * free(name).get(resource, 0.0), name)
            if best is None or key < best:
                best = key
    return best[2] if best else None


def preferred_hosts(rule: Rule, nodes: list[str] | None, labels: Callable[[str], dict[str, str]],
                    pods: list[dict[str, float]]) -> list[str]:
    """Each pod's preferred host (its node's hostname label), "" for none; [] when nothing is preferred. A gang
    kept in a topology domain prefers its nodes there, whatever the policy."""
    if (rule.policy == FIRST_FIT and not (rule.topology and len(pods) > 1)) or not nodes:
        return []
    hosts = [labels(node).get(HOSTNAME_LABEL, "") if accelerator_of(pod) else "" for node, pod in zip(nodes, pods)]
    return hosts if any(hosts) else []
