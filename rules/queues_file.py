"""The queue configuration as people write it: YAML (a file or the `set_queues` command) read and validated
with a precise error per problem. Admission compiles a valid one for its cycle (``services.admission.queues``);
the CLI validates a file before sending it (``opsched queues --apply``).
"""
from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path

import msgspec
import yaml

from opsched.proto import k8s_names
from opsched.proto.access import problems as access_problems
from opsched.proto.limits import MAX_COHORT_DEPTH, MAX_CONNECTION_NAME_CHARS, MAX_PRIORITY
from opsched.proto.queues import Cohort, Connection, Flavor, Queue, QueuesConfig
from opsched.proto.resources import QuantityError, amount
from opsched.proto.subjects import valid_token
from opsched.rules.agent_checks import agent_problems
from opsched.rules.node_pools import pools_of
from opsched.rules.pod_security import SYSTEM_NAMESPACES, SYSTEM_PRIORITY_CLASSES
from opsched.rules.taints import untolerated

DEFAULT_FLAVOR = "default"  # the flavor of a resource whose quota names no flavor
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")  # an env var's name, as the API server takes it


class QueuesConfigError(ValueError):
    pass


def check(config: QueuesConfig) -> None:
    """Raise ``QueuesConfigError`` listing every problem of a configuration."""
    found = problems(config)
    if found:
        raise QueuesConfigError("invalid queue configuration:\n  " + "\n  ".join(found))


def problems(config: QueuesConfig) -> list[str]:
    problems: list[str] = []
    names = [q.name for q in config.queues]
    flavor_names = {f.name for f in config.flavors} | {DEFAULT_FLAVOR}
    if not names:
        problems.append("queues: at least one queue is needed")
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"queues: the name {dup!r} is used twice")
    if config.default_queue not in names:
        problems.append(f"defaultQueue: {config.default_queue!r} is not one of the queues {names}")
    flavors = [f.name for f in config.flavors]
    for dup in sorted({n for n in flavors if flavors.count(n) > 1}):
        problems.append(f"flavors: the name {dup!r} is used twice")
    problems += _priority_problems(config)
    for project, queue in config.project_queues.items():
        if queue not in names:
            problems.append(f"projectQueues.{project}: {queue!r} is not one of the queues {names}")
    for i, q in enumerate(config.queues):
        problems += _queue_problems(f"queues[{i}]", q, flavor_names)
    problems += _cohort_problems(config, flavor_names)
    if not config.init_image.strip():
        problems.append("initImage: an image name is needed (the git and file init steps run it)")
    problems += _connections_problems(config.connections, names)
    problems += _pool_problems(config)
    return problems + agent_problems(config) + access_problems(config.access)


def _connections_problems(connections: list[Connection], queues: list[str]) -> list[str]:
    """Connections: unique names, each a DNS label; a git one with a repository url; its secret and env as
    Kubernetes takes them; the queues it names defined."""
    out: list[str] = []
    names = [c.name for c in connections]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(f"connections: the name {dup!r} is used twice")
    for i, c in enumerate(connections):
        at = f"connections[{i}]"
        problem = k8s_names.dns_label(c.name, MAX_CONNECTION_NAME_CHARS)
        if problem:
            out.append(f"{at}.name: {problem}")
        if c.kind == "git" and (c.schema_ is None or not c.schema_.url.strip()):
            out.append(f"{at}.schema.url: a git connection names its repository (schema: {{url: ...}})")
        if c.kind != "git" and c.schema_ is not None:
            out.append(f"{at}.schema: only a git connection has a schema (a repository)")
        out += [f"{at}.env[{j}].name: {e.name!r} is not an env var name" for j, e in enumerate(c.env)
                if not ENV_NAME.match(e.name)]
        out += [f"{at}.queues[{j}]: {q!r} is not one of the queues {queues}" for j, q in enumerate(c.queues)
                if q not in queues]
        if c.secret is not None:
            out += _secret_problems(f"{at}.secret", c)
    return out


