"""``opsched submit FILE --dry-run``: the pods each op of a file would get, built exactly as the dispatcher
builds them, without publishing anything (what ``kubectl --dry-run=client -o yaml`` is to Kubernetes).

Each op is rendered with its own values (``rules.templating``, as admission renders it: its op id,
created now, owner ``cli``, the dispatcher's default namespace and Polyaxon's artifacts root, or its
queue's when a queue config is given) and turned into pods by the
dispatcher's own ``build_pods``, then checked by the dispatcher's GPU-accounting rules and its queue's pod
security level (the queue config's, given or the running ``opsched up``'s; else the default level). What
admission adds when it admits (its flavor's node labels and tolerations, the borrowing label) is not known
offline and is left out.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from opsched.proto import codec
from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import QueuesConfig
from opsched.proto.spec import OpSpec
from opsched.rules import connections, reserved_keys
from opsched.rules.gpu_accounting import violations
from opsched.rules.naming import hook_op_id, pod_name
from opsched.rules.spec_size import too_large
from opsched.rules.templating import globals_for, render_spec

DEFAULT_NAMESPACE = "opsched"  # the dispatcher's default (services.runtime.settings)


def queue_config(path: Path | None, data_dir: Path) -> QueuesConfig:
    """The queue configuration the CLI checks against: ``path``, else the running ``opsched up``'s, else the
    default one (raises ``QueuesConfigError``)."""
    from opsched.rules.queues_file import load_queues

    if path is None:
        state = Path(data_dir) / "up.json"
        written = json.loads(state.read_text()).get("queues_file") if state.exists() else None
        path = Path(written) if written else None
    return load_queues(path)


def rendered(spec: OpSpec, op_id: str, config: QueuesConfig | None = None) -> OpSpec:
    """``spec`` as admission would render it for ``op_id`` (raises ``TemplateError``)."""
    config = config or QueuesConfig()
    now = datetime.now(timezone.utc)
    globs = globals_for(op_id, spec, spec.queue or config.default_queue, config, namespace=DEFAULT_NAMESPACE,
                        created_at=now, requested_by="cli", compiled_at=now)
    return render_spec(spec, globs)


def pods_of(spec: OpSpec, op_id: str, config: QueuesConfig | None = None) -> list[dict[str, Any]]:
    """Every pod of the op's first attempt (``spec`` rendered), as the dispatcher builds them from its
    admitted event, with the connections and init image its queue's configuration gives it (``refusals`` says
    why it may not name one: ``ValueError`` here)."""
    from opsched.rules.podspec import build_pods

    config = config or QueuesConfig()
    queue = spec.queue or config.default_queue
    own = next((q for q in config.queues if q.name == queue), None)
    carried = connections.admitted_fields(spec, config, queue)[0]
    admitted = OperationAdmitted(op_id=op_id, at=datetime.now(timezone.utc), spec=spec, queue=queue,
                                 namespace=own.namespace if own and own.namespace else DEFAULT_NAMESPACE,
                                 pod_name=pod_name(op_id, 0), **carried)
    return build_pods(admitted)


def refusals(specs: list[OpSpec], rendered_specs: list[OpSpec], ids: list[str],
             config: QueuesConfig | None = None) -> list[str]:
    """Every reason the services would refuse these ops, once each: the GPU-accounting rules, the connections
    its queue's configuration does not give it (``rules.connections``) and the queue's pod security on what would
    run (``rendered_specs``: toEnv and templates applied), then the contract, the size and the conditions of what
    is sent (``specs``)."""
    config = config or QueuesConfig()
    problems = [p for spec, op_id in zip(rendered_specs, ids)
                for p in _run_problems(spec, op_id, spec.queue or config.default_queue, config)]
    problems += [r for spec in specs for r in (codec.refusal(spec), too_large(spec), condition_problem(spec)) if r]
    for spec, op_id in zip(specs, ids):  # a hook's op: the same rules on what it would run (in the op's queue)
        for i, hook in enumerate(spec.hooks):
            follow_id = hook_op_id(op_id, 0, i)
            follow = rendered(hook.spec, follow_id, config)
            queue = follow.queue or spec.queue or config.default_queue
            problems += [f"hooks[{i}]: {p}" for p in _run_problems(follow, follow_id, queue, config)]
    return list(dict.fromkeys(problems))


def _run_problems(spec: OpSpec, op_id: str, queue: str, config: QueuesConfig) -> list[str]:
    """Why the dispatcher would refuse what ``spec`` (rendered) runs in ``queue``: GPU accounting, reserved keys, the
    connections its queue does not give it, else its pods' pod security."""
    from opsched.rules.pod_security import check_pods, policy_for

    carried, unusable = connections.admitted_fields(spec, config, queue)
    return [*violations(spec), *reserved_keys.problems(spec),
            *(unusable or check_pods(pods_of(spec, op_id, config), policy_for(config, queue, carried["connections"])))]


def hook_notes(specs: list[OpSpec], ids: list[str]) -> list[str]:
    """A line per hook of each op: when it runs, what, where (its pods are built when the op ends, its params
    rendered in the op's context then; ``refusals`` has checked them already)."""
    return [f"{op_id}: hook {i} on {hook.trigger}: op {hook_op_id(op_id, 0, i)} ({hook.spec.name}) in queue "
            f"{hook.spec.queue or spec.queue or 'of the op'}, its params rendered over the op's when it ends"
            for spec, op_id in zip(specs, ids) for i, hook in enumerate(spec.hooks)]


def dump(pods: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps(pods if len(pods) != 1 else pods[0], indent=2, sort_keys=False)
    return yaml.safe_dump_all(pods, sort_keys=False, explicit_start=True)


def condition_problem(spec: OpSpec) -> str | None:
    """Why the op's ``conditions`` cannot be evaluated, as admission evaluates it (None: it can)."""
    from opsched.rules.conditions import ConditionError, evaluate

    if not spec.conditions:
        return None
    try:
        evaluate(spec.conditions, {**spec.inputs, **spec.params})
    except ConditionError as exc:
        return f"conditions: {exc}"
    return None
