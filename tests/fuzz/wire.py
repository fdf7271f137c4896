"""Strategies for every wire message, built generically from the msgspec Structs in ``proto/`` (their
``msgspec.inspect`` type info), as the JSON a producer would send (camelCase names, the tag field).

``message(cls)`` draws a valid document of ``cls``; a few field names get values from small pools
(``HINTS``), so that generated events and commands talk about the same few ops, queues and nodes and
reach the handlers' and folds' interesting paths instead of stopping at an unknown op id.
"""
from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

from opsched.proto import codec
from opsched.proto.cluster import CLUSTER_EVENTS
from opsched.proto.commands import BULK_COMMANDS, COMMANDS
from opsched.proto.config import CONFIG_MESSAGES, SetQueues
from opsched.proto.events import EVENTS
from opsched.proto.lifecycle import HOOK_TRIGGERS
from opsched.proto.queries import (
    CostAnswer,
    CostRequest,
    LogsChunk,
    LogsRequest,
    QueuesAnswer,
    QueuesRequest,
    SchedulesAnswer,
    SchedulesRequest,
    WhyAnswer,
    WhyRequest,
)
from opsched.proto.queue_stops import QUEUE_STOP_COMMANDS
from opsched.proto.schedules import SCHEDULE_COMMANDS, SCHEDULE_EVENTS
from opsched.proto.spec import OpSpec

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
OP_IDS = ("a", "b", "c")
QUEUES = ("default", "gpu", "nowhere")
NODES = ("node-1", "node-2")
RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "amd.com/gpu")
QUANTITIES = ("1", "2", "500m", "4Gi", "0")  # well-formed: the contract's bounds are another class
CRONS = ("0 * * * *", "*/5 * * * *", "@daily", "30 2 * * 1-5")

# ---- every decoder of the contract, with the message types it reads ---------------------------------
QUERIES = (WhyRequest, WhyAnswer, QueuesRequest, QueuesAnswer, CostRequest, CostAnswer, SchedulesRequest, SchedulesAnswer)
DECODERS: dict[str, tuple[Any, tuple[type, ...]]] = {
    "event": (codec.decode_event, EVENTS),
    "command": (codec.decode_command, COMMANDS + (SetQueues,) + SCHEDULE_COMMANDS + QUEUE_STOP_COMMANDS
                + BULK_COMMANDS),
    "message": (codec.decode, EVENTS + COMMANDS + (SetQueues,) + SCHEDULE_EVENTS + SCHEDULE_COMMANDS
                + QUEUE_STOP_COMMANDS + BULK_COMMANDS),
    "spec": (codec.decode_spec, (OpSpec,)),
    "cluster": (codec.decode_cluster, CLUSTER_EVENTS),
    "config": (codec.decode_config, CONFIG_MESSAGES),
    "query": (codec.decode_query, QUERIES),
    "ops_stream": (codec.decode_ops_stream, EVENTS + SCHEDULE_EVENTS),
    "logs_request": (codec.decode_logs_request, (LogsRequest,)),  # the dispatcher's (`opsched logs`)
    "logs_chunk": (codec.decode_logs_chunk, (LogsChunk,)),  # the client's
}
ALL_TYPES: tuple[type, ...] = tuple(dict.fromkeys(t for _, types in DECODERS.values() for t in types))


def when(offset_s: int = 0) -> str:
    return (T0 + timedelta(seconds=offset_s)).isoformat().replace("+00:00", "Z")


_times = st.integers(0, 3600).map(when)
_quantity = st.sampled_from(RESOURCES).flatmap(  # accelerators are whole devices (the contract's rule)
    lambda r: st.tuples(st.just(r), st.sampled_from([q for q in QUANTITIES if "/" not in r or q.isdigit()])))
