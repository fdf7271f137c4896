"""The component hash of a parsed polyaxonfile: what changes it and what does not."""
from __future__ import annotations

import pytest

from opsched.polyaxonfile import component_hash
from tests.unit.polyaxonfile_texts import (
    COMPONENT,
    OPERATION,
    PYTORCHJOB,
    component,
    parse,
    pytorchjob,
)

# --- component hash -----------------------------------------------------------------------------

REORDERED = """
kind: component
run:
  container:
    resources:
      limits: {nvidia.com/gpu: 1}
    command: sh -c "sleep 1"
    image: python:3.11-slim
  kind: job
termination: {maxRetries: 2}
queue: gpu
name: train
tags: [a, b]
"""


def test_the_component_hash_is_16_hex_characters():
    digest = parse(COMPONENT).component_hash
    assert len(digest) == 16 and int(digest, 16) >= 0


def test_the_component_hash_does_not_depend_on_key_order_or_command_spelling():
    assert parse(REORDERED).component_hash == parse(COMPONENT).component_hash


def test_the_component_hash_ignores_scheduling_fields_and_params():
    other = component(**{"name: train": "name: other", "queue: gpu": "queue: cpu"})
    assert parse(other).component_hash == parse(COMPONENT).component_hash
    assert parse(OPERATION, overrides={"params": {"epochs": 1}}).component_hash == \
        parse(OPERATION).component_hash


def test_the_component_hash_changes_when_the_command_changes():
    changed = component(**{'"sleep 1"': '"sleep 2"'})
    assert parse(changed).component_hash != parse(COMPONENT).component_hash


@pytest.mark.parametrize("text", [OPERATION, PYTORCHJOB],
                         ids=["a job's hash can be recomputed from its spec",
                              "a pytorchjob's hash can be recomputed from its spec"])
def test_the_component_hash_can_be_recomputed_from_the_spec(text):
    spec = parse(text)
    assert component_hash(spec.container, spec.environment, spec.replicas,
                          spec.run_kind) == spec.component_hash


def test_a_jobs_component_hash_is_unchanged_by_the_replica_support():
    spec = parse(COMPONENT)
    assert spec.component_hash == "620e03315d6e6d24"  # the value before replicas existed
    assert component_hash(spec.container, spec.environment) == spec.component_hash


@pytest.mark.parametrize("replacements", [
    {'"python train.py"': '"python train.py --fast"'},
    {"replicas: 3": "replicas: 4"},
    {"nvidia.com/gpu: 2": "nvidia.com/gpu: 1"},
], ids=["the pytorchjob hash changes with the worker command",
        "the pytorchjob hash changes with the worker count",
        "the pytorchjob hash changes with the worker resources"])
def test_the_component_hash_covers_the_replica_groups(replacements):
    assert parse(pytorchjob(**replacements)).component_hash != parse(PYTORCHJOB).component_hash


def test_the_component_hash_ignores_priority_class_and_preemptible():
    text = component(**{"queue: gpu": "queue: gpu\npriorityClass: urgent\npreemptible: false"})
    assert parse(text).component_hash == parse(COMPONENT).component_hash


def test_a_master_only_pytorchjob_does_not_hash_like_a_job_with_the_same_container():
    master_only = PYTORCHJOB[:PYTORCHJOB.index("  worker:")]
    spec = parse(master_only)
    assert spec.component_hash != component_hash(spec.container, spec.environment)
