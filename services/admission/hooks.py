"""Hooks: the follow-up ops an op's end triggers (Polyaxon's ``hooks``), submitted by admission.

When an op's end is on the stream (``HooksDue``, a follower of the fold), the leader submits one op per hook whose
``trigger`` matches how it ended (``succeeded``; ``failed``: failed or timed out; ``stopped``; ``done``: any of these
or skipped), on the bus as any producer would: a ``submit`` command (``cmd.admission.submit.<queue>``) with
``hook_of`` set and a deterministic op id (``hook_op_id``), so a leader that submits it twice (a crash, a new
leader) makes one op. Its queue is the hook's own, else the finished op's; it belongs to the finished op's
requester. Admission's submit then evaluates the hook in the finished op's context (``followed``): the strings of
its params and inputs render with the op's ``globals`` (``globals.status`` included), params and outputs, its
conditions are evaluated there (false: the follow-up op is ``skipped``); a template or condition that fails rejects
it (``invalid_template``/``invalid_condition``), visible in ``opsched ops``. A hook's op has no hooks.
"""
from __future__ import annotations

from datetime import datetime

import msgspec

from opsched.proto.commands import SubmitOperation
from opsched.proto.lifecycle import HOOK_TRIGGERS
from opsched.proto.queues import QueuesConfig
from opsched.proto.spec import OpSpec
from opsched.rules.conditions import evaluate
from opsched.rules.naming import hook_op_id
from opsched.rules.templating import globals_for, hook_values, render_value
from opsched.services.admission.model.records import OpRecord


def due(op: OpRecord, now: datetime) -> list[SubmitOperation]:
    """The submit commands of the hooks the op's end triggers (none while it has not ended)."""
    if not op.status.terminal:
        return []
    return [SubmitOperation(op_id=hook_op_id(op.op_id, op.attempt, i), requested_at=now, hook_of=op.op_id,
                            spec=hook.spec if hook.spec.queue else msgspec.structs.replace(hook.spec, queue=op.queue))
            for i, hook in enumerate(op.spec.hooks) if op.status in HOOK_TRIGGERS.get(hook.trigger, ())]


def followed(spec: OpSpec, upstream: OpRecord, upstream_spec: OpSpec, config: QueuesConfig, *,
             namespace: str) -> tuple[OpSpec, bool | None]:
    """The hook's spec with its params and inputs rendered in the finished op's context, and its conditions'
    verdict there (None: it has none). Raises ``TemplateError`` or ``ConditionError``."""
    globs = globals_for(upstream.op_id, upstream_spec, upstream.queue, config, namespace=namespace,
                        created_at=upstream.submitted_at, requested_by=upstream.requested_by)
    values = hook_values(upstream_spec, globs, upstream.status.label, upstream.history.outputs)
    params = {k: render_value(v, values, ("params", k)) for k, v in spec.params.items()}
    inputs = {k: render_value(v, values, ("inputs", k)) for k, v in spec.inputs.items()}
    condition = bool(evaluate(spec.conditions, values)) if spec.conditions else None  # ``outputs.x``: a scope
    return msgspec.structs.replace(spec, params=params, inputs=inputs, conditions=None), condition