_quantities = st.lists(_quantity, max_size=3).map(dict)
HINTS: dict[str, st.SearchStrategy[Any]] = {  # python field name -> its values
    "op_id": st.sampled_from(OP_IDS), "new_op_id": st.sampled_from(OP_IDS + ("d", "e")),
    "original_op_id": st.sampled_from(OP_IDS), "preemptor": st.sampled_from(OP_IDS),
    "schedule_id": st.sampled_from(("nightly", "hourly")), "queue": st.sampled_from(QUEUES),
    "node": st.sampled_from(NODES), "attempt": st.integers(0, 2), "count": st.integers(1, 3),
    "limits": _quantities, "requests": _quantities,
    "allocatable": st.lists(_quantity, min_size=1, max_size=3).map(dict),  # a pool's is never empty (nor a node's)
    "at": _times, "submitted_at": _times, "requested_at": _times, "started_at": _times,
    "scheduled_for": _times, "start_at": _times, "end_at": st.integers(3600, 7200).map(when),
    "cron": st.sampled_from(CRONS), "frequency_s": st.integers(60, 86400), "max_runs": st.integers(1, 5),
    "image": st.just("python:3.11-slim"), "failed_type": st.sampled_from(("admitted", "submitted", "x")),
    "dependency": st.just("kubernetes"), "currency": st.just("USD"),
    "agent": st.sampled_from(("", "agent-b")),  # "": the default agent; a name is a subject token
}
# labels, annotations and node selectors follow Kubernetes' key and value syntax (the contract's)
_key = st.from_regex(re.compile(r"([a-z]{1,8}\.[a-z]{2,4}/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?"), fullmatch=True)
_value = st.from_regex(re.compile(r"([A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?)?"), fullmatch=True)
HINTS.update({
    "labels": st.dictionaries(_key, _value, max_size=3), "node_selector": st.dictionaries(_key, _value, max_size=3),
    "annotations": st.dictionaries(_key, st.text(max_size=12), max_size=3),
})
# the names of a spec's containers, groups, pods and ops are DNS labels
DNS_FIELDS = {"name", "pod_name", "namespace", "project", "run_op_id", "priority_class", "priority_class_name",
              "service_account_name", "main_role"}
_label = st.from_regex(re.compile(r"[a-z][a-z0-9-]{0,10}[a-z0-9]"), fullmatch=True)
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_json = st.recursive(st.none() | st.booleans() | st.integers(-1000, 1000) | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=8)
# a pod's init steps, sidecars and connections as the contract takes them (one kind per step, unique container
# names and destinations, connection names DNS labels): a few valid ones each, drawn as lists
_STEPS = [{"git": {"url": "https://git.example/ml/models.git", "revision": "v1", "flags": ["--depth 1"]}},
          {"git": {}, "connection": "repo", "path": "/plx-context/code"},
          {"file": {"content": "echo hi", "filename": "run.sh", "chmod": "+x"}, "path": "/scripts"},
          {"container": {"image": "python:3.11-slim", "name": "init-prepare"}, "connection": "db"}]
POD_PARTS: dict[str, st.SearchStrategy[Any]] = {
    "init": st.lists(st.sampled_from(range(len(_STEPS))), max_size=2, unique=True).map(
        lambda picked: [_STEPS[i] for i in picked]),
    "sidecars": st.lists(st.sampled_from(["sidecar-logs", "sidecar-metrics"]), max_size=2, unique=True).map(
        lambda names: [{"image": "python:3.11-slim", "name": n} for n in names]),
    "connections": st.lists(st.sampled_from(["repo", "db", "cache"]), max_size=2, unique=True),
}


def message(cls: type[msgspec.Struct]) -> st.SearchStrategy[dict[str, Any]]:
    """A valid JSON document of ``cls``."""
    return _of_struct(cls)


def any_message(types: tuple[type, ...] = ALL_TYPES) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(types).flatmap(message)


