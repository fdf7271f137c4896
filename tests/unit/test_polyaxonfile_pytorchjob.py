"""The polyaxonfile parser, pytorchjob: the master and worker sections, and the replica rules."""
from __future__ import annotations

import textwrap

import pytest

from tests.unit.polyaxonfile_texts import (
    COMPONENT,
    PYTORCHJOB,
    component,
    errors_of,
    parse,
    pytorchjob,
)

# --- pytorchjob ---------------------------------------------------------------------------------

def test_a_pytorchjob_master_container_becomes_the_main_container():
    spec = parse(PYTORCHJOB)
    assert spec.run_kind == "pytorchjob"
    assert spec.container.image == "trainer:1"
    assert spec.container.command == ["sh", "-c", "python train.py --rank 0"]
    assert spec.container.resources.limits == {"nvidia.com/gpu": "1"}


def test_a_pytorchjob_worker_section_becomes_one_replica_group():
    [group] = parse(PYTORCHJOB).replicas
    assert (group.name, group.count) == ("worker", 3)
    assert group.container.command == ["sh", "-c", "python train.py"]
    assert group.container.env[0].value == "worker"
    assert group.container.resources.limits == {"nvidia.com/gpu": "2"}


def test_a_pytorchjob_without_master_replicas_or_worker_replicas_defaults_both_to_one():
    spec = parse(pytorchjob(**{"    replicas: 1\n": "", "    replicas: 3\n": ""}))
    assert [(g.name, g.count) for g in spec.replicas] == [("worker", 1)]


def test_a_pytorchjob_with_only_a_master_has_no_replica_groups():
    text = PYTORCHJOB[:PYTORCHJOB.index("  worker:")]
    spec = parse(text)
    assert spec.replicas == [] and spec.container.image == "trainer:1"


def test_a_job_has_no_replica_groups():
    assert parse(COMPONENT).replicas == []


def test_a_pytorchjob_inside_an_operation_takes_the_operations_scheduling_fields():
    body = textwrap.indent(textwrap.dedent(PYTORCHJOB).split("\n", 2)[2], "  ")
    text = "kind: operation\nname: op\nqueue: fast\npriorityClass: urgent\ncomponent:\n" + body
    spec = parse(text)
    assert (spec.name, spec.queue, spec.priority_class) == ("op", "fast", "urgent")
    assert spec.run_kind == "pytorchjob" and spec.replicas[0].count == 3


def test_a_pytorchjob_gets_the_default_environment():
    assert parse(PYTORCHJOB).environment == parse(
        component(**{"queue: gpu\n": ""})).environment


# --- pytorchjob replica rules ------------------------------------------------------------------

def test_a_master_with_more_than_one_replica_is_rejected_at_master_replicas():
    err = errors_of(pytorchjob(**{"replicas: 1": "replicas: 2"}))["run.master.replicas"]
    assert err.msg == "master.replicas must be 1, got 2 (set worker.replicas for more pods)"
    assert err.line == 9


@pytest.mark.parametrize("count", [0, -1], ids=["zero workers are rejected",
                                                "a negative worker count is rejected"])
def test_a_worker_replica_count_below_one_is_rejected_with_a_clear_message(count):
    err = errors_of(pytorchjob(**{"replicas: 3": f"replicas: {count}"}))["run.worker.replicas"]
    assert err.msg == (f"worker.replicas must be at least 1, got {count} "
                       "(leave the worker section out for none)")
    assert err.line == 16


@pytest.mark.parametrize("section, line", [("master", 9), ("worker", 16)],
                         ids=["a master environment is rejected",
                              "a worker environment is rejected"])
def test_a_per_replica_environment_other_than_its_restart_policy_is_rejected_as_not_supported_yet(section, line):
    text = pytorchjob(**{f"  {section}:\n": f"  {section}:\n    environment: "
                                             "{nodeSelector: {a: b}}\n"})
    err = errors_of(text)[f"run.{section}.environment.nodeSelector"]
    assert err.msg.startswith("per-replica environment.nodeSelector is not supported yet (only restartPolicy)")
    assert err.line == line


def test_per_replica_volumes_are_rejected_as_not_supported_yet():
    text = pytorchjob(**{"  worker:\n": "  worker:\n    volumes: [{name: d, emptyDir: {}}]\n"})
    assert errors_of(text)["run.worker.volumes"].msg.startswith(
        "per-replica volumes are not supported yet")


def test_a_run_level_environment_on_a_pytorchjob_is_rejected_with_the_reason():
    text = pytorchjob(**{"cleanPodPolicy: All": "environment: {nodeSelector: {a: b}}"})
    err = errors_of(text)["run.environment"]
    assert "no run-level environment in Polyaxon" in err.msg
    assert "opsched honours only a replica's environment.restartPolicy" in err.msg


def test_a_replica_error_inside_an_operation_is_located_under_component():
    body = textwrap.indent(textwrap.dedent(PYTORCHJOB).split("\n", 2)[2], "  ")
    text = "kind: operation\ncomponent:\n" + body.replace("replicas: 3", "replicas: 0")
    assert "component.run.worker.replicas" in errors_of(text)


def test_the_invalid_worker_gpu_error_carries_its_line():
    err = errors_of(pytorchjob(**{"nvidia.com/gpu: 2": "nvidia.com/gpu: 0.5"}))[
        "run.worker.container.resources.limits.nvidia.com/gpu"]
    assert err.line == 22
