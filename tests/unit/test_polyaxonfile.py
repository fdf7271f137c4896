"""The polyaxonfile parser: Polyaxon YAML in, a validated OpSpec (or precise errors) out."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from opsched.polyaxonfile import (
    FieldError, SpecError, SpecWarning, component_hash, load_polyaxonfile, parse_polyaxonfile,
)
from proto.spec import OpSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

COMPONENT = """
version: 1.1
kind: component
name: train
tags: [a, b]
queue: gpu
termination: {maxRetries: 2}
run:
  kind: job
  container:
    image: python:3.11-slim
    command: ["sh", "-c", "sleep 1"]
    resources:
      limits: {nvidia.com/gpu: 1}
"""

OPERATION = """
version: 1.1
kind: operation
name: op-name
queue: agent-1/fast
priority: 5
isApproved: false
cost: 2.5
conditions: "{{ params.lr > 0 }}"
params:
  lr: {value: 0.1}
  epochs: 7
termination: {timeout: 600}
cache: {ttl: 60}
component:
  name: comp-name
  queue: slow
  priority: 1
  tags: [from-component]
  termination: {maxRetries: 3, timeout: 30}
  cache: {disable: true}
  inputs:
    - {name: lr, type: float, value: 0.01}
    - {name: epochs, type: int}
    - {name: seed, type: int, value: 42}
    - {name: note, type: str, isOptional: true}
  run:
    kind: job
    container:
      image: python:3.11-slim
      command: sh -c "echo hi; sleep 2"
"""


PYTORCHJOB = """
version: 1.1
kind: component
name: ddp
run:
  kind: pytorchjob
  cleanPodPolicy: All
  master:
    replicas: 1
    container:
      image: trainer:1
      command: sh -c "python train.py --rank 0"
      resources:
        limits: {nvidia.com/gpu: 1}
  worker:
    replicas: 3
    container:
      image: trainer:1
      command: sh -c "python train.py"
      env: [{name: ROLE, value: worker}]
      resources:
        limits: {nvidia.com/gpu: 2}
