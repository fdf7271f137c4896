"""The polyaxonfile parser, invalid files: precise errors at the right path and line."""
from __future__ import annotations

import pytest

from opsched.polyaxonfile import SpecError, load_polyaxonfile
from tests.unit.polyaxonfile_texts import (
    COMPONENT,
    OPERATION,
    PYTORCHJOB,
    component,
    errors_of,
    parse,
    pytorchjob,
)

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
    ("a run kind opsched does not run yet is rejected", component(**{"kind: job": "kind: dag"}),
     "run.kind"),
    ("a queue name with capitals is rejected", component(**{"queue: gpu": "queue: GPU_Queue"}),
     "queue"),
    ("a queue with two slashes is rejected", component(**{"queue: gpu": "queue: a/b/c"}), "queue"),
    ("a negative cost is rejected", component(**{"name: train": "name: train\ncost: -1"}), "cost"),
    ("a boolean priority is rejected", component(**{"name: train": "name: train\npriority: true"}),
     "priority"),
    ("an unsupported version is rejected", component(**{"version: 1.1": "version: 2"}),
     "version"),
    ("an init step that reads an artifacts store is rejected at its key",
     component(**{"  container:": "  init: [{artifacts: {dirs: [data]}}]\n  container:"}), "run.init.0.artifacts"),
    ("an init step with two kinds is rejected at the step",
     component(**{"  container:": "  init: [{git: {url: 'https://h/r.git'}, file: {content: x}}]\n  container:"}),
     "run.init.0"),
    ("a sidecar named like the main container is rejected at its place",
     component(**{"  container:": "  sidecars: [{image: x, name: main}]\n  container:"}), "run.sidecars.0"),
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
    ("an operation without a component is rejected",
     "kind: operation\nname: x\n", "component"),
    ("an operation whose hubRef has no library to read from is rejected at the hubRef",
     "kind: operation\nhubRef: acme/train:v1\n", "hubRef"),
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
    ("a pytorchjob worker's dockerfile init step is rejected at its key",
     pytorchjob(**{"    replicas: 3": "    replicas: 3\n    init: [{dockerfile: {image: x}}]"}),
     "run.worker.init.0.dockerfile"),
    ("a pytorchjob's run-level sidecars are rejected (they are per replica)",
     pytorchjob(**{"cleanPodPolicy: All": "sidecars: [{image: x}]"}), "run.sidecars"),
    ("a pytorchjob's elasticPolicy is rejected as not supported yet",
     pytorchjob(**{"cleanPodPolicy: All": "elasticPolicy: {minReplicas: 1}"}), "run.elasticPolicy"),
    ("a boolean worker replica count is rejected",
     pytorchjob(**{"replicas: 3": "replicas: true"}), "run.worker.replicas"),
    ("a dag is rejected as not supported yet", pytorchjob(**{"kind: pytorchjob": "kind: dag"}),
     "run.kind"),
]


@pytest.mark.parametrize("text, loc", [(t, loc) for _, t, loc in INVALID],
                         ids=[sentence for sentence, _, _ in INVALID])
def test_invalid_files_give_an_error_at_the_right_path(text, loc):
    errors = errors_of(text)
    assert loc in errors, errors


SUPPORTED = "only 'job', 'pytorchjob', 'tfjob', 'mpijob', 'xgbjob', 'paddlejob', 'mxjob' and 'service'"


@pytest.mark.parametrize("kind", ["dag", "rayjob"],
                         ids=lambda k: f"run kind {k} says which kinds are supported")
def test_other_run_kinds_say_which_kinds_are_supported(kind):
    err = errors_of(component(**{"kind: job": f"kind: {kind}"}))["run.kind"]
    assert err.msg == f"run.kind '{kind}' is not supported yet; {SUPPORTED}"


def test_an_unknown_run_kind_is_called_unknown():
    err = errors_of(component(**{"kind: job": "kind: magic"}))["run.kind"]
    assert err.msg == f"run.kind 'magic' is unknown; {SUPPORTED}"


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


@pytest.mark.parametrize("toleration, message", [
    ("{key: a, operator: Equal, value: b, effect: NoSchedule, tolerationSeconds: 60}", "effect NoExecute only"),
    ("{key: a, operator: Exists, value: b}", "Exists takes no value"),
])
def test_a_toleration_kubernetes_would_refuse_is_refused_at_its_line(toleration, message):
    text = component(**{"  kind: job": f"  kind: job\n  environment:\n    tolerations: [{toleration}]"})
    found = errors_of(text)
    assert message in found["run.environment.tolerations.0"].msg and found["run.environment.tolerations.0"].line == 11


# ---- did you mean: an unknown key names the closest key of its place ---------------------------------------

def _errors_of(text: str) -> dict[str, str]:
    from opsched.polyaxonfile import parse_polyaxonfile

    with pytest.raises(SpecError) as raised:
        parse_polyaxonfile(text)
    return {e.loc: e.msg for e in raised.value.errors}


@pytest.mark.parametrize("where, key, meant", [
    ("container", "comand", "command"),
    ("container", "imag", "image"),
    ("environment", "nodeselector", "nodeSelector"),  # case first
    ("environment", "NODESELECTOR", "nodeSelector"),
    ("container.resources", "limitz", "limits"),
])
def test_an_unknown_key_suggests_the_closest_known_key_of_its_place(where, key, meant):
    inner = {"container": f"container: {{image: b, {key}: x}}",
             "environment": f"container: {{image: b}}\n  environment: {{{key}: {{a: b}}}}",
             "container.resources": f"container: {{image: b, resources: {{{key}: {{}}}}}}"}[where]
    errors = _errors_of(f"version: 1.1\nkind: component\nname: x\nrun:\n  kind: job\n  {inner}\n")
    assert errors[f"run.{where}.{key}"] == f"unknown field '{key}'; did you mean '{meant}'?"


def test_a_nested_key_of_an_operation_s_distributed_run_is_suggested_too():
    errors = _errors_of("version: 1.1\nkind: operation\nqueu: a\ncomponent:\n  run:\n    kind: pytorchjob\n"
                        "    master: {replicas: 1, container: {image: b, comand: [x]}}\n")
    assert errors["queu"] == "unknown field 'queu'; did you mean 'queue'?"
    assert errors["component.run.master.container.comand"] == "unknown field 'comand'; did you mean 'command'?"


def test_no_suggestion_when_nothing_is_close():
    errors = _errors_of("version: 1.1\nkind: component\nname: x\nzzzz: 1\nrun:\n  kind: job\n  container: {image: b}\n"
                        "  nodeSelector: {a: b}\n")
    assert errors["zzzz"] == "unknown field 'zzzz'"
    assert errors["run.nodeSelector"] == "unknown field 'nodeSelector'"  # it belongs under environment, not here


def test_known_keys_walk_lists_and_mappings_of_models():
    from opsched.polyaxonfile.models_run import JobRunModel as JobRun
    from opsched.polyaxonfile.validation import known_keys

    assert {"image", "command", "args", "resources"} <= set(known_keys(JobRun, ("container",)))
    assert "limits" in known_keys(JobRun, ("container", "resources"))
    assert "container" in known_keys(JobRun, ("init", 0)) and "name" in known_keys(JobRun, ("sidecars", 1))
