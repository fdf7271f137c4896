"""Builders that keep tests short: fluent operation specs and events at an injected, fixed time.

    spec = op("train").queue("gpu-a").gpus(2, product="A100").priority(10).timeout(600).build()
    events = [submitted(spec, op_id="a"), cost_estimated("a")]  # caching off: no cache answer to wait for

Every event helper takes ``at=`` (default ``T0``); use ``at=t(5)`` for "five seconds after T0".

Modules: ``clock`` (T0, t), ``cases`` (table tests), ``specs`` (the OpSpec builder), ``commands``,
``events``, ``queues`` (queue configs and books), ``nodes``, ``admission`` (queued ops, ``fold``) and
``preemption`` (preemption, eviction, aging). Every name is re-exported here.
"""
from __future__ import annotations

from tests.builders.admission import fold, queued
from tests.builders.cases import Case, case, case_name
from tests.builders.clock import T0, t
from tests.builders.commands import stop, submit
from tests.builders.events import (
    NAMESPACE,
    admitted,
    cache_hit,
    cache_missed,
    cost_estimated,
    dispatched,
    failed,
    failure_final,
    gates_cleared,
    rejected,
    retry_scheduled,
    running,
    stop_requested,
    stopped,
    submitted,
    succeeded,
)
from tests.builders.nodes import first_fit, node, node_removed, taint
from tests.builders.preemption import (
    configure_aging,
    evicted,
    preempt_requested,
    preempted,
)
from tests.builders.queues import book, cohort, gpu_flavor, queue, queues_configured, quota, resource_quota
from tests.builders.specs import GPU, GPU_PRODUCT, OpBuilder, op

__all__ = [
    "GPU", "GPU_PRODUCT", "NAMESPACE", "T0", "Case", "OpBuilder", "admitted", "book", "cache_hit", "cohort", "cache_missed",
    "case", "case_name", "configure_aging", "cost_estimated", "dispatched", "evicted", "failed", "failure_final", "fold",
    "first_fit", "gates_cleared", "gpu_flavor", "node", "node_removed", "op", "preempt_requested", "preempted", "queue",
    "queued", "queues_configured", "quota", "rejected", "resource_quota", "retry_scheduled", "running", "stop", "stop_requested", "stopped", "submit",
    "submitted", "succeeded", "t", "taint",
]

