"""The contract's checks of an op spec that a field's type cannot say: quantities, names, labels and
annotations, and rules across fields (replica groups, pods in all). ``OpSpec.__post_init__`` runs them on
every decode and every construction, so nothing invalid is published or folded.

Plain numbers and lengths are bounded by the fields' own ``msgspec.Meta`` (``proto.spec``). Each problem is a
``ValueError`` naming the field from the spec down (``container.resources.limits['nvidia.com/gpu']: ...``);
on decode msgspec adds where the spec is (``- at `$.spec```). Cheap by design: it runs on every replay.
"""
from __future__ import annotations

import math
import posixpath
import re
import shlex
from typing import TYPE_CHECKING

from opsched.proto import k8s_names
from opsched.proto.limits import (
    MAX_ANNOTATIONS_BYTES,
    MAX_CONNECTION_NAME_CHARS,
    MAX_CONNECTIONS,
    MAX_COST,
    MAX_DEVICES_PER_POD,
    MAX_FILE_CONTENT_BYTES,
    MAX_LABELS,
    MAX_NAME_CHARS,
    MAX_PODS_PER_OP,
)
from opsched.proto.resources import GPU_MEMORY, QuantityError, gpu_memory_gib, is_device, parse_quantity
from opsched.proto.template_markers import has_template

if TYPE_CHECKING:
    from opsched.proto.spec import Container, Environment, InitStep, OpSpec, ReplicaGroup

# a replica group's pods are labelled ``<group>-<index>`` (a label value: at most 63), so its name leaves room
MAX_GROUP_NAME_CHARS = MAX_NAME_CHARS - len(str(MAX_PODS_PER_OP)) - 1
# chmod's modes: octal (``755``) or symbolic (``+x``, ``u+rw,go-w``): what a file init step may pass to chmod
_CHMOD = re.compile(r"^([0-7]{3,4}|[ugoa]*[-+=][rwxXst]*(,[ugoa]*[-+=][rwxXst]*)*)$")


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
    if spec.main_role is not None:
        _named("mainRole", spec.main_role, lambda n: k8s_names.dns_label(n, MAX_GROUP_NAME_CHARS))
    check_container("container", spec.container)
    check_pod("", spec.container, spec.init, spec.sidecars, spec.connections)
    _replicas(spec.replicas)
    _service(spec)
    check_environment(spec.environment)
    _hooks(spec)


def _service(spec: OpSpec) -> None:
    """A service (``run_kind`` "service") has its ``service`` fields, its ports each once and its replicas within the
    pods an op may have; nothing else has them, nor a culling timeout. (The parser gives a service no replica groups;
    the pods of any are the op's too, as a job's.)"""
    from opsched.proto.spec import SERVICE_KIND  # (the spec imports this module)

    service = spec.service
    if (spec.run_kind == SERVICE_KIND) != (service is not None):
        raise ValueError(f"service: set exactly when runKind is {SERVICE_KIND!r} (runKind {spec.run_kind!r})")
    if service is None:
        if spec.termination.culling is not None:
            raise ValueError("termination.culling: only a service is culled when idle")
        return
    pods = service.replicas + sum(g.count for g in spec.replicas)
    if pods > MAX_PODS_PER_OP:
        raise ValueError(f"service.replicas: {pods} pods in all is above the limit of {MAX_PODS_PER_OP} pods per op")
    for i, port in enumerate(service.ports):
        if port in service.ports[:i]:
            raise ValueError(f"service.ports[{i}]: {port} is named twice")


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
        check_pod(f"{at}.", group.container, group.init, group.sidecars, group.connections)
        pods += group.count
    if pods > MAX_PODS_PER_OP:
        raise ValueError(f"replicas: {pods} pods in all (the main pod and every replica) is above the limit of "
                         f"{MAX_PODS_PER_OP} pods per op")


Where = tuple[str | int, ...]  # a field's path (in a step, a pod), as the edge locates it in the file


