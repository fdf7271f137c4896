"""The polyaxonfile parser on the files of ``examples/``."""
from __future__ import annotations

import pytest

from opsched.polyaxonfile import SpecError, load_polyaxonfile
from opsched.polyaxonfile.models_matrix import MATRIX_MODELS
from opsched.polyaxonfile.models_operation import MODELS_BY_RUN_KIND
from tests.unit.polyaxonfile_texts import EXAMPLES

# --- examples -----------------------------------------------------------------------------------

NOT_POLYAXONFILES = {"invalid.yaml", "queues.yaml", "queues-agents.yaml", "queues-autoscale.yaml"}  # queues.yaml is the admission queue config
VALID_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name not in NOT_POLYAXONFILES)


@pytest.mark.parametrize("path", VALID_EXAMPLES,
                         ids=[f"example {p.name} parses" for p in VALID_EXAMPLES])
def test_every_example_except_invalid_parses(path):
    from opsched.polyaxonfile import load_polyaxonfile_batch

    specs = load_polyaxonfile_batch(path)  # one op, or one per combination of a matrix
    assert specs and all(s.component_hash and s.container.image for s in specs)


def test_the_sweep_example_is_six_ops_run_two_at_a_time():
    from opsched.polyaxonfile import load_polyaxonfile_batch

    specs = load_polyaxonfile_batch(EXAMPLES / "sweep.yaml")
    assert len(specs) == 6 and {s.batch_concurrency for s in specs} == {2} and len({s.batch for s in specs}) == 1


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
    assert spec.run_kind == "pytorchjob" and spec.priority_class is None and spec.preemptible is None  # preemptible
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


POLYAXON_EXAMPLES = sorted((EXAMPLES / "polyaxon").glob("*.yaml"))
HUB = EXAMPLES / "polyaxon" / "hub"  # the component library of the examples' hubRefs (--hub examples/polyaxon/hub)


@pytest.mark.parametrize("path", POLYAXON_EXAMPLES, ids=[f"polyaxon/{p.name} parses" for p in POLYAXON_EXAMPLES])
def test_every_polyaxon_example_parses_without_a_warning(path):
    import warnings

    from opsched.polyaxonfile import SpecWarning, load_polyaxonfile_batch

    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        specs = load_polyaxonfile_batch(path, hub=HUB)
    assert specs and all(s.component_hash and s.container.image for s in specs)


REFERENCED = sorted([*(EXAMPLES / "polyaxon" / "components").glob("*.yaml"), *HUB.glob("**/*.yaml")])


@pytest.mark.parametrize("path", REFERENCED, ids=[f"{p.relative_to(EXAMPLES)} is a component" for p in REFERENCED])
def test_the_files_the_polyaxon_examples_name_are_components_that_run_alone(path):
    import yaml

    assert yaml.safe_load(path.read_text())["kind"] == "component"
    assert load_polyaxonfile(path, overrides={"params": {"model": "m"}} if "evaluate" in str(path) else None)


def test_the_polyaxon_reference_examples_resolve_their_component_and_patch_it():
    from opsched.polyaxonfile import load_polyaxonfiles

    folder = EXAMPLES / "polyaxon"
    ref = load_polyaxonfile(folder / "train-pathref.yaml")
    assert (ref.name, ref.inputs) == ("train-pathref", {"lr": 0.1, "epochs": 1})
    patched = load_polyaxonfile(folder / "train-runpatch.yaml")
    assert [(e.name, e.value) for e in patched.container.env] == [("STAGE", "tune"), ("EXTRA", "1")]
    assert patched.container.resources.limits == {"cpu": "500m", "memory": "256Mi"}
    assert patched.environment.labels == {"team": "vision"}
    assert load_polyaxonfile(folder / "evaluate-hubref.yaml", hub=HUB).inputs == {"model": "runs/m.pt"}
    [small] = load_polyaxonfiles([folder / "train-pathref.yaml", folder / "overlays" / "lr-small.yaml"])
    assert small.params == {"lr": 0.001}


# Honoured fields no example of examples/polyaxon/ sets, each with why: what the default queue's pod security
# refuses, or what needs objects the local cluster does not have. tests/unit/test_polyaxonfile_fields.py shows each
# of them reaching the op or the pod.
NOT_IN_AN_EXAMPLE = {
    **{("NotificationModel", f): "plugins.notifications is checked but still warned: the notifier is not wired yet"
       for f in ("connections", "trigger")},
    ("EnvironmentModel", "priorityClassName"): "needs a PriorityClass in the cluster and the queue's priorityClassNames",
    ("EnvironmentModel", "serviceAccountName"): "needs a ServiceAccount and the queue's serviceAccounts",
    ("EnvironmentModel", "imagePullSecrets"): "needs a Secret and the queue's imagePullSecrets",
    ("ContainerPort", "hostPort"): "refused by the default queue's pod security (baseline)",
    ("ContainerPort", "hostIP"): "refused by the default queue's pod security (baseline), with hostPort",
    ("HTTPGetAction", "host"): "refused at every pod security level (the kubelet would connect there)",
    ("TCPSocketAction", "host"): "refused at every pod security level (the kubelet would connect there)",
    ("SELinuxOptions", "user"): "refused by the default queue's pod security (baseline)",
    ("SELinuxOptions", "role"): "refused by the default queue's pod security (baseline)",
}


def test_the_polyaxon_examples_set_every_honoured_field():
    """Every field the parser honours (test_polyaxonfile_fields: not refused, not warned) is set by some example of
    examples/polyaxon/ (and so runs on the real control plane: tests/e2e/test_polyaxon_examples.py), or is listed
    above with why not."""
    import yaml

    from tests.unit.test_polyaxonfile_fields import ALL_MODELS, REFUSED, SECTIONS, WARNED, fields_of, used_fields

    every: dict = {}
    for model in ALL_MODELS:
        fields_of(model, every)
    used: set = set()
    for path in [*POLYAXON_EXAMPLES, *REFERENCED]:  # the operations, and the components they name
        doc = yaml.safe_load(path.read_text())
        run_kind = ((doc.get("component") or doc).get("run") or {}).get("kind", "job")
        component, operation = MODELS_BY_RUN_KIND[run_kind]
        used_fields(operation if doc.get("kind") == "operation" else component, doc, used)
        if doc.get("matrix"):
            used_fields(MATRIX_MODELS[doc["matrix"]["kind"]], doc["matrix"], used)
    missing = sorted(set(every) - used - set(REFUSED) - set(WARNED) - SECTIONS - set(NOT_IN_AN_EXAMPLE))
    assert not missing, f"no example of examples/polyaxon/ sets {missing}"
