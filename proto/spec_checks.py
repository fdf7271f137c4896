"""The contract's checks of an op spec that a field's type cannot say: quantities, names, labels and
annotations, and rules across fields (replica groups, pods in all). ``OpSpec.__post_init__`` runs them on
every decode and every construction, so nothing invalid is published or folded.

Plain numbers and lengths are bounded by the fields' own ``msgspec.Meta`` (``proto.spec``). Each problem is a
``ValueError`` naming the field from the spec down (``container.resources.limits['nvidia.com/gpu']: ...``);
on decode msgspec adds where the spec is (``- at `$.spec```). Cheap by design: it runs on every replay.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from opsched.proto import k8s_names
from opsched.proto.limits import (
    MAX_ANNOTATIONS_BYTES,
    MAX_COST,
    MAX_DEVICES_PER_POD,
    MAX_LABELS,
    MAX_NAME_CHARS,
    MAX_PODS_PER_OP,
)
from opsched.proto.resources import GPU_MEMORY, QuantityError, gpu_memory_gib, is_device, parse_quantity
from opsched.proto.template_markers import has_template

if TYPE_CHECKING:
    from opsched.proto.spec import Container, Environment, OpSpec, ReplicaGroup

# a replica group's pods are labelled ``<group>-<index>`` (a label value: at most 63), so its name leaves room
MAX_GROUP_NAME_CHARS = MAX_NAME_CHARS - len(str(MAX_PODS_PER_OP)) - 1


def check_spec(spec: OpSpec) -> None:
    """Raise ``ValueError`` naming the first invalid field of ``spec``."""
    _named("name", spec.name, k8s_names.op_name)
    _named("project", spec.project, k8s_names.op_name)
    if spec.queue is not None:
        _named("queue", spec.queue, k8s_names.queue)
    if spec.agent is not None:
        _named("agent", spec.agent, k8s_names.agent)
    if spec.priority_class is not None:
        _named("priorityClass", spec.priority_class, k8s_names.dns_label)
    if spec.cost is not None:
        money("cost", spec.cost)
    check_container("container", spec.container)
    _replicas(spec.replicas)
    check_environment(spec.environment)
    _hooks(spec)


def _hooks(spec: OpSpec) -> None:
    """Each hook names a known trigger, and its follow-up op has no hooks (a hook never triggers another)."""
    from opsched.proto.lifecycle import HOOK_TRIGGERS  # (it imports the events, which import the spec)

    for i, hook in enumerate(spec.hooks):
        if hook.trigger not in HOOK_TRIGGERS:
            raise ValueError(f"hooks[{i}].trigger: {hook.trigger!r} is not one of {', '.join(HOOK_TRIGGERS)}")
        if hook.spec.hooks:
            raise ValueError(f"hooks[{i}].spec.hooks: a hook's op has no hooks of its own (a hook never triggers "
                             "another)")


def money(field: str, amount: float) -> None:
    """Any amount of money (or cost-bearing measure) on the wire: finite, non-negative, at most ``MAX_COST``."""
    if not isinstance(amount, (int, float)):
        return  # its type is msgspec's to check on decode (a test may compare with an approximate value)
    if not math.isfinite(amount) or amount < 0 or amount > MAX_COST:
        raise ValueError(f"{field}: {amount!r} must be a finite number from 0 to {MAX_COST:g}")


def check_container(at: str, c: Container) -> None:
    _named(f"{at}.name", c.name, k8s_names.dns_label)
    for kind, values in (("limits", c.resources.limits), ("requests", c.resources.requests)):
        for resource, value in values.items():
            problem = resource_problem(resource, value)
            if problem:
                raise ValueError(f"{at}.resources.{kind}[{resource!r}]: {problem}")


def resource_problem(resource: str, value: str) -> str | None:
    """Why ``value`` is not a valid quantity of ``resource``: a bounded Kubernetes quantity; accelerators in whole
    devices (at most ``MAX_DEVICES_PER_POD``), shared GPU memory in whole GiB."""
    key = k8s_names.qualified_key(resource)
    if key:
        return f"not a resource name: {key}"
    try:
        quantity = parse_quantity(value)
        if resource == GPU_MEMORY:
            gpu_memory_gib(value)
    except QuantityError as exc:
        return str(exc)
    if is_device(resource):
        if quantity != quantity.to_integral_value():
            return f"{value!r} is not a whole number of devices"
        if quantity > MAX_DEVICES_PER_POD:
            return f"{value!r} is above the limit of {MAX_DEVICES_PER_POD} devices per pod"
    return None


def _replicas(groups: list[ReplicaGroup]) -> None:
    pods, seen = 1, set()
    for i, group in enumerate(groups):
        at = f"replicas[{i}]"
        _named(f"{at}.name", group.name, lambda n: k8s_names.dns_label(n, MAX_GROUP_NAME_CHARS))
        if group.name in seen:
            raise ValueError(f"{at}.name: {group.name!r} names two replica groups; names must be unique")
        seen.add(group.name)
        if not 1 <= group.count <= MAX_PODS_PER_OP:
            bound = "below 1" if group.count < 1 else f"above the limit of {MAX_PODS_PER_OP} pods per op"
            raise ValueError(f"{at}.count: {group.count} is {bound}")
        check_container(f"{at}.container", group.container)
        pods += group.count
    if pods > MAX_PODS_PER_OP:
        raise ValueError(f"replicas: {pods} pods in all (the main pod and every replica) is above the limit of "
                         f"{MAX_PODS_PER_OP} pods per op")


def check_environment(env: Environment) -> None:
    at = "environment"
    if len(env.labels) > MAX_LABELS:
        raise ValueError(f"{at}.labels: {len(env.labels)} labels is above the limit of {MAX_LABELS}")
    for key, value in env.labels.items():
        _named(f"{at}.labels[{key[:80]!r}]", key, k8s_names.qualified_key)
        _named(f"{at}.labels[{key!r}]", value, k8s_names.label_value)
    size = 0
    for key, value in env.annotations.items():
        _named(f"{at}.annotations[{key[:80]!r}]", key, k8s_names.qualified_key)
        size += len(key.encode()) + len(value.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        raise ValueError(f"{at}.annotations: {size} bytes of keys and values is above the limit of "
                         f"{MAX_ANNOTATIONS_BYTES}")
    for key, value in env.node_selector.items():
        _named(f"{at}.nodeSelector[{key[:80]!r}]", key, k8s_names.qualified_key)
        if not has_template(value):  # a templated value is rendered by admission before routing
            _named(f"{at}.nodeSelector[{key!r}]", value, k8s_names.label_value)
    for field, name in (("priorityClassName", env.priority_class_name),
                        ("serviceAccountName", env.service_account_name)):
        if name is not None:
            _named(f"{at}.{field}", name, k8s_names.dns_subdomain)


def _named(field: str, value: str, check) -> None:  # type: ignore[no-untyped-def]
    problem = check(value)
    if problem:
        raise ValueError(f"{field}: {problem}")