@functools.cache
def _of_struct(cls: type, skip: frozenset[str] = frozenset()) -> st.SearchStrategy[dict[str, Any]]:
    """``skip``: fields left at their defaults (a hook's op has no hooks)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType), cls
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in info.fields:
        if f.name in skip:
            continue
        (required if f.required else optional)[f.encode_name] = _of_field(f.name, f.type)
    if info.tag_field is not None:
        required[info.tag_field] = st.just(info.tag)
    drawn = st.fixed_dictionaries(required, optional=optional)
    return drawn.map(_service_or_not) if cls is OpSpec else drawn


def _service_or_not(spec: dict[str, Any]) -> dict[str, Any]:
    """The contract's rule of a service: its ``service`` fields exactly when its run kind is ``service``, and a
    culling timeout only then (a drawn spec with service fields is a service; one without is not)."""
    if spec.get("service") is not None:
        return {**spec, "runKind": "service"}
    spec = {k: v for k, v in spec.items() if k != "service"}
    if spec.get("runKind") == "service":
        spec["runKind"] = "job"
    termination = spec.get("termination")
    if isinstance(termination, dict) and "culling" in termination:
        spec["termination"] = {k: v for k, v in termination.items() if k != "culling"}
    return spec


def _of_field(name: str, t: mi.Type) -> st.SearchStrategy[Any]:
    if name == "replicas" and isinstance(t, mi.ListType):  # a spec's replica groups have unique names
        return st.lists(_of_type(t.item_type), max_size=2, unique_by=lambda group: group["name"])
    if name == "hooks" and isinstance(t, mi.ListType):  # a hook's op has no hooks of its own (the contract's rule)
        hook = st.fixed_dictionaries({"trigger": st.sampled_from(sorted(HOOK_TRIGGERS)),
                                      "spec": _of_struct(OpSpec, frozenset({"hooks"}))})
        return st.lists(hook, max_size=1)
    if name in HINTS:
        hinted = HINTS[name]
        return st.none() | hinted if _nullable(t) else hinted
    if name in DNS_FIELDS and isinstance(t, mi.StrType):
        return _label
    return _of_type(t, name)


def _nullable(t: mi.Type) -> bool:
    return isinstance(t, mi.UnionType) and any(isinstance(x, mi.NoneType) for x in t.types)


def _of_type(t: mi.Type, name: str = "") -> st.SearchStrategy[Any]:  # noqa: C901 - one case per kind
    if name in POD_PARTS and isinstance(t, mi.ListType) and (name != "connections" or isinstance(t.item_type, mi.StrType)):
        return POD_PARTS[name]  # (a configuration's or an admitted event's connections: declarations, drawn as any)
    if isinstance(t, mi.StructType):
        return _of_struct(t.cls)
    if isinstance(t, mi.UnionType):
        return st.one_of(*[_of_field(name, x) for x in t.types])
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.IntType):
        low = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else 0)
        return st.integers(low, t.le if t.le is not None else max(low, 0) + 100)
    if isinstance(t, mi.FloatType):
        low = t.ge if t.ge is not None else (t.gt if t.gt is not None else 0.0)
        return st.floats(low, t.le if t.le is not None else low + 1000.0, allow_nan=False,
                         exclude_min=t.gt is not None and t.ge is None)
    if isinstance(t, mi.StrType):
        if t.pattern is not None:
            return st.from_regex(t.pattern, fullmatch=True)
        return st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=t.min_length or 0,
                       max_size=min(t.max_length or 12, 12))
    if isinstance(t, mi.DateTimeType):
        return _times
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.EnumType):
        return st.sampled_from([m.value for m in t.cls])
    if isinstance(t, mi.ListType):
        least = t.min_length or 0  # a bound the type sets (``match``: at least one label) is kept
        return st.lists(_of_type(t.item_type), min_size=least, max_size=max(least, min(t.max_length or 2, 2)))
    if isinstance(t, mi.DictType):
        least = t.min_length or 0
        return st.dictionaries(_of_type(t.key_type), _of_type(t.value_type), min_size=least, max_size=max(least, 2))
    if isinstance(t, mi.AnyType):
        return _json
    raise NotImplementedError(f"no strategy for {t!r} (field {name!r}): add one")


def encode(doc: Any) -> bytes:
    return msgspec.json.encode(doc)