def _secret_problems(at: str, c: Connection) -> list[str]:
    assert c.secret is not None
    out: list[str] = []
    problem = k8s_names.dns_subdomain(c.secret.name)
    if problem:
        out.append(f"{at}.name: {problem}")
    out += [f"{at}.items[{j}]: {key!r} is not an env var name (each item becomes one)"
            for j, key in enumerate(c.secret.items) if not ENV_NAME.match(key)]
    path = c.secret.mount_path
    if path is not None and (not path.startswith("/") or posixpath.normpath(path) != path.rstrip("/")):
        out.append(f"{at}.mountPath: {path!r} must be an absolute, normalized path")
    return out


def _priority_problems(config: QueuesConfig) -> list[str]:
    """Priority classes: unique names, values within MAX_PRIORITY; a queue's default classes (its own and its
    services') and maximum class defined, each default no higher than the maximum."""
    out: list[str] = []
    classes = [c.name for c in config.priority_classes]
    values = {c.name: c.value for c in config.priority_classes}
    for dup in sorted({n for n in classes if classes.count(n) > 1}):
        out.append(f"priorityClasses: the name {dup!r} is used twice")
    for i, c in enumerate(config.priority_classes):
        if abs(c.value) > MAX_PRIORITY:
            out.append(f"priorityClasses[{i}].value: {c.value} is beyond +-{MAX_PRIORITY} (class {c.name!r})")
    for i, q in enumerate(config.queues):
        defaults = (("defaultPriorityClass", q.default_priority_class),
                    ("services.defaultPriorityClass", q.services.default_priority_class))
        for field, name in (*defaults, ("maxPriorityClass", q.max_priority_class)):
            if name is not None and name not in values:
                out.append(f"queues[{i}].{field}: unknown priority class {name!r} "
                           f"(known: {', '.join(classes) or 'none'})")
        high = q.max_priority_class or ""
        for field, low in ((field, name or "") for field, name in defaults):
            if low in values and high in values and values[low] > values[high]:
                out.append(f"queues[{i}].{field}: {low!r} ({values[low]}) is above the queue's "
                           f"maxPriorityClass {high!r} ({values[high]})")
    return out


def _queue_problems(where: str, q: Queue, flavor_names: set[str]) -> list[str]:
    out: list[str] = []
    if not valid_token(q.name):
        out.append(f"{where}.name: {q.name!r} must be lowercase letters, digits and dashes (a DNS label)")
    if q.cohort is not None and not valid_token(q.cohort):
        out.append(f"{where}.cohort: {q.cohort!r} must be a DNS label")
    if q.namespace in SYSTEM_NAMESPACES:
        out.append(f"{where}.namespace: {q.namespace!r} is a system namespace; opsched never schedules into "
                   f"{', '.join(SYSTEM_NAMESPACES)} (at any podSecurity level)")
    if q.init_image is not None and not q.init_image.strip():
        out.append(f"{where}.initImage: an image name is needed (or leave it out: the configuration's)")
    for j, name in enumerate(q.priority_class_names):
        if name in SYSTEM_PRIORITY_CLASSES:
            out.append(f"{where}.priorityClassNames[{j}]: {name!r} is a system priority class, for the cluster's own "
                       "components; no queue's pods may use one")
    return out + _resources_problems(where, q, flavor_names)


def _cohort_problems(config: QueuesConfig, flavor_names: set[str]) -> list[str]:
    """Declared cohorts: unique DNS-label names, none a queue's; a ``parent`` declared too (a typo would make a new
    root), no cycle, at most ``MAX_COHORT_DEPTH`` cohorts from a queue up to its root; quota lines as a queue's, no
    limits on a root (there is nothing to borrow from or lend to), and only on keys (resource, flavor) some queue
    under the cohort lists (a queue uses cohort quota only for the flavors it lists)."""
    out: list[str] = []
    names = [c.name for c in config.cohorts]
    queue_names = {q.name for q in config.queues}
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(f"cohorts: the name {dup!r} is used twice")
    for i, c in enumerate(config.cohorts):
        at = f"cohorts[{i}]"
        if not valid_token(c.name):
            out.append(f"{at}.name: {c.name!r} must be lowercase letters, digits and dashes (a DNS label)")
        if c.name in queue_names:
            out.append(f"{at}.name: {c.name!r} is also a queue's name; a cohort and a queue need distinct names")
        if c.parent is not None and c.parent not in names:
            out.append(f"{at}.parent: {c.parent!r} is not a declared cohort (declared: "
                       f"{', '.join(names) or 'none'}); declare it under cohorts")
        out += _resources_problems(at, c, flavor_names) + _root_limit_problems(at, c)
    cycles = _cycle_problems(config)
    return out + cycles + ([] if cycles else _depth_problems(config) + _unused_quota_problems(config))


