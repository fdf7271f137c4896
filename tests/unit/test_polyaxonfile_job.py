"""The polyaxonfile parser, valid files: a job's container, environment and scheduling fields, how an
operation and overrides win over the component, and the priority class."""
from __future__ import annotations

import textwrap

import pytest

from tests.unit.polyaxonfile_texts import (
    COMPONENT,
    OPERATION,
    component,
    errors_of,
    parse,
)

# --- valid files ------------------------------------------------------------------------------

def test_a_component_file_gives_its_container_and_scheduling_fields():
    spec = parse(COMPONENT)
    assert spec.name == "train" and spec.project == "default" and spec.run_kind == "job"
    assert spec.queue == "gpu" and spec.priority == 0 and spec.tags == ["a", "b"]
    assert spec.container.image == "python:3.11-slim"
    assert spec.container.command == ["sh", "-c", "sleep 1"]
    assert spec.container.resources.limits == {"nvidia.com/gpu": "1"}
    assert spec.termination.max_retries == 2 and spec.termination.timeout is None


def test_an_operation_overrides_its_inline_component_field_by_field():
    spec = parse(OPERATION)
    assert spec.name == "op-name"
    assert spec.queue == "fast"  # agent/queue keeps the queue
    assert spec.priority == 5 and spec.is_approved is False and spec.cost == 2.5
    assert spec.conditions == "{{ params.lr > 0 }}"
    assert spec.tags == ["from-component"]  # the operation sets none
    assert (spec.termination.max_retries, spec.termination.timeout) == (3, 600)
    assert (spec.cache.disable, spec.cache.ttl) == (True, 60)


def test_params_take_the_value_of_a_polyaxon_param_or_a_bare_value():
    spec = parse(OPERATION)
    assert spec.params == {"lr": 0.1, "epochs": 7}


def test_inputs_take_params_then_defaults_and_optional_inputs_default_to_none():
    spec = parse(OPERATION)
    assert spec.inputs == {"lr": 0.1, "epochs": 7, "seed": 42, "note": None}


def test_outputs_with_a_value_are_kept_and_outputs_without_one_are_left_out():
    text = component(**{"run:": "outputs:\n  - {name: acc, type: float}\n"
                                "  - {name: model, type: str, value: s3://m}\nrun:"})
    assert parse(text).outputs == {"model": "s3://m"}


def test_overrides_set_params_queue_priority_and_project_over_the_file():
    spec = parse(OPERATION, overrides={"params": {"epochs": 9, "lr": {"value": 0.5}},
                                       "queue": "other/urgent", "priority": 99, "project": "p1"})
    assert spec.params == {"lr": 0.5, "epochs": 9}
    assert spec.inputs["epochs"] == 9 and spec.inputs["lr"] == 0.5
    assert (spec.queue, spec.priority, spec.project) == ("urgent", 99, "p1")


@pytest.mark.parametrize("version", ["1", "1.0", "1.1", "'1.1'", '"1"'],
                         ids=lambda v: f"version {v} is accepted")
def test_supported_versions_parse(version):
    assert parse(component(**{"version: 1.1": f"version: {version}"})).name == "train"


def test_a_file_without_a_version_parses():
    assert parse(component(**{"version: 1.1\n": ""})).name == "train"


def test_keys_that_would_change_what_runs_are_refused_not_ignored():
    text = component(**{"name: train": "name: train\ndescription: d\nisPreset: false\n"
                                       "contexts: []\nhubRef: x\npathRef: y"})
    errors = errors_of(text)
    assert set(errors) == {"isPreset", "contexts", "hubRef", "pathRef"}
    assert "belongs to an operation or to a hook" in errors["hubRef"].msg


def test_a_schedule_on_a_plain_submit_is_refused_pointing_to_opsched_schedule():
    text = component(**{"name: train": "name: train\nschedule: {kind: cron, cron: '0 * * * *'}"})
    assert "opsched schedule FILE" in errors_of(text)["schedule"].msg


def test_a_command_string_is_split_and_an_args_string_is_one_argument():
    text = component(**{'command: ["sh", "-c", "sleep 1"]':
                        'command: sh -c\n    args: "echo a b; sleep 1"'})
    spec = parse(text)
    assert spec.container.command == ["sh", "-c"]
    assert spec.container.args == ["echo a b; sleep 1"]


def test_numbers_in_quantities_labels_and_env_become_strings():
    text = component(**{"limits: {nvidia.com/gpu: 1}":
                        "limits: {nvidia.com/gpu: 2, cpu: 0.5}\n    env: [{name: N, value: 3}]"})
    spec = parse(text)
    assert spec.container.resources.limits == {"nvidia.com/gpu": "2", "cpu": "0.5"}
    assert spec.container.env[0].value == "3"


def test_environment_fields_and_run_volumes_reach_the_spec():
    text = component(**{"  container:": textwrap.indent(textwrap.dedent("""\
        volumes: [{name: data, emptyDir: {}}]
        environment:
          nodeSelector: {nvidia.com/gpu.product: A100}
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
          priorityClassName: high
          serviceAccountName: trainer
          annotations: {a: b}
        container:"""), "  ")})
    env = parse(text).environment
    assert env.node_selector == {"nvidia.com/gpu.product": "A100"}
    assert env.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                "effect": "NoSchedule"}]
    assert (env.priority_class_name, env.service_account_name) == ("high", "trainer")
    assert env.volumes == [{"name": "data", "emptyDir": {}}]


def test_a_file_without_a_name_is_named_after_its_file():
    text = component(**{"name: train\n": ""})
    assert parse(text, source="/tmp/my-job.yaml").name == "my-job"
    assert parse(text).name == "operation"


# --- priority class and preemption -----------------------------------------------------------

def test_priority_class_and_preemptible_default_to_none():
    spec = parse(COMPONENT)  # unset: admission decides, by the op's queue (preemptible unless a service's says not)
    assert spec.priority_class is None and spec.preemptible is None


def test_a_component_sets_its_priority_class_and_preemptible():
    spec = parse(component(**{"queue: gpu": "queue: gpu\npriorityClass: urgent\npreemptible: false"}))
    assert spec.priority_class == "urgent" and spec.preemptible is False


def test_the_operations_priority_class_and_preemptible_win_over_the_components():
    text = OPERATION.replace("  priority: 1\n", "  priority: 1\n  priorityClass: low\n"
                                                 "  preemptible: false\n")
    text = text.replace("priority: 5\n", "priority: 5\npriorityClass: urgent\npreemptible: true\n")
    spec = parse(text)
    assert spec.priority_class == "urgent" and spec.preemptible is True


def test_the_components_priority_class_applies_when_the_operation_sets_none():
    text = OPERATION.replace("  priority: 1\n", "  priority: 1\n  priorityClass: low\n"
                                                 "  preemptible: false\n")
    spec = parse(text)
    assert spec.priority_class == "low" and spec.preemptible is False


def test_overrides_set_priority_class_and_preemptible_over_the_file():
    text = component(**{"queue: gpu": "queue: gpu\npriorityClass: low\npreemptible: true"})
    spec = parse(text, overrides={"priority_class": "urgent", "preemptible": False})
    assert spec.priority_class == "urgent" and spec.preemptible is False


def test_the_priority_class_is_not_the_pods_priority_class_name():
    text = component(**{"  container:": "  environment: {priorityClassName: k8s-high}\n"
                                        "  container:"})
    spec = parse(text)
    assert spec.priority_class is None and spec.environment.priority_class_name == "k8s-high"
