"""Operations that name their component: ``pathRef`` (a file beside them) and ``hubRef`` (a local component
library). What is read is one self-contained spec; every refusal names the file and the line where the problem is
and, for a problem in a file a reference named, the reference that reached it."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched.polyaxonfile import Hub, SpecError, load_polyaxonfile, load_polyaxonfile_batch, parse_polyaxonfile

TRAIN = """\
version: 1.1
kind: component
name: train
inputs: [{name: lr, type: float, value: 0.1}]
termination: {maxRetries: 2}
run:
  kind: job
  container: {image: "trainer:1", args: ["--lr={{ lr }}"]}
"""
OPERATION = """\
version: 1.1
kind: operation
name: tuned
pathRef: components/train.yaml
params: {lr: {value: 0.5}}
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def refused(path: Path, **kwargs) -> dict[str, object]:
    with pytest.raises(SpecError) as raised:
        load_polyaxonfile(path, **kwargs)
    return {e.loc: e for e in raised.value.errors}


def test_a_pathref_is_replaced_by_the_component_it_names_relative_to_the_file(tmp_path):
    write(tmp_path, {"ops/op.yaml": OPERATION, "ops/components/train.yaml": TRAIN})
    spec = load_polyaxonfile(tmp_path / "ops" / "op.yaml")
    assert (spec.name, spec.params, spec.termination.max_retries) == ("tuned", {"lr": 0.5}, 2)
    assert spec.container.image == "trainer:1" and spec.container.args == ["--lr={{ lr }}"]
    inline = parse_polyaxonfile(OPERATION.replace("pathRef: components/train.yaml\n", "") + "component:\n"
                                + "".join(f"  {line}\n" for line in TRAIN.splitlines()))
    assert spec == inline  # the same self-contained spec as the component written inline


def test_a_hooks_pathref_is_relative_to_the_component_file_that_has_it(tmp_path):
    hooked = TRAIN + "hooks:\n  - {trigger: done, pathRef: report.yaml}\n"
    write(tmp_path, {"op.yaml": OPERATION, "components/train.yaml": hooked,
                     "components/report.yaml": "kind: component\nname: report\nrun: {kind: job, container: "
                                               "{image: alpine}}\n"})
    [hook] = load_polyaxonfile(tmp_path / "op.yaml").hooks
    assert hook.spec.name == "report" and hook.trigger == "done"


def test_a_problem_in_the_named_file_is_located_there_and_names_the_reference(tmp_path, monkeypatch):
    write(tmp_path, {"op.yaml": OPERATION, "components/train.yaml": TRAIN.replace("maxRetries: 2", "maxRetries: -1")})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as raised:
        load_polyaxonfile("op.yaml")
    [error] = raised.value.errors
    assert (error.loc, error.file, error.line) == ("termination.maxRetries", "components/train.yaml", 5)
    assert error.via == "the pathRef at op.yaml line 4"
    assert str(raised.value).splitlines() == [
        "op.yaml: invalid polyaxonfile (1 error)",
        "  termination.maxRetries (components/train.yaml line 5, by the pathRef at op.yaml line 4): "
        "Input should be greater than or equal to 0"]


def test_a_named_file_that_is_no_yaml_is_located_in_it(tmp_path):
    write(tmp_path, {"op.yaml": OPERATION, "components/train.yaml": "kind: component\nrun: [\n"})
    [error] = refused(tmp_path / "op.yaml").values()
    assert error.file.endswith("components/train.yaml") and "YAML syntax error" in error.msg and error.line == 3
    assert error.via.endswith("op.yaml line 4")


@pytest.mark.parametrize("ref, files, message", [
    ("components/missing.yaml", {}, "there is no file"),
    ("/etc/train.yaml", {}, "is absolute: a pathRef is relative to the folder of the file that has it"),
    ("../train.yaml", {"../train.yaml": TRAIN}, "leads out of"),
    ("components/op2.yaml", {"components/op2.yaml": OPERATION}, "a pathRef names a component file (kind: component)"),
    ("components/nokind.yaml", {"components/nokind.yaml": TRAIN.replace("kind: component\n", "")}, "has no kind"),
    ("", {}, "must be a non-empty string"),
])
def test_a_pathref_that_cannot_be_resolved_is_refused_at_its_line(tmp_path, ref, files, message):
    root = write(tmp_path / "proj", {"op.yaml": OPERATION.replace("components/train.yaml", repr(ref)), **files})
    [error] = refused(root / "op.yaml").values()
    assert message in error.msg, error
    if error.loc == "pathRef":
        assert (error.file, error.line) == (None, 4)
    else:  # in the file named (at its kind, or the whole document without one), by the reference
        assert error.file.endswith(ref) and error.via.endswith("op.yaml line 4")
        assert (error.loc, error.line) in (("kind", 2), ("", None))


def test_a_symbolic_link_out_of_the_folder_is_refused(tmp_path):
    write(tmp_path, {"outside/train.yaml": TRAIN, "proj/op.yaml": OPERATION})
    (tmp_path / "proj" / "components").symlink_to(tmp_path / "outside")
    assert "leads out of" in refused(tmp_path / "proj" / "op.yaml")["pathRef"].msg