def _root_limit_problems(at: str, c: Cohort) -> list[str]:
    if c.parent is not None:
        return []
    return [f"{at}.resources[{j}].flavors[{k}].{field}: cohort {c.name!r} has no parent to borrow from or lend to; "
            "limits need a parent cohort"
            for j, rq in enumerate(c.resources) for k, f in enumerate(rq.flavors)
            for field, value in (("borrowingLimit", f.borrowing_limit), ("lendingLimit", f.lending_limit),
                                 ("guaranteed", f.guaranteed)) if value is not None]


def _cycle_problems(config: QueuesConfig) -> list[str]:
    out: list[str] = []
    declared = {c.name: c for c in config.cohorts}
    cycles: set[frozenset[str]] = set()
    for i, c in enumerate(config.cohorts):
        chain = [c.name]
        parent = c.parent
        while parent in declared and parent not in chain:
            chain.append(parent)
            parent = declared[parent].parent
        if parent is not None and parent in chain:
            loop = chain[chain.index(parent):] + [parent]
            if frozenset(loop) not in cycles:
                cycles.add(frozenset(loop))
                out.append(f"cohorts[{i}].parent: the cohorts form a cycle {' → '.join(loop)}; a tree needs a root")
    return out


def _depth_problems(config: QueuesConfig) -> list[str]:
    out: list[str] = []
    for i, q in enumerate(config.queues):
        path = cohort_path(config, q.cohort)
        if len(path) > MAX_COHORT_DEPTH:
            out.append(f"queues[{i}].cohort: {' → '.join(reversed(path))} → {q.name} is {len(path)} cohorts deep, "
                       f"more than {MAX_COHORT_DEPTH}")
    return out


def _unused_quota_problems(config: QueuesConfig) -> list[str]:
    listed: dict[str, set[tuple[str, str]]] = {}
    for q in config.queues:
        for cohort in cohort_path(config, q.cohort):
            listed.setdefault(cohort, set()).update((rq.resource, f.name) for rq in q.resources for f in rq.flavors)
    return [f"cohorts[{i}].resources[{j}].flavors[{k}].name: no queue under cohort {c.name!r} lists {rq.resource} "
            f"flavor {f.name!r}, so none could use this quota"
            for i, c in enumerate(config.cohorts) for j, rq in enumerate(c.resources) for k, f in enumerate(rq.flavors)
            if (rq.resource, f.name) not in listed.get(c.name, set())]


def cohort_path(config: QueuesConfig, cohort: str | None) -> list[str]:
    """``cohort`` and its declared ancestors, up to the root (an undeclared cohort is a root); [] for None.
    Assumes no cycle (``problems`` refuses one)."""
    parents = {c.name: c.parent for c in config.cohorts}
    out: list[str] = []
    while cohort is not None and cohort not in out:
        out.append(cohort)
        cohort = parents.get(cohort)
    return out


def _resources_problems(where: str, q: Queue | Cohort, flavor_names: set[str]) -> list[str]:
    """A queue's (or cohort's) resources: each listed once, with flavors each listed once and defined, and valid quantities."""
    out: list[str] = []
    seen_resources: set[str] = set()
    for j, rq in enumerate(q.resources):
        if rq.resource in seen_resources:
            out.append(f"{where}.resources[{j}].resource: {rq.resource!r} is listed twice; "
                       f"put all its flavors in one entry")
        seen_resources.add(rq.resource)
        if not rq.flavors:
            out.append(f"{where}.resources[{j}].flavors: list at least one flavor")
        seen_flavors: set[str] = set()
        for k, f in enumerate(rq.flavors):
            if f.name in seen_flavors:
                out.append(f"{where}.resources[{j}].flavors[{k}].name: flavor {f.name!r} is listed twice")
            seen_flavors.add(f.name)
        for k, f in enumerate(rq.flavors):
            at = f"{where}.resources[{j}].flavors[{k}]"
            if f.name not in flavor_names:
                out.append(f"{at}.name: unknown flavor {f.name!r}; define it under flavors (known: "
                           f"{', '.join(sorted(flavor_names))})")
            out += _quantity_problems(at, rq.resource, f)
    return out


