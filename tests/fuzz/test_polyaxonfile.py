"""Generated polyaxonfiles (the shapes of ``examples/`` and the polyaxonfile tests' texts, with generated
scheduling fields, resources and replicas), then mutated, through the edge (``opsched.polyaxonfile``):
property (f), the edge either refuses the file with its ``SpecError`` (the CLI's exit-2 path, every
problem located) or gives specs the contract decodes as themselves, whose pods the dispatcher builds."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from opsched.polyaxonfile import SpecError, SpecWarning, parse_polyaxonfile_batch
from opsched.proto import codec
from opsched.proto.events import OperationAdmitted
from opsched.rules.gpu_accounting import violations
from opsched.rules.podspec import build_pods
from tests.fuzz.mutations import mutated
from tests.fuzz.wire import QUANTITIES, RESOURCES, T0
from tests.unit.polyaxonfile_texts import COMPONENT, OPERATION

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEEDS = [yaml.safe_load(COMPONENT), yaml.safe_load(OPERATION)] + [
    doc for path in sorted(EXAMPLES.glob("*.yaml")) if path.name != "queues.yaml"
    if isinstance(doc := yaml.safe_load(path.read_text()), dict) and "version" in doc]

_names = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
_container = st.fixed_dictionaries({"image": st.just("python:3.11-slim")}, optional={
    "command": st.lists(st.sampled_from(("sh", "-c", "echo {{ globals.uuid }}", "python")), max_size=3),
    "args": st.lists(st.text(max_size=10), max_size=2),
    "env": st.lists(st.fixed_dictionaries({"name": st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True),
                                           "value": st.text(max_size=8)}), max_size=2),
    "resources": st.fixed_dictionaries({}, optional={
        "limits": st.dictionaries(st.sampled_from(RESOURCES), st.sampled_from(QUANTITIES + ("1", "8")), max_size=2),
        "requests": st.dictionaries(st.sampled_from(RESOURCES), st.sampled_from(QUANTITIES), max_size=2)}),
})
_scheduling = {
    "queue": st.sampled_from(("default", "gpu", "agent/gpu")), "priority": st.integers(-10, 10),
    "tags": st.lists(_names, max_size=3), "isApproved": st.booleans(), "cost": st.floats(0, 100),
    "termination": st.fixed_dictionaries({}, optional={"maxRetries": st.integers(0, 5),
                                                       "timeout": st.integers(1, 3600)}),
    "cache": st.fixed_dictionaries({}, optional={"disable": st.booleans(), "ttl": st.integers(1, 3600)}),
    "description": st.text(max_size=20),
}
_job = st.fixed_dictionaries({"kind": st.just("job"), "container": _container})
_pytorchjob = st.fixed_dictionaries({
    "kind": st.just("pytorchjob"),
    "master": st.fixed_dictionaries({"replicas": st.just(1), "container": _container}),
    "worker": st.fixed_dictionaries({"replicas": st.integers(0, 3), "container": _container})})
GENERATED = st.fixed_dictionaries(
    {"version": st.just(1.1), "kind": st.just("component"), "name": _names, "run": _job | _pytorchjob},
    optional=_scheduling)


def polyaxonfiles() -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(SEEDS) | GENERATED


def through_the_edge(text: str) -> None:
    """Property (f): refused with every problem located, or specs the contract and the pod builder take."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SpecWarning)
            specs = parse_polyaxonfile_batch(text, source="fuzz.yaml", salt="fuzz")
    except SpecError as exc:
        assert exc.errors and str(exc).startswith("fuzz.yaml: invalid polyaxonfile")
        return
    assert specs
    for i, spec in enumerate(specs):
        assert codec.decode_spec(codec.encode(spec)) == spec
        if violations(spec):
            continue  # the dispatcher refuses it (forbidden_pod_spec)
        admitted = OperationAdmitted(op_id=f"op-{i}", at=T0, spec=spec, queue="default", namespace="ml",
                                     pod_name=f"op-{i}-0")
        pods = build_pods(admitted)
        assert len(pods) == 1 + sum(g.count for g in spec.replicas)


@settings(max_examples=60)
@given(doc=polyaxonfiles())
def test_a_generated_polyaxonfile_is_refused_or_gives_specs_the_contract_takes(doc):
    through_the_edge(yaml.safe_dump(doc, sort_keys=False))


@settings(max_examples=80)
@given(data=st.data())
def test_a_mutated_polyaxonfile_is_refused_or_gives_specs_the_contract_takes(data):
    doc = data.draw(mutated(data.draw(polyaxonfiles())))
    through_the_edge(yaml.safe_dump(doc, sort_keys=False))


@settings(max_examples=40)
@given(data=st.data())
def test_a_broken_polyaxonfile_text_is_refused(data):
    text = yaml.safe_dump(data.draw(polyaxonfiles()), sort_keys=False)
    cut = data.draw(st.integers(0, len(text)))
    through_the_edge(text[:cut] + data.draw(st.sampled_from(("", ":", "\t", "- [", "{{", "&a *a", "\x00"))))
