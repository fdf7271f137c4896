"""What an op runs: its templates rendered with its own values and globals (``rules.templating``).

At submit, ``conditions`` is evaluated (``rules.conditions``) and a templated ``queue`` and what
placement reads (node selector values, tolerations, affinity, connection names) are rendered before the
op is routed; then everything else that reaches the pod is rendered once with the op's real globals, so
an op that cannot render is rejected (``invalid_template``) instead of running braces. Each admission renders again (``rendered``) from the spec as written, so a restart, a copy, a
resume with new params and each scheduled run get their own values; a retry renders the same.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from opsched.proto.queues import QueuesConfig
from opsched.proto.reasons import Refusal
from opsched.proto.spec import OpSpec
from opsched.rules.conditions import evaluate
from opsched.rules.template_sandbox import time_budget
from opsched.rules.templating import (
    Globals,
    globals_for,
    has_template,
    needs_rendering,
    placement_templated,
    render_placement,
    render_spec,
    render_text,
    template_values,
)

INVALID_TEMPLATE = Refusal.INVALID_TEMPLATE
INVALID_CONDITION = Refusal.INVALID_CONDITION


def rendered(op_id: str, spec: OpSpec, queue: str, config: QueuesConfig, *, namespace: str,
             created_at: datetime, requested_by: str | None, **lineage: Any) -> OpSpec:
    """``spec`` with every container rendered (raises ``TemplateError``); ``lineage``: ``compiled_at``,
    ``cloning_kind``, ``original_uuid`` (``rules.templating.globals_for``)."""
    if not spec.to_env and not needs_rendering(spec):
        return spec  # most ops: nothing to render (and no globals to build)
    globs = globals_for(op_id, spec, queue, config, namespace=namespace, created_at=created_at,
                        requested_by=requested_by, **lineage)
    return render_spec(spec, globs)


def routing_fields(spec: OpSpec, op_id: str, now: datetime) -> tuple[OpSpec, bool | None]:
    """Evaluate ``conditions`` and render a templated ``queue`` (``agent/queue``: the agent is kept) and what
    placement reads (``render_placement``: node selector values, tolerations, affinity, connection names), before
    routing (raises ``ConditionError`` or ``TemplateError``)."""
    values = {**spec.inputs, **spec.params}
    condition = bool(evaluate(spec.conditions, values)) if spec.conditions else None
    if not has_template(spec.queue) and not placement_templated(spec):
        if spec.queue and "/" in spec.queue:  # any producer's ``agent/queue``
            named, _, plain = spec.queue.rpartition("/")
            return msgspec.structs.replace(spec, queue=plain, agent=named), condition
        return spec, condition
    context = template_values(spec, Globals(uuid=op_id, name=spec.name, project_name=spec.project,
                                            created_at=now, iteration=spec.iteration))
    with time_budget():  # one budget for the queue and every placement value
        agent, queue = "", spec.queue
        if spec.queue:
            agent, _, name = render_text(spec.queue, context, ("queue",)).strip().rpartition("/")
            queue = name
        placed = render_placement(spec, context)
    selector = {k: v.strip() for k, v in placed.environment.node_selector.items()}
    environment = msgspec.structs.replace(placed.environment, node_selector=selector)
    return msgspec.structs.replace(placed, queue=queue, agent=agent or spec.agent, environment=environment), condition