def check_pod(at: str, main: Container, init: list[InitStep], sidecars: list[Container],
              connections: list[str]) -> None:
    """A pod's init steps, sidecars and connections (``at``: "" for the main pod, ``replicas[i].`` for a group's):
    raise ``ValueError`` naming the first problem of ``pod_problems``."""
    for where, problem in pod_problems(main, init, sidecars, connections):
        raise ValueError(f"{at}{dotted(where)}: {problem}")
    for i, step in enumerate(init):
        if step.container is not None:
            check_container(f"{at}init[{i}].container", step.container)
    for i, sidecar in enumerate(sidecars):
        check_container(f"{at}sidecars[{i}]", sidecar)


def dotted(where: Where) -> str:
    """("container", "args", 0) -> "container.args[0]": a field's path as messages name it."""
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(where))


def pod_problems(main: Container, init: list[InitStep], sidecars: list[Container], connections: list[str],
                 rendered: bool = False) -> list[tuple[Where, str]]:
    """Every problem of a pod's init steps (``init_step_problems``), of its connections (names, each once, at
    most ``MAX_CONNECTIONS`` with its steps'), and of its containers' names: unique, as Kubernetes wants them
    (init containers included). Each at its path in the pod (``init``, ``sidecars``, ``connections``). A value
    with a template is checked once ``rendered`` (``rules.templating`` checks the rendered pod again)."""
    out: list[tuple[Where, str]] = [(("init", i, *where), problem) for i, step in enumerate(init)
                                    for where, problem in init_step_problems(step, rendered)]
    for i, name in enumerate(connections):
        problem = None if _later(name, rendered) else k8s_names.dns_label(name, MAX_CONNECTION_NAME_CHARS)
        if problem or name in connections[:i]:
            out.append((("connections", i), problem or f"{name!r} is named twice"))
    if len({*connections, *(s.connection for s in init if s.connection)}) > MAX_CONNECTIONS:
        out.append((("connections",), f"a pod may name at most {MAX_CONNECTIONS} connections"))
    out += _same_destination(init, rendered)
    named: list[tuple[Where, str]] = [(("init", i), step.container_name(i)) for i, step in enumerate(init)]
    named += [(("container",), main.name)] + [(("sidecars", i), c.name) for i, c in enumerate(sidecars)]
    seen: dict[str, Where] = {}
    for where, name in named:
        if name in seen:
            out.append((where, f"the container name {name!r} is also {dotted(seen[name])}'s; the containers of a "
                               "pod (init containers and sidecars included) need unique names"))
        seen.setdefault(name, where)
    return out


def _later(value: str | None, rendered: bool) -> bool:
    """A value whose check waits until it is rendered: it has a template, and it is not rendered yet."""
    return not rendered and has_template(value)


def _same_destination(init: list[InitStep], rendered: bool) -> list[tuple[Where, str]]:
    """Two git or file steps of a pod that would write to the same place (the second would find it taken)."""
    out: list[tuple[Where, str]] = []
    seen: dict[str, int] = {}
    for i, step in enumerate(init):
        dest = step.destination()
        if dest is None or _later(dest, rendered):
            continue
        if dest in seen:
            out.append((("init", i), f"writes to {dest}, as init[{seen[dest]}] does; give one of them another path"))
        seen.setdefault(dest, i)
    return out


def init_step_problems(step: InitStep, rendered: bool = False) -> list[tuple[Where, str]]:
    """Every problem of one init step, each at its field's path within the step (the edge locates them in the
    file): exactly one of git, file or container; a git step with a URL or a connection, its flags splittable;
    a file's content within bounds, a plain file name, a mode chmod takes; an absolute, normalized path. A
    templated connection, path, URL, file name or mode is checked once ``rendered``."""
    kinds = [k for k in ("git", "file", "container") if getattr(step, k) is not None]
    if len(kinds) != 1:
        return [((), f"an init step is exactly one of git, file or container, not {' and '.join(kinds) or 'none'}"
                     + (" (opsched runs git and file steps in its own init container; make your container a step "
                        "of its own)" if "container" in kinds else ""))]
    out: list[tuple[Where, str]] = []
    if step.connection is not None:
        problem = None if _later(step.connection, rendered) else \
            k8s_names.dns_label(step.connection, MAX_CONNECTION_NAME_CHARS)
        if problem or step.file is not None:
            out.append((("connection",), problem or "a file step uses no connection (a git or container step does)"))
    if step.path is not None and not _later(step.path, rendered) and (problem := path_problem(step.path)):
        out.append((("path",), problem))
    if step.git is not None:
        out += [(("git", *where), problem) for where, problem in _git_problems(step, rendered)]
    if step.file is not None:
        out += [(("file", *where), problem) for where, problem in _file_problems(step, rendered)]
    return out


