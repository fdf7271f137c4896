"""The wire contract: every message round-trips, tags are the wire ``type``, keys are camelCase,
the checked-in JSON Schemas match the code, and the layering rules of DESIGN.md hold."""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import msgspec
import pytest

from proto import codec, subjects
from proto.commands import (
    COMMANDS, ApproveOperation, CopyOperation, RejectOperation, RestartOperation, ResumeOperation, StopOperation,
    SubmitOperation,
)
from proto.events import (
    EVENTS, CacheHit, CacheMissed, CostEstimated, ErrorRaised, Money, OperationAdmitted,
    OperationDispatched, OperationFailed, OperationRejected, OperationRunning, OperationStopped,
    OperationApproved, OperationEvicted, OperationOnHold, OperationResumed, OperationPreempted, OperationSkipped, OperationTimedOut,
    RetryScheduled, OperationSubmitted, OperationSucceeded, PreemptRequested, StopRequested,
    event_type,
)
from proto.schema_snapshots import SCHEMA_DIR, render
from proto.spec import Cache, Container, EnvVar, Environment, OpSpec, ReplicaGroup, Resources, Termination
from tests.builders import T0, t

ROOT = Path(__file__).resolve().parents[2]

# A spec with every field set away from its default, so the round trip covers all of them.
FULL_CONTAINER = Container(
    image="pytorch:2", name="trainer", command=["python"], args=["train.py", "--lr", "0.1"],
    env=[EnvVar(name="SEED", value="42")],
    resources=Resources(limits={"nvidia.com/gpu": "2", "memory": "8Gi"}, requests={"cpu": "500m"}),
    working_dir="/work", security_context={"runAsUser": 1000},
    volume_mounts=[{"name": "data", "mountPath": "/data"}],
)
FULL_SPEC = OpSpec(
    name="train", project="vision", queue="gpu-a", priority=7,
    container=FULL_CONTAINER,
    params={"lr": 0.1, "layers": [1, 2]}, inputs={"dataset": "s3://bucket/x"}, outputs={"model": "m.pt"},
    environment=Environment(
        node_selector={"nvidia.com/gpu.product": "A100"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={"nodeAffinity": {}}, labels={"team": "a"}, annotations={"note": "n"},
        priority_class_name="high", service_account_name="trainer", volumes=[{"name": "data", "emptyDir": {}}],
    ),
    termination=Termination(max_retries=2, timeout=600, ttl=60),
    cache=Cache(disable=False, ttl=3600, io=["dataset"], sections=["init"]),
    is_approved=False, conditions="{{ params.lr > 0 }}", cost=2.5, tags=["a", "b"], run_kind="service",
    component_hash="abc123", priority_class="high", preemptible=False, batch="sweep-1", batch_concurrency=3,
    replicas=[ReplicaGroup(name="worker", count=2, container=FULL_CONTAINER)],
)

_COMMON = {"op_id": "op-1", "at": T0, "attempt": 1}

SAMPLES: dict[str, msgspec.Struct] = {
    "submitted": OperationSubmitted(**_COMMON, spec=FULL_SPEC, queue="gpu-a", submitted_at=t(-5), priority=7,
                                    original_op_id="op-0", relation="restart"),
    "cost_estimated": CostEstimated(**_COMMON, estimate=Money(amount=12.5, currency="EUR"), basis="timeout",
                                    duration_s=600.0, breakdown={"nvidia.com/gpu": 12.0, "cpu": 0.5}),
    "cache_hit": CacheHit(**_COMMON, fingerprint="f" * 32, original_op_id="op-0", outputs={"model": "m.pt"}),
    "cache_missed": CacheMissed(**_COMMON, fingerprint="f" * 32, reason="not_found"),
    "admitted": OperationAdmitted(**_COMMON, spec=FULL_SPEC, queue="gpu-a", namespace="ml", pod_name="op-op-1-1",
                                  flavors={"nvidia.com/gpu": "a100"}, node_selector={"pool": "a100"},
                                  tolerations=[{"key": "gpu", "operator": "Exists"}], borrowing=True,
                                  effective_priority=12.5),
    "dispatched": OperationDispatched(**_COMMON, pod_name="op-op-1-1", namespace="ml"),
    "running": OperationRunning(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1"),
    "succeeded": OperationSucceeded(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1", reason="cache_hit",
                                    outputs={"model": "m.pt"}),
    "failed": OperationFailed(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1", reason="Error",
                              message="boom", exit_code=2),
    "rejected": OperationRejected(**_COMMON, reason="unknown_queue", message="unknown queue 'x'"),
    "stopped": OperationStopped(**_COMMON, reason="stopped_by_user", message="bye"),
    "stop_requested": StopRequested(**_COMMON, pod_name="op-op-1-1", namespace="ml", reason="preempted"),
    "preempt_requested": PreemptRequested(**_COMMON, pod_names=["op-op-1-1"], namespace="ml", preemptor="op-2",
                                          reason="within_queue", message="priority 100 > 0"),
    "preempted": OperationPreempted(**_COMMON, preemptor="op-2", reason="within_queue", message="m"),
    "evicted": OperationEvicted(**_COMMON, reason="gang_timeout", message="2/3 running", retry_after_s=30.0),
    "on_hold": OperationOnHold(**_COMMON, reason="is_approved_false", message="waiting for approval"),
    "approved": OperationApproved(**_COMMON, approved_by="alice", comment="ok"),
    "skipped": OperationSkipped(**_COMMON, reason="upstream_skipped", message="its upstream op was skipped"),
    "retry_scheduled": RetryScheduled(**_COMMON, retry_after_s=20.0, reason="Error", retries_used=2),
    "timed_out": OperationTimedOut(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1", message="deadline"),
    "resumed": OperationResumed(**_COMMON, params={"lr": 0.1}, resumed_by="alice"),
    "error": ErrorRaised(**_COMMON, service="admission", subject="cmd.submit._", reason="malformed_message",
                         message="cannot decode", payload="{oops"),
    "submit": SubmitOperation(op_id="op-1", spec=FULL_SPEC, requested_at=T0, requested_by="alice"),
    "stop": StopOperation(op_id="op-1", requested_at=T0, requested_by="alice", reason="no longer needed"),
    "approve": ApproveOperation(op_id="op-1", requested_at=T0, requested_by="alice", comment="fine"),
    "restart": RestartOperation(op_id="op-1", requested_at=T0, requested_by="alice", params={"lr": 1},
                                new_op_id="op-2"),
    "copy": CopyOperation(op_id="op-1", requested_at=T0, requested_by="alice", params={"lr": 1}, new_op_id="op-3"),
    "resume": ResumeOperation(op_id="op-1", requested_at=T0, requested_by="alice", params={"lr": 1}),
    "reject": RejectOperation(op_id="op-1", requested_at=T0, requested_by="bob", comment="too big"),
}
MESSAGES = EVENTS + COMMANDS


def _tag(cls: type) -> str:
    return cls.__struct_config__.tag


def _wire(message: msgspec.Struct) -> dict:
    return json.loads(codec.encode(message))


# ---- (a) round trips --------------------------------------------------------------------------

def test_every_event_and_command_has_a_representative_sample():
    assert set(SAMPLES) == {_tag(c) for c in MESSAGES}, "add a sample for each new message type"


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_a_message_round_trips_through_the_codec(tag):
    message = SAMPLES[tag]
    assert codec.decode(codec.encode(message)) == message


@pytest.mark.parametrize("tag", sorted(_tag(c) for c in EVENTS))
def test_an_event_round_trips_through_the_event_decoder(tag):
    assert codec.decode_event(codec.encode(SAMPLES[tag])) == SAMPLES[tag]


@pytest.mark.parametrize("tag", sorted(_tag(c) for c in COMMANDS))
def test_a_command_round_trips_through_the_command_decoder(tag):
    assert codec.decode_command(codec.encode(SAMPLES[tag])) == SAMPLES[tag]


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_a_sample_sets_every_field_so_the_round_trip_covers_it(tag):
    message = SAMPLES[tag]
    info = msgspec.inspect.type_info(type(message))
    missing = sorted(f.encode_name for f in info.fields if f.encode_name not in _wire(message))
    assert not missing, f"the {tag} sample leaves {missing} at their defaults; set them in SAMPLES"


def _unset_fields(struct: msgspec.Struct, path: str) -> list[str]:
    wire = _wire(struct)
    out: list[str] = []
    for f in msgspec.inspect.type_info(type(struct)).fields:
        value = getattr(struct, f.name)
        if f.encode_name not in wire:
            out.append(f"{path}.{f.encode_name}")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, msgspec.Struct):
                out += _unset_fields(item, f"{path}.{f.encode_name}")
    return out


def test_the_full_spec_sets_every_field_at_every_depth():
    assert _unset_fields(FULL_SPEC, "spec") == [], "set these fields in FULL_SPEC"


def test_the_spec_round_trips_on_its_own():
    assert codec.decode_spec(codec.encode(FULL_SPEC)) == FULL_SPEC


def test_an_event_is_not_accepted_where_a_command_is_expected():
    with pytest.raises(msgspec.ValidationError):
        codec.decode_command(codec.encode(SAMPLES["submitted"]))


# ---- (b) tags and wire names ------------------------------------------------------------------

def test_tags_are_unique_across_events_and_commands():
    tags = [_tag(c) for c in MESSAGES]
    assert all(isinstance(tag, str) and tag for tag in tags)
    assert len(tags) == len(set(tags)), f"duplicate tags: {sorted(t for t in tags if tags.count(t) > 1)}"


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_the_tag_is_the_type_field_on_the_wire(tag):
    message = SAMPLES[tag]
    assert _wire(message)["type"] == tag == codec.type_of(message)


@pytest.mark.parametrize("cls", EVENTS, ids=lambda c: _tag(c))
def test_event_type_names_the_tag(cls):
    assert event_type(cls) == _tag(cls)


def _keys(value) -> list[str]:
    """Every object key of a JSON document, except inside free-form maps of user data."""
    free_form = {"params", "inputs", "outputs", "labels", "annotations", "nodeSelector", "limits",
                 "requests", "breakdown", "securityContext", "affinity", "tolerations", "volumes",
                 "volumeMounts"}
    out: list[str] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            out.append(key)
            if key not in free_form:
                out += _keys(sub)
    elif isinstance(value, list):
        for item in value:
            out += _keys(item)
    return out


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_the_wire_uses_camel_case_keys(tag):
    keys = _keys(_wire(SAMPLES[tag]))
    assert "opId" in keys and "op_id" not in keys
    assert [k for k in keys if "_" in k] == []


def test_camel_case_names_of_the_spec_on_the_wire():
    wire = _wire(FULL_SPEC)
    assert {"isApproved", "componentHash", "runKind"} <= set(wire)
    assert {"nodeSelector", "priorityClassName", "serviceAccountName"} <= set(wire["environment"])
    assert {"maxRetries"} <= set(wire["termination"])
    assert {"workingDir", "securityContext", "volumeMounts"} <= set(wire["container"])


# ---- (c) schema snapshots ---------------------------------------------------------------------

REGENERATE = "the wire contract changed: run `python -m proto.schema_snapshots` and commit proto/schemas/"


def test_there_is_a_schema_snapshot_for_every_message_and_the_spec():
    from proto.cluster import CLUSTER_EVENTS
    from proto.config import QueuesConfigured
    from proto.queries import QueuesAnswer, QueuesRequest, WhyAnswer, WhyRequest

    events = EVENTS + CLUSTER_EVENTS + (QueuesConfigured,)
    expected = {f"event.{_tag(c)}.json" for c in events} | {f"command.{_tag(c)}.json" for c in COMMANDS}
    expected |= {"command.set_queues.json"}
    expected |= {f"query.{_tag(c)}.json" for c in (WhyRequest, WhyAnswer, QueuesRequest, QueuesAnswer)}
    assert set(render()) == expected | {"spec.json"}


@pytest.mark.parametrize("name", sorted(render()))
def test_the_checked_in_schema_equals_the_code(name):
    path = SCHEMA_DIR / name
    assert path.exists(), f"{name} is missing; {REGENERATE}"
    assert path.read_text() == render()[name], f"{name} drifted; {REGENERATE}"


def test_no_stale_schema_files_remain():
    stale = sorted(p.name for p in SCHEMA_DIR.glob("*.json") if p.name not in render())
    assert stale == [], f"stale schemas {stale}; {REGENERATE}"


def test_a_schema_snapshot_is_valid_json_naming_the_message():
    doc = json.loads((SCHEMA_DIR / "event.submitted.json").read_text())
    assert "OperationSubmitted" in json.dumps(doc)


# ---- (d) evolution ----------------------------------------------------------------------------

def _with(tag: str, **changes) -> bytes:
    doc = _wire(SAMPLES[tag])
    doc.update(changes)
    return json.dumps(doc).encode()


def _without(tag: str, key: str) -> bytes:
    doc = _wire(SAMPLES[tag])
    del doc[key]
    return json.dumps(doc).encode()


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_an_unknown_extra_field_is_tolerated(tag):
    assert codec.decode(_with(tag, addedInAFutureVersion={"x": 1})) == SAMPLES[tag]


def test_an_unknown_field_inside_the_spec_is_tolerated():
    doc = _wire(SAMPLES["submit"])
    doc["spec"]["container"]["gpuSharing"] = "mig"
    assert codec.decode(json.dumps(doc).encode()) == SAMPLES["submit"]


@pytest.mark.parametrize("tag,key", [
    ("submitted", "opId"), ("submitted", "spec"), ("submitted", "queue"), ("submitted", "at"),
    ("cost_estimated", "estimate"), ("failed", "reason"), ("admitted", "podName"),
    ("submit", "spec"), ("stop", "opId"),
], ids=lambda v: str(v))
def test_a_missing_required_field_fails_validation(tag, key):
    with pytest.raises(msgspec.ValidationError, match=key):
        codec.decode(_without(tag, key))


def test_an_unknown_type_fails_validation():
    with pytest.raises(msgspec.ValidationError):
        codec.decode(_with("stopped", type="exploded"))


def test_malformed_json_fails_with_a_decode_error():
    with pytest.raises(msgspec.DecodeError):
        codec.decode(b"{not json")


# ---- (e) subjects -----------------------------------------------------------------------------

@pytest.mark.parametrize("value,valid", [
    ("op-1", True), ("a", True), ("0abc", True), ("a" * 63, True), ("gpu-a100", True),
    ("", False), ("-op", False), ("Op", False), ("op_1", False), ("op.1", False), ("op*", False),
    ("op>", False), ("op 1", False), ("a" * 64, False),
], ids=lambda v: repr(v))
def test_valid_token(value, valid):
    assert subjects.valid_token(value) is valid


def test_a_token_ending_in_a_dash_is_not_a_dns_label():
    assert subjects.valid_token("op-") is False


def test_subject_builders():
    assert subjects.event("admitted", "op-1") == "ops.admitted.op-1"
    assert subjects.events_of("submitted") == "ops.submitted.>"
    assert subjects.events_for("op-1") == "ops.*.op-1"
    assert subjects.submit("gpu-a") == "cmd.submit.gpu-a"
    assert subjects.submit(None) == "cmd.submit._"
    assert subjects.command("stop") == subjects.CMD_STOP == "cmd.stop"
    assert subjects.dead_letter("admission") == "dlq.admission"


@pytest.mark.parametrize("op_id,kind,attempt,expected", [
    ("op-1", "admitted", 0, "op-1.admitted.0"),
    ("abc", "running", 3, "abc.running.3"),
])
def test_msg_id_is_op_id_type_attempt(op_id, kind, attempt, expected):
    assert subjects.msg_id(op_id, kind, attempt) == expected


def test_msg_id_defaults_to_attempt_zero():
    assert subjects.msg_id("op-1", "submit") == "op-1.submit.0"


def test_every_subject_is_covered_by_exactly_one_stream():
    samples = [subjects.event("running", "x"), subjects.submit("q"), subjects.command("stop"),
               subjects.dead_letter("cost"), subjects.node("gpu.a"), subjects.CONFIG_QUEUES,
               subjects.CMD_SET_QUEUES]
    for subject in samples:
        owners = [s for s, (patterns, _) in subjects.STREAMS.items()
                  if any(subject.startswith(p.rstrip(">")) for p in patterns)]
        assert len(owners) == 1, (subject, owners)


# ---- (e) layering: subject literals and imports -----------------------------------------------

SOURCE_FILES = sorted(p for d in ("proto", "services", "opsched") for p in (ROOT / d).rglob("*.py"))
SUBJECTS_MODULE = ROOT / "proto" / "subjects.py"
SUBJECT_LITERAL = re.compile(r"""["'](ops|cmd|dlq)\.""")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _subject_literal_case(path: Path):
    return pytest.param(path, id=_rel(path))


def test_the_source_tree_is_found():
    assert SUBJECTS_MODULE in SOURCE_FILES and len(SOURCE_FILES) > 20


@pytest.mark.parametrize("path", [_subject_literal_case(p) for p in SOURCE_FILES if p != SUBJECTS_MODULE])
def test_no_module_but_proto_subjects_spells_a_subject(path):
    hits = [f"{_rel(path)}:{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
            if SUBJECT_LITERAL.search(line)]
    assert hits == [], "spell subjects only in proto/subjects.py:\n" + "\n".join(hits)


def test_the_subject_literal_check_would_see_a_subject():
    assert SUBJECT_LITERAL.search('return f"ops.{kind}.{op_id}"')
    assert SUBJECT_LITERAL.search("x = 'cmd.stop'")
    assert not SUBJECT_LITERAL.search('name = "opsched.io/op-id"')


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-local imports too), relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _rel(path).removesuffix(".py").replace("/", ".").split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.add(module)
            out |= {f"{module}.{alias.name}" for alias in node.names}
    return out


def _top(module: str) -> str:
    return module.split(".")[0]


def _service_of(rel: str) -> str | None:
    parts = rel.split("/")
    return parts[1] if parts[0] == "services" and len(parts) > 2 else None


def _allowed(rel: str, prefixes: tuple[str, ...]) -> bool:
    return rel.startswith(prefixes) or rel in prefixes


NATS_ALLOWED = ("services/runtime/",)
KUBERNETES_ALLOWED = ("services/dispatcher/", "opsched/localcluster/", "opsched/demo.py")
IMPORTING_FILES = [pytest.param(p, id=_rel(p)) for p in SOURCE_FILES]


@pytest.mark.parametrize("path", IMPORTING_FILES)
def test_only_the_runtime_imports_nats(path):
    rel = _rel(path)
    used = sorted(m for m in imports_of(path) if _top(m) == "nats")
    assert _allowed(rel, NATS_ALLOWED) or not used, f"{rel} imports {used}; only services/runtime may"


@pytest.mark.parametrize("path", IMPORTING_FILES)
def test_only_the_dispatcher_and_the_local_cluster_import_kubernetes(path):
    rel = _rel(path)
    used = sorted(m for m in imports_of(path) if _top(m) == "kubernetes")
    assert _allowed(rel, KUBERNETES_ALLOWED) or not used, \
        f"{rel} imports {used}; only {', '.join(KUBERNETES_ALLOWED)} may"


@pytest.mark.parametrize("path", [p for p in IMPORTING_FILES if _service_of(_rel(p.values[0]))])
def test_no_service_imports_another_service(path):
    rel = _rel(path)
    own = _service_of(rel)
    foreign = sorted(m for m in imports_of(path)
                     if _top(m) == "services" and len(m.split(".")) > 1
                     and m.split(".")[1] not in (own, "runtime"))
    assert foreign == [], f"{rel} (service {own}) imports {foreign}; services share only proto and runtime"


@pytest.mark.parametrize("path", [p for p in IMPORTING_FILES if _rel(p.values[0]).startswith("proto/")])
def test_the_contract_depends_on_no_service_and_no_client(path):
    used = sorted(m for m in imports_of(path) if _top(m) in ("services", "opsched", "nats", "kubernetes"))
    assert used == [], f"{_rel(path)} imports {used}; proto/ stands alone"


def test_the_import_scanner_sees_real_imports():
    bus = imports_of(ROOT / "services/runtime/bus.py")
    assert {"nats", "nats.js.api", "proto.codec"} <= bus
    assert "kubernetes" in imports_of(ROOT / "services/dispatcher/k8s.py")
    assert "services.admission.state" in imports_of(ROOT / "services/admission/cycle.py")
    # a function-local import is seen too
    assert any(_top(m) == "kubernetes" for m in imports_of(ROOT / "opsched/demo.py"))


def test_the_import_scanner_resolves_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "services" / "cost"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text("from ..admission import state\nfrom . import ledger\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert {"services.admission", "services.admission.state", "services.cost.ledger"} <= imports_of(pkg / "x.py")