"""


def parse(text: str, **kwargs) -> OpSpec:
    return parse_polyaxonfile(textwrap.dedent(text), **kwargs)


def errors_of(text: str, **kwargs) -> dict[str, FieldError]:
    with pytest.raises(SpecError) as info:
        parse(text, **kwargs)
    return {err.loc: err for err in info.value.errors}


def replaced(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def component(**replacements: str) -> str:
    """COMPONENT with some lines replaced (old line text → new text)."""
    return replaced(COMPONENT, replacements)


def pytorchjob(**replacements: str) -> str:
    """PYTORCHJOB with some lines replaced (old line text → new text)."""
    return replaced(PYTORCHJOB, replacements)


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


def test_keys_polyaxon_allows_but_opsched_ignores_are_accepted():
    text = component(**{"name: train": "name: train\ndescription: d\nisPreset: false\n"
                                       "contexts: []\nhubRef: x\npathRef: y"})
    assert parse(text).name == "train"


def test_ignored_keys_that_change_what_runs_raise_a_warning():
    text = component(**{"name: train": "name: train\nschedule: {kind: cron, cron: '0 * * * *'}"})
    with pytest.warns(SpecWarning, match="schedule"):
        parse(text)


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

def test_priority_class_and_preemptible_default_to_none_and_true():
    spec = parse(COMPONENT)
    assert spec.priority_class is None and spec.preemptible is True


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


# --- invalid files ------------------------------------------------------------------------------

INVALID = [
    ("a negative maxRetries is rejected", component(**{"maxRetries: 2": "maxRetries: -1"}),
     "termination.maxRetries"),
    ("a zero timeout is rejected", component(**{"maxRetries: 2": "timeout: 0"}),
     "termination.timeout"),
    ("a negative termination ttl is rejected", component(**{"maxRetries: 2": "ttl: -5"}),
     "termination.ttl"),
    ("a quantity that is not a number is rejected",
     component(**{"nvidia.com/gpu: 1": "nvidia.com/gpu: two"}),
     "run.container.resources.limits.nvidia.com/gpu"),
    ("a fractional GPU count is rejected",
     component(**{"nvidia.com/gpu: 1": "nvidia.com/gpu: 0.5"}),
     "run.container.resources.limits.nvidia.com/gpu"),
    ("a GPU request without a limit is rejected",
     component(**{"limits: {nvidia.com/gpu: 1}": "requests: {nvidia.com/gpu: 1}"}),
     "run.container.resources.requests.nvidia.com/gpu"),
    ("a memory request above its limit is rejected",
     component(**{"limits: {nvidia.com/gpu: 1}": "limits: {memory: 1Gi}\n      "
                                                 "requests: {memory: 2Gi}"}),
     "run.container.resources.requests.memory"),
    ("a container without an image is rejected",
     component(**{"image: python:3.11-slim": "name: main"}), "run.container.image"),
    ("an unknown top-level field is rejected", component(**{"name: train": "name: train\nfoo: 1"}),
     "foo"),
    ("an unknown container field is rejected",
     component(**{"image: python:3.11-slim": "imag: python:3.11-slim\n    image: x"}),
     "run.container.imag"),
    ("a run kind other than job is rejected", component(**{"kind: job": "kind: service"}),
     "run.kind"),
    ("a queue name with capitals is rejected", component(**{"queue: gpu": "queue: GPU_Queue"}),
     "queue"),
    ("a queue with two slashes is rejected", component(**{"queue: gpu": "queue: a/b/c"}), "queue"),
    ("a negative cost is rejected", component(**{"name: train": "name: train\ncost: -1"}), "cost"),
    ("a boolean priority is rejected", component(**{"name: train": "name: train\npriority: true"}),
     "priority"),
    ("an unsupported version is rejected", component(**{"version: 1.1": "version: 2"}),
     "version"),
    ("a Polyaxon init section is rejected as not supported yet",
     component(**{"  container:": "  init: []\n  container:"}), "run.init"),
    ("a missing kind is rejected", component(**{"kind: component\n": ""}), "kind"),
    ("a required input without a param is rejected", OPERATION.replace("  epochs: 7\n", ""),
     "component.inputs.1"),
    ("a param that is not an input is rejected",
     OPERATION.replace("  epochs: 7", "  epochs: 7\n  epoch: 8"), "params.epoch"),
    ("a param of the wrong type is rejected", OPERATION.replace("epochs: 7", "epochs: many"),
     "params.epochs"),
    ("a param that references another run is rejected",
     OPERATION.replace("lr: {value: 0.1}", "lr: {ref: ops.upstream, value: outputs.lr}"),
     "params.lr"),
    ("an operation's component errors are under component",
     OPERATION.replace("image: python:3.11-slim", "imageX: python:3.11-slim"),
     "component.run.container.image"),
    ("an operation without an inline component is rejected",
     "kind: operation\nhubRef: acme/train:v1\n", "component"),
    ("a priorityClass that is not a DNS label is rejected",
     component(**{"queue: gpu": "queue: gpu\npriorityClass: Urgent_1"}), "priorityClass"),
    ("a preemptible that is not a boolean is rejected",
     component(**{"queue: gpu": "queue: gpu\npreemptible: sometimes"}), "preemptible"),
    ("an operation's invalid priorityClass is rejected at the top level",
     OPERATION.replace("priority: 5\n", "priority: 5\npriorityClass: -bad\n"), "priorityClass"),
    ("a worker container without an image is rejected",
     pytorchjob(**{"image: trainer:1\n      command: sh -c \"python train.py\"":
                   "command: sh -c \"python train.py\""}), "run.worker.container.image"),
    ("a master container without an image is rejected",
     pytorchjob(**{"image: trainer:1\n      command: sh -c \"python train.py --rank 0\"":
                   "command: sh -c \"python train.py --rank 0\""}), "run.master.container.image"),
    ("a fractional worker GPU count is rejected",
     pytorchjob(**{"nvidia.com/gpu: 2": "nvidia.com/gpu: 1.5"}),
     "run.worker.container.resources.limits.nvidia.com/gpu"),
    ("a worker GPU quantity that is not a number is rejected",
     pytorchjob(**{"nvidia.com/gpu: 2": "nvidia.com/gpu: two"}),
     "run.worker.container.resources.limits.nvidia.com/gpu"),
    ("a worker GPU request that differs from its limit is rejected",
     pytorchjob(**{"limits: {nvidia.com/gpu: 2}": "limits: {nvidia.com/gpu: 2}\n"
                                                  "        requests: {nvidia.com/gpu: 1}"}),
     "run.worker.container.resources.requests.nvidia.com/gpu"),
    ("a master GPU request without a limit is rejected",
     pytorchjob(**{"limits: {nvidia.com/gpu: 1}": "requests: {nvidia.com/gpu: 1}"}),
     "run.master.container.resources.requests.nvidia.com/gpu"),
    ("an unknown worker container field is rejected",
     pytorchjob(**{"env: [{name: ROLE, value: worker}]": "envs: []"}), "run.worker.container.envs"),
    ("a worker section without a container is rejected",
     PYTORCHJOB[:PYTORCHJOB.index("    container:", PYTORCHJOB.index("  worker:"))],
     "run.worker.container"),
    ("a pytorchjob without a master is rejected",
     pytorchjob(**{"  master:": "  masterx:"}), "run.master"),
    ("a pytorchjob's init section is rejected as not supported yet",
     pytorchjob(**{"    replicas: 3": "    replicas: 3\n    init: []"}), "run.worker.init"),
    ("a pytorchjob's elasticPolicy is rejected as not supported yet",
     pytorchjob(**{"cleanPodPolicy: All": "elasticPolicy: {minReplicas: 1}"}), "run.elasticPolicy"),
    ("a boolean worker replica count is rejected",
     pytorchjob(**{"replicas: 3": "replicas: true"}), "run.worker.replicas"),
    ("a tfjob is rejected as not supported yet", pytorchjob(**{"kind: pytorchjob": "kind: tfjob"}),
     "run.kind"),
]


@pytest.mark.parametrize("text, loc", [(t, loc) for _, t, loc in INVALID],
                         ids=[sentence for sentence, _, _ in INVALID])
def test_invalid_files_give_an_error_at_the_right_path(text, loc):
    errors = errors_of(text)
    assert loc in errors, errors


@pytest.mark.parametrize("kind", ["service", "tfjob", "mpijob"],
                         ids=lambda k: f"run kind {k} says only job and pytorchjob are supported")
def test_other_run_kinds_say_only_job_and_pytorchjob_are_supported(kind):
    err = errors_of(component(**{"kind: job": f"kind: {kind}"}))["run.kind"]
    assert err.msg == f"run.kind '{kind}' is not supported yet; only 'job' and 'pytorchjob'"


def test_an_unknown_run_kind_is_called_unknown():
    err = errors_of(component(**{"kind: job": "kind: magic"}))["run.kind"]
    assert err.msg == "run.kind 'magic' is unknown; only 'job' and 'pytorchjob'"


def test_a_master_with_more_than_one_replica_is_rejected_at_master_replicas():
    err = errors_of(pytorchjob(**{"replicas: 1": "replicas: 2"}))["run.master.replicas"]
    assert err.msg == "master.replicas must be 1, got 2 (set worker.replicas for more pods)"
    assert err.line == 9


@pytest.mark.parametrize("count", [0, -1], ids=["zero workers are rejected",
                                                "a negative worker count is rejected"])
def test_a_worker_replica_count_below_one_is_rejected_with_a_clear_message(count):
    err = errors_of(pytorchjob(**{"replicas: 3": f"replicas: {count}"}))["run.worker.replicas"]
    assert err.msg == (f"worker.replicas must be at least 1, got {count} "
                       "(leave the worker section out for a master-only job)")
    assert err.line == 16


@pytest.mark.parametrize("section, line", [("master", 9), ("worker", 16)],
                         ids=["a master environment is rejected",
                              "a worker environment is rejected"])
def test_a_per_replica_environment_is_rejected_as_not_supported_yet(section, line):
    text = pytorchjob(**{f"  {section}:\n": f"  {section}:\n    environment: "
                                             "{nodeSelector: {a: b}}\n"})
    err = errors_of(text)[f"run.{section}.environment"]
    assert err.msg.startswith("per-replica environment is not supported yet")
    assert err.line == line


def test_per_replica_volumes_are_rejected_as_not_supported_yet():
    text = pytorchjob(**{"  worker:\n": "  worker:\n    volumes: [{name: d, emptyDir: {}}]\n"})
    assert errors_of(text)["run.worker.volumes"].msg.startswith(
        "per-replica volumes are not supported yet")


def test_a_run_level_environment_on_a_pytorchjob_is_rejected_with_the_reason():
    text = pytorchjob(**{"cleanPodPolicy: All": "environment: {nodeSelector: {a: b}}"})
    err = errors_of(text)["run.environment"]
    assert "no run-level environment in Polyaxon" in err.msg
    assert "per-replica environment is not supported yet" in err.msg


def test_a_replica_error_inside_an_operation_is_located_under_component():
    body = textwrap.indent(textwrap.dedent(PYTORCHJOB).split("\n", 2)[2], "  ")
    text = "kind: operation\ncomponent:\n" + body.replace("replicas: 3", "replicas: 0")
    assert "component.run.worker.replicas" in errors_of(text)


def test_the_invalid_worker_gpu_error_carries_its_line():
    err = errors_of(pytorchjob(**{"nvidia.com/gpu: 2": "nvidia.com/gpu: 0.5"}))[
        "run.worker.container.resources.limits.nvidia.com/gpu"]
    assert err.line == 22


def test_errors_carry_the_line_of_the_offending_key():
    err = errors_of(component(**{"maxRetries: 2": "maxRetries: -1"}))["termination.maxRetries"]
    assert err.line == 7


@pytest.mark.parametrize("overrides, loc", [
    ({"queue": "Not A Token"}, "overrides.queue"),
    ({"priority": "high"}, "overrides.priority"),
    ({"nodes": 3}, "overrides.nodes"),
    ({"priority_class": "Not_A_Label"}, "overrides.priority_class"),
    ({"preemptible": "perhaps"}, "overrides.preemptible"),
    ({"priorityClass": "urgent"}, "overrides.priorityClass"),
], ids=["an invalid override queue is rejected", "a non-integer override priority is rejected",
        "an unknown override key is rejected", "an invalid override priority class is rejected",
        "a non-boolean override preemptible is rejected",
        "a camelCase override key is rejected (overrides use Python names)"])
def test_invalid_overrides_are_reported_under_overrides(overrides, loc):
    assert loc in errors_of(COMPONENT, overrides=overrides)


def test_a_yaml_syntax_error_reports_its_line_and_column():
    err = errors_of("kind: component\nrun:\n  kind: job\n  container: [image\n")[""]
    assert err.line == 5 and "line 5" in err.msg and "YAML syntax error" in err.msg


def test_a_duplicate_key_is_a_yaml_error_with_its_line():
    err = errors_of("kind: component\nname: a\nname: b\n")[""]
    assert err.line == 3 and "duplicate key 'name'" in err.msg


@pytest.mark.parametrize("text", ["- kind: component\n", "just a string\n", "", "# nothing\n"],
                         ids=["a list document is rejected", "a scalar document is rejected",
                              "an empty document is rejected",
                              "a comment-only document is rejected"])
def test_a_document_that_is_not_a_mapping_is_rejected(text):
    assert "must be a mapping" in errors_of(text)[""].msg


def test_the_error_message_starts_with_the_source_and_lists_every_error():
    text = component(**{"maxRetries: 2": "maxRetries: -1", "queue: gpu": "queue: BAD"})
    with pytest.raises(SpecError) as info:
        parse(text, source="jobs/train.yaml")
    message = str(info.value)
    assert message.startswith("jobs/train.yaml: invalid polyaxonfile (2 errors)")
    assert "termination.maxRetries (line 7)" in message and "queue (line 6)" in message


def test_a_missing_file_is_a_spec_error_naming_the_file(tmp_path):
    with pytest.raises(SpecError, match="nope.yaml"):
        load_polyaxonfile(tmp_path / "nope.yaml")


# --- examples -----------------------------------------------------------------------------------

NOT_POLYAXONFILES = {"invalid.yaml", "queues.yaml"}  # queues.yaml is the admission queue config
VALID_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name not in NOT_POLYAXONFILES)


@pytest.mark.parametrize("path", VALID_EXAMPLES,
                         ids=[f"example {p.name} parses" for p in VALID_EXAMPLES])
def test_every_example_except_invalid_parses(path):
    spec = load_polyaxonfile(path)
    assert spec.component_hash and spec.container.image


def test_the_examples_cover_the_documented_cases():
    names = {p.name for p in VALID_EXAMPLES}
    assert {"train-1gpu.yaml", "train-2gpu.yaml", "eval-fails.yaml",
            "cpu-preprocess.yaml"} <= names
    two = load_polyaxonfile(EXAMPLES / "train-2gpu.yaml")
    assert two.container.resources.limits["nvidia.com/gpu"] == "2"
    assert two.termination.timeout == 600
    assert "nvidia.com/gpu" not in load_polyaxonfile(EXAMPLES / "cpu-preprocess.yaml") \
        .container.resources.limits


def test_the_ddp_example_is_a_master_and_two_workers_with_one_gpu_each():
    spec = load_polyaxonfile(EXAMPLES / "ddp-3x1gpu.yaml")
    assert spec.run_kind == "pytorchjob" and spec.priority_class is None and spec.preemptible
    assert spec.container.resources.limits == {"nvidia.com/gpu": "1"}
    assert spec.container.command == ["sh", "-c", "echo ddp; sleep 3"]
    [group] = spec.replicas
    assert (group.name, group.count) == ("worker", 2)
    assert group.container.resources.limits == {"nvidia.com/gpu": "1"}
    assert group.container.command == ["sh", "-c", "echo ddp; sleep 3"]


def test_the_urgent_example_is_a_non_preemptible_one_gpu_job_in_the_urgent_class():
    spec = load_polyaxonfile(EXAMPLES / "urgent-1gpu.yaml")
    assert spec.run_kind == "job" and spec.replicas == []
    assert spec.priority_class == "urgent" and spec.preemptible is False
    assert spec.container.resources.limits == {"nvidia.com/gpu": "1"}
    assert spec.container.command == ["sh", "-c", "echo urgent; sleep 2"]


def test_the_invalid_example_fails_with_its_documented_errors():
    with pytest.raises(SpecError) as info:
        load_polyaxonfile(EXAMPLES / "invalid.yaml")
    locs = {err.loc for err in info.value.errors}
    assert {"termination.maxRetries", "run.container.resources.limits.nvidia.com/gpu"} <= locs
    assert str(info.value).startswith(str(EXAMPLES / "invalid.yaml"))


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
