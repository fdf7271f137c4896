"""Which admin-declared connections an op may name, and what its pods get from them (one rule for admission,
the dispatcher and the CLI).

An op names connections in ``connections`` (its main container gets them; a replica group's, its own) and in an
init step's ``connection``. Each must be declared in the queue configuration (``QueuesConfig.connections``) and
usable by the op's queue (the connection's ``queues``, empty: every queue); a git init step naming one needs a
``git`` connection (a ``custom`` one holds no repository; its credentials go to a ``container`` step).
Admission refuses an op that names one it may not (``unknown_connection``, at submit and again at admission: the
configuration may have changed) and puts the declarations of those it names on ``OperationAdmitted.connections``
with the queue's init image (``init_image``, when the op has a git or file step): names, kinds, repositories and
the Secrets' names, never a secret's value. The dispatcher builds the pods from them (``rules.podspec``) after checking that they are
exactly what its own configuration declares (``carried_problems``).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opsched.proto.queues import Connection, QueuesConfig
from opsched.proto.spec import InitStep, OpSpec


def named(spec: OpSpec) -> Iterator[tuple[str, str, InitStep | None]]:
    """(where, connection name, the init step naming it or None) for every connection the op's pods name."""
    pods = [("", spec.connections, spec.init)]
    pods += [(f"replicas[{i}].", g.connections, g.init) for i, g in enumerate(spec.replicas)]
    for at, connections, init in pods:
        for i, name in enumerate(connections):
            yield f"{at}connections[{i}]", name, None
        for i, step in enumerate(init):
            if step.connection is not None:
                yield f"{at}init[{i}].connection", step.connection, step


def resolve(spec: OpSpec, config: QueuesConfig, queue: str) -> tuple[list[Connection], list[str]]:
    """The declarations of the connections ``spec`` names (each once, in the order first named), and every reason
    it may not name one in ``queue`` (empty: none)."""
    declared = {c.name: c for c in config.connections}
    found: dict[str, Connection] = {}
    problems: list[str] = []
    for where, name, step in named(spec):
        connection = declared.get(name)
        if connection is None:
            known = ", ".join(sorted(declared)) or "none"
            problems.append(f"{where}: connection {name!r} is not declared in the queue configuration "
                            f"(declared: {known})")
            continue
        if connection.queues and queue not in connection.queues:
            problems.append(f"{where}: connection {name!r} is not available to queue {queue} (only to "
                            f"{', '.join(connection.queues)})")
            continue
        if step is not None and step.git is not None and connection.kind != "git":
            problems.append(f"{where}: connection {name!r} is a {connection.kind} connection; a git step clones "
                            "the repository of a git connection (give a custom one's credentials to a container "
                            "step)")
            continue
        found.setdefault(name, connection)
    return list(found.values()), list(dict.fromkeys(problems))


def undeclared(spec: OpSpec, connections: list[Connection]) -> list[str]:
    """The connections ``spec`` names that ``connections`` (an admitted event's) do not declare: its pods cannot be
    built (``rules.podspec``); the dispatcher refuses such an event."""
    declared = {c.name for c in connections}
    return [f"{where}: connection {name!r} is not declared on the admitted event" for where, name, _ in named(spec)
            if name not in declared]


def init_image(config: QueuesConfig, queue: str) -> str:
    """The image of ``queue``'s git and file init steps: its own, else the configuration's."""
    own = next((q for q in config.queues if q.name == queue), None)
    return own.init_image if own is not None and own.init_image else config.init_image


def admitted_fields(spec: OpSpec, config: QueuesConfig, queue: str) -> tuple[dict[str, Any], list[str]]:
    """What ``OperationAdmitted`` carries for ``spec`` (as rendered) in ``queue``: its connections' declarations
    and, when a pod has a git or file step, the init image (else ""); and why it may not run there (``resolve``)."""
    connections, problems = resolve(spec, config, queue)
    steps = [s for s in (*spec.init, *(s for g in spec.replicas for s in g.init)) if s.container is None]
    return {"connections": connections, "init_image": init_image(config, queue) if steps else ""}, problems


def carried_problems(spec: OpSpec, queue: str, carried: dict[str, Any], config: QueuesConfig) -> list[str]:
    """How an admitted event's connections and init image (``carried``, as ``admitted_fields`` gives them) differ
    from what ``config`` gives its op in ``queue``: the dispatcher trusts only its own configuration."""
    expected, problems = admitted_fields(spec, config, queue)
    out = list(problems)
    if carried["connections"] != expected["connections"]:
        out.append(f"connections {[c.name for c in carried['connections']]} are not those the configuration "
                   f"declares for the op in queue {queue} ({[c.name for c in expected['connections']]}), or not as "
                   "it declares them")
    if carried["init_image"] != expected["init_image"]:
        out.append(f"init image {carried['init_image']!r} is not queue {queue}'s ({expected['init_image']!r})")
    return out