def _git_problems(step: InitStep, rendered: bool) -> list[tuple[Where, str]]:
    assert step.git is not None
    out: list[tuple[Where, str]] = []
    for j, flag in enumerate(step.git.flags):
        try:
            shlex.split(flag)
        except ValueError as exc:
            out.append((("flags", j), f"{flag[:80]!r} cannot be split into arguments: {exc}"))
    url = step.git.url
    if url is None and step.connection is None:
        out.append(((), "a git step needs a url, or a connection whose repository it clones"))
    elif url is not None and step.connection is None and not _later(url, rendered):
        from opsched.proto.spec import repo_name  # (the spec imports these checks)

        if repo_name(url) in ("", ".", ".."):
            out.append((("url",), f"{url[:120]!r} names no repository to clone into (its last segment)"))
    return out


def _file_problems(step: InitStep, rendered: bool) -> list[tuple[Where, str]]:
    assert step.file is not None
    out: list[tuple[Where, str]] = []
    size = len(step.file.content.encode())
    if size > MAX_FILE_CONTENT_BYTES:
        out.append((("content",), f"{size} bytes is above the limit of {MAX_FILE_CONTENT_BYTES}"))
    name = step.file.filename
    if name is not None and not _later(name, rendered) and (not name or "/" in name or name in (".", "..")
                                                            or "\0" in name):
        out.append((("filename",), f"{name[:80]!r} must be a file name (no '/'); the step's path says where it goes"))
    mode = step.file.chmod
    if mode is not None and not _later(mode, rendered) and not _CHMOD.match(mode):
        out.append((("chmod",), f"{mode[:80]!r} is not a mode chmod takes (e.g. +x, 755, u+rw)"))
    return out


def path_problem(path: str) -> str | None:
    """Why ``path`` is not an absolute, normalized path (a mount path); None: it is."""
    if not path.startswith("/") or posixpath.normpath(path) != path.rstrip("/") or "\0" in path:
        return f"{path[:120]!r} must be an absolute, normalized path (no '..', '.' or '//')"
    return None


def check_environment(env: Environment) -> None:
    at = "environment"
    if len(env.labels) > MAX_LABELS:
        raise ValueError(f"{at}.labels: {len(env.labels)} labels is above the limit of {MAX_LABELS}")
    for key, value in env.labels.items():
        _named(f"{at}.labels[{key[:80]!r}]", key, k8s_names.qualified_key)
        if not has_template(value):  # a templated value is checked once rendered (``rendered_environment_problems``)
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
        if name is not None and not has_template(name):
            _named(f"{at}.{field}", name, k8s_names.dns_subdomain)


def rendered_environment_problems(env: Environment) -> list[tuple[Where, str]]:
    """The checks ``check_environment`` leaves to the rendered values (label and node-selector values, the
    priority class and service account names), each at its path in the environment."""
    out: list[tuple[Where, str]] = []
    for section, values in (("labels", env.labels), ("nodeSelector", env.node_selector)):
        out += [((section, key), p) for key, value in values.items() if (p := k8s_names.label_value(value))]
    for field, name in (("priorityClassName", env.priority_class_name),
                        ("serviceAccountName", env.service_account_name)):
        if name is not None and (problem := k8s_names.dns_subdomain(name)):
            out.append(((field,), problem))
    return out


def _named(field: str, value: str, check) -> None:  # type: ignore[no-untyped-def]
    problem = check(value)
    if problem:
        raise ValueError(f"{field}: {problem}")