def _pool_problems(config: QueuesConfig) -> list[str]:
    """Each flavor's node ``pool``: a unique name, maxNodes at least minNodes, a timeout no shorter than the expected
    time, quantities that parse, labels that agree with the flavor's, taints the flavor tolerates; and each
    ``scope: pool`` budget naming a declared pool."""
    out: list[str] = []
    names = [pool.name for _, pool in pools_of(config)]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(f"flavors: the pool name {dup!r} is used twice")
    for i, flavor in enumerate(config.flavors):
        out += _one_pool_problems(f"flavors[{i}].pool", flavor)
    for i, budget in enumerate(config.budgets):
        if budget.scope == "pool" and budget.name not in names:
            out.append(f"budgets[{i}].name: {budget.name!r} is not a declared pool {sorted(names)}")
    return out


def _one_pool_problems(at: str, flavor: Flavor) -> list[str]:
    pool = flavor.pool
    if pool is None:
        return []
    out: list[str] = []
    if not pool.name.strip():
        out.append(f"{at}.name: a pool needs a name")
    if pool.max_nodes < pool.min_nodes:
        out.append(f"{at}.maxNodes: {pool.max_nodes} is less than minNodes {pool.min_nodes}")
    if pool.provisioning_timeout_seconds < pool.provisioning_seconds:
        out.append(f"{at}.provisioningTimeoutSeconds: {pool.provisioning_timeout_seconds:g} is less than "
                   f"provisioningSeconds {pool.provisioning_seconds:g}")
    for resource, qty in pool.allocatable.items():
        try:
            amount(resource, qty)
        except QuantityError as exc:
            out.append(f"{at}.allocatable.{resource}: {exc}")
    for key, value in pool.node_labels.items():
        if key in flavor.node_labels and flavor.node_labels[key] != value:
            out.append(f"{at}.nodeLabels.{key}: {value!r} contradicts the flavor's nodeLabels "
                       f"({key}: {flavor.node_labels[key]!r})")
    for taint in untolerated(pool.taints, flavor.tolerations):
        out.append(f"{at}.taints: the flavor's tolerations do not tolerate {taint.get('key')}="
                   f"{taint.get('value', '')}:{taint.get('effect')} (its pods could never go on the pool's nodes)")
    return out


def _quantity_problems(at: str, resource: str, f) -> list[str]:
    out: list[str] = []
    for attr in ("nominal", "borrowing_limit", "lending_limit", "guaranteed"):
        value = getattr(f, attr)
        if value is None:
            continue
        try:
            amount(resource, value)
        except QuantityError as exc:
            out.append(f"{at}.{_camel(attr)}: {exc}")
    if not out and f.guaranteed is not None and amount(resource, f.guaranteed) > amount(resource, f.nominal):
        out.append(f"{at}.guaranteed: {f.guaranteed} is more than nominal {f.nominal}")
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def parse_queues(text: str, source: str = "<string>") -> QueuesConfig:
    """YAML (or JSON) text -> QueuesConfig, with the path of the first schema error."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise QueuesConfigError(f"{source}: not valid YAML: {exc}") from None
    try:
        config = msgspec.convert(doc, QueuesConfig)
    except msgspec.ValidationError as exc:
        raise QueuesConfigError(f"{source}: invalid queue configuration: {exc}") from None
    try:
        check(config)
    except QueuesConfigError as exc:
        raise QueuesConfigError(f"{source}: {exc}") from None
    return config


def load_queues(path: Path | None) -> QueuesConfig:
    if path is None:
        return QueuesConfig()
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise QueuesConfigError(f"{path}: {exc.strerror}") from None
    return parse_queues(text, str(path))


def file_source(path: Path) -> str:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    return f"file:{path}#{digest}"