def test_a_cycle_is_refused_naming_each_file_on_it(tmp_path):
    looping = TRAIN + "hooks:\n  - {trigger: done, pathRef: ../op.yaml}\n"
    write(tmp_path, {"op.yaml": OPERATION, "components/train.yaml": looping})
    error = refused(tmp_path / "op.yaml")["hooks.0.pathRef"]
    assert error.file.endswith("components/train.yaml") and error.line == 10
    assert error.msg.endswith("makes a cycle: " + " -> ".join(
        str(tmp_path / name) for name in ("op.yaml", "components/train.yaml", "op.yaml")))


def test_a_reference_next_to_an_inline_component_is_refused(tmp_path):
    write(tmp_path, {"op.yaml": OPERATION + "component: {run: {kind: job, container: {image: x}}}\n",
                     "components/train.yaml": TRAIN})
    assert "both say what runs" in refused(tmp_path / "op.yaml")["pathRef"].msg


@pytest.mark.parametrize("ref, message", [
    ("dagRef", "opsched has no DAGs yet"), ("urlRef", "opsched fetches nothing from the network")])
def test_dag_and_url_references_stay_refused_saying_why(ref, message):
    errors = {e.loc: e.msg for e in pytest.raises(SpecError, parse_polyaxonfile,
                                                  f"kind: operation\n{ref}: x\n").value.errors}
    assert message in errors[ref]


# --- hubRef --------------------------------------------------------------------------------------------------

HUB = {"train/1.0.yaml": TRAIN, "train/2.0.yaml": TRAIN.replace("trainer:1", "trainer:2"),
       "eval.yaml": TRAIN.replace("name: train", "name: eval"), "acme/tune/latest.yaml": TRAIN.replace("train", "tune")}


@pytest.mark.parametrize("ref, name, image", [
    ("train:1.0", "train", "trainer:1"), ("train:2.0", "train", "trainer:2"), ("eval", "eval", "trainer:1"),
    ("eval:latest", "eval", "trainer:1"), ("acme/tune", "tune", "tuneer:1"), ("acme.tune:latest", "tune", "tuneer:1"),
])
def test_a_hubref_reads_name_version_from_the_library(tmp_path, ref, name, image):
    hub = write(tmp_path / "hub", HUB)
    write(tmp_path, {"op.yaml": f"kind: operation\nhubRef: {ref}\n"})
    spec = load_polyaxonfile(tmp_path / "op.yaml", hub=hub)
    assert (spec.name, spec.container.image) == (name, image)


@pytest.mark.parametrize("ref, hub, message", [
    ("train:3.0", "hub", "no train/3.0.yaml in the hub {hub} (from the hub argument) (train has: 1.0, 2.0)"),
    ("train", "hub", "no train.yaml or train/latest.yaml in the hub"),
    ("both", "hub", "is ambiguous in the hub"),
    ("a/b/c:1", "hub", "is not [OWNER/]NAME[:VERSION]"),
    ("train:../1.0", "hub", "invalid version '../1.0'"),
    ("train:1.0", None, "no component library is set: give --hub DIR, set $OPSCHED_HUB"),
    ("train:1.0", "nohub", "is not a folder"),
])
def test_a_hubref_that_cannot_be_resolved_is_refused_at_its_line(tmp_path, ref, hub, message):
    write(tmp_path / "hub", {**HUB, "both.yaml": TRAIN, "both/latest.yaml": TRAIN})
    write(tmp_path, {"op.yaml": f"kind: operation\nname: x\nhubRef: '{ref}'\n"})
    folder = tmp_path / hub if hub else None
    error = refused(tmp_path / "op.yaml", hub=folder)["hubRef"]
    assert message.format(hub=folder) in error.msg and error.line == 3


def test_the_cli_says_where_its_hub_came_from_and_why_there_is_none(tmp_path):
    write(tmp_path, {"op.yaml": "kind: operation\nhubRef: train\n"})
    error = refused(tmp_path / "op.yaml", hub=Hub(None, unset="context x.json: not JSON"))["hubRef"]
    assert "no component library is set (context x.json: not JSON)" in error.msg
    error = refused(tmp_path / "op.yaml", hub=Hub(tmp_path, "$OPSCHED_HUB"))["hubRef"]
    assert f"in the hub {tmp_path} (from $OPSCHED_HUB)" in error.msg


def test_a_pathref_in_a_hub_component_stays_in_the_hub(tmp_path):
    hooked = TRAIN + "hooks:\n  - {trigger: done, pathRef: ../../secret.yaml}\n"
    hub = write(tmp_path / "hub", {"train/1.0.yaml": hooked})
    write(tmp_path, {"op.yaml": "kind: operation\nhubRef: train:1.0\n", "secret.yaml": TRAIN})
    error = refused(tmp_path / "op.yaml", hub=hub)["hooks.0.pathRef"]
    assert "leads out of the hub" in error.msg and error.file == str(hub / "train" / "1.0.yaml")


def test_a_referenced_sweep_keeps_the_batch_id_tied_to_the_component_text(tmp_path):
    write(tmp_path, {"op.yaml": OPERATION.replace("params: {lr: {value: 0.5}}", "matrix: {kind: grid, params: "
                                                  "{lr: {kind: choice, value: [0.1, 0.2]}}}"),
                     "components/train.yaml": TRAIN})
    first = load_polyaxonfile_batch(tmp_path / "op.yaml", salt="s")
    (tmp_path / "components" / "train.yaml").write_text(TRAIN.replace("trainer:1", "trainer:9"))
    second = load_polyaxonfile_batch(tmp_path / "op.yaml", salt="s")
    assert len(first) == 2 and first[0].batch != second[0].batch
