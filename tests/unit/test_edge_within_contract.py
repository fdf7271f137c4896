"""Whatever the polyaxonfile edge accepts, the contract accepts: every example and every test text, converted
and then decoded as the services decode it; and what the contract refuses, the edge refuses with its path."""
from __future__ import annotations

import pytest

from opsched.polyaxonfile import load_polyaxonfile_batch
from tests.unit import polyaxonfile_texts as texts
from tests.unit.polyaxonfile_texts import EXAMPLES, component, errors_of, parse, pytorchjob, within_contract

NOT_POLYAXONFILES = {"invalid.yaml", "queues.yaml", "queues-agents.yaml", "queues-autoscale.yaml"}
FILES = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name not in NOT_POLYAXONFILES)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_example_the_edge_accepts_the_contract_accepts(path):
    for spec in load_polyaxonfile_batch(path):
        assert within_contract(spec) == spec


@pytest.mark.parametrize("name", ["COMPONENT", "OPERATION", "PYTORCHJOB"])
def test_every_test_text_the_edge_accepts_the_contract_accepts(name):
    spec = parse(getattr(texts, name))  # parse itself decodes the spec as the services do
    assert within_contract(spec) == spec


@pytest.mark.parametrize("text, loc, says", [
    (pytorchjob(**{"replicas: 3": "replicas: 3000000"}), "run.worker.replicas", "above the limit of 1000 pods"),
    (component(**{"limits: {nvidia.com/gpu: 1}": "limits: {nvidia.com/gpu: 0.5}"}),
     "run.container.resources.limits.nvidia.com/gpu", "not a whole number of devices"),
    (component(**{"limits: {nvidia.com/gpu: 1}": "limits: {nvidia.com/gpu: '1e400'}"}),
     "run.container.resources.limits.nvidia.com/gpu", "above the limit"),
    (component(**{"limits: {nvidia.com/gpu: 1}": "limits: {cpu: '-5'}"}),
     "run.container.resources.limits.cpu", "negative"),
    (component(**{"name: train": "name: t" + "r" * 63}), "name", "at most 63"),
    (component(**{"  kind: job": "  kind: job\n  environment: {labels: {team: 'a b'}}"}),
     "run.environment.labels.team", "value 'a b'"),
    (component(**{"  kind: job": "  kind: job\n  environment: {annotations: {'a b': x}}"}),
     "run.environment.annotations.a b", "key 'a b'"),
    (component(**{"termination: {maxRetries: 2}": "termination: {maxRetries: 1000}"}),
     "termination.maxRetries", "100"),
    (component(**{"termination: {maxRetries: 2}": "termination: {timeout: 100000000}"}),
     "termination.timeout", "31622400"),
    (component(**{"queue: gpu": "priority: 9223372036854775807"}), "priority", "1000000000"),
    (component(**{"queue: gpu": "cost: 1e13"}), "cost", "1000000000000"),
], ids=["replicas", "half a gpu", "1e400 gpus", "negative cpu", "long name", "label value", "annotation key",
        "retries", "timeout", "priority", "cost"])
def test_the_edge_refuses_out_of_bounds_values_with_their_path(text, loc, says):
    errors = errors_of(text)
    assert loc in errors and says in errors[loc].msg, errors
