"""Several files read as one operation, as ``polyaxon run -f a.yaml -f b.yaml``: the first says what runs, each later
one patches the operation with its own patchStrategy, a params-only file patches the params, the caller's overrides
(``-P``) apply last; and the params-only files of restart, copy and resume. The CLI's flags: ``FILE``/``-f``,
``--hub``, ``-f`` on restart/copy/resume, exit 2 with every problem."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched import cli
from opsched.polyaxonfile import SpecError, load_params_files, load_polyaxonfile, load_polyaxonfiles

OPERATION = """\
version: 1.1
kind: operation
name: train
params: {lr: {value: 0.1}, epochs: {value: 5}}
runPatch: {container: {resources: {limits: {cpu: 1}}}}
component:
  inputs:
    - {name: lr, type: float}
    - {name: epochs, type: int, value: 1}
    - {name: seed, type: int, value: 0}
  run:
    kind: job
    container: {image: "trainer:1", args: ["{{ lr }} {{ epochs }} {{ seed }}"]}
"""


def files(tmp_path: Path, **texts: str) -> list[Path]:
    out = []
    for name, text in texts.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        out.append(tmp_path / f"{name}.yaml")
    return out


def test_later_files_patch_the_first_in_order_and_overrides_apply_last(tmp_path):
    paths = files(tmp_path, op=OPERATION, gpu="runPatch: {container: {resources: {limits: {memory: 2Gi}}}}\n"
                                             "queue: fast\ntags: [a]\n",
                  lr="params: {lr: {value: 0.2}, seed: 7}\n", again="params: {lr: 0.3}\ntags: [b]\n")
    [spec] = load_polyaxonfiles(paths)
    assert spec.params == {"lr": 0.3, "epochs": 5, "seed": 7} and spec.queue == "fast" and spec.tags == ["a", "b"]
    assert spec.container.resources.limits == {"cpu": "1", "memory": "2Gi"}  # the runPatches merged, then applied
    [spec] = load_polyaxonfiles(paths, {"params": {"lr": 0.9}})
    assert spec.params["lr"] == 0.9  # -P after every file
    assert load_polyaxonfiles(paths[:1]) == [load_polyaxonfile(paths[0])]


@pytest.mark.parametrize("strategy, params", [
    ("replace", {"lr": 0.2, "seed": 7}),
    ("isnull", {"lr": 0.1, "epochs": 5}),
    ("post_merge", {"lr": 0.2, "epochs": 5, "seed": 7}),
    ("pre_merge", {"lr": 0.1, "epochs": 5, "seed": 7}),
])
def test_a_later_file_patches_with_its_own_strategy(tmp_path, strategy, params):
    """Polyaxon's presets: the params mapping is one value under replace and isnull, merged param by param under
    the merges (the newer last, or first)."""
    paths = files(tmp_path, op=OPERATION, lr=f"patchStrategy: {strategy}\nparams: {{lr: {{value: 0.2}}, seed: 7}}\n")
    assert load_polyaxonfiles(paths)[0].params == params


def test_a_component_given_first_is_the_operations_component_and_keeps_its_matrix(tmp_path):
    component = ("kind: component\nname: c\ninputs: [{name: lr, type: float}]\nmatrix: {kind: grid, params: "
                 "{lr: {kind: choice, value: [0.1, 0.2]}}}\nrun: {kind: job, container: {image: x}}\n")
    paths = files(tmp_path, comp=component, more="runPatch: {container: {image: y}}\npriority: 3\n")
    specs = load_polyaxonfiles(paths, salt="s")
    assert [s.params for s in specs] == [{"lr": 0.1}, {"lr": 0.2}]
    assert {(s.container.image, s.priority) for s in specs} == {("y", 3)}


@pytest.mark.parametrize("text, loc, message", [
    ("component: {run: {kind: job, container: {image: y}}}\n", "component", "'component' says what runs"),
    ("pathRef: other.yaml\n", "pathRef", "'pathRef' says what runs, which only the first file does"),
    ("kind: component\nrun: {kind: job, container: {image: y}}\n", "kind",
     "a component can only be the first file"),
    ("patchStrategy: merge\n", "patchStrategy", "is one of replace, isnull, post_merge, pre_merge"),
    ("params: {lr: {value: 0.2}}\nqueu: fast\n", "queu", "unknown field 'queu'; did you mean 'queue'?"),
    ("params: {lr: {value: many}}\n", "params.lr", "expects a value of type float"),
    ("[a, b]\n", "", "holds operation fields (a mapping)"),
])
def test_a_problem_in_a_later_file_is_located_in_that_file(tmp_path, text, loc, message):
    paths = files(tmp_path, op=OPERATION, later=text)
    with pytest.raises(SpecError) as raised:
        load_polyaxonfiles(paths)
    errors = {e.loc: e for e in raised.value.errors}
    assert loc in errors and message in errors[loc].msg, raised.value.errors
    assert errors[loc].file == str(paths[1])
    assert errors[loc].line == (None if loc == "" else text[:text.index(loc.split(".")[-1])].count("\n") + 1)


def test_restart_params_files_give_values_in_order_and_refuse_anything_else(tmp_path):
    one, two = files(tmp_path, one="kind: operation\nparams: {lr: {value: 0.2}, seed: 1}\n", two="params: {lr: 0.3}\n")
    assert load_params_files([one, two]) == {"lr": 0.3, "seed": 1}
    [bad] = files(tmp_path, bad="params: {lr: {value: 0.2, toEnv: LR}}\nqueue: fast\nrunPatch: {}\n")
    with pytest.raises(SpecError) as raised:
        load_params_files([bad])
    errors = {e.loc: (e.line, e.msg) for e in raised.value.errors}
    assert set(errors) == {"params.lr.toEnv", "queue", "runPatch"}
    assert errors["queue"][0] == 2 and "send new param values only" in errors["queue"][1]
    assert "this file also sets queue, runPatch" in errors["runPatch"][1]


# --- the CLI ---------------------------------------------------------------------------------------------------

def run(tmp_path: Path, capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(["--data-dir", str(tmp_path / "data"), *argv])
    except SystemExit as exit:  # as `python -m opsched.cli` exits
        code = exit.code  # type: ignore[assignment]
    out = capsys.readouterr()
    return code, out.out, out.err


def test_submit_reads_file_then_each_f_and_dry_run_shows_the_patched_op(tmp_path, capsys):
    op, lr = files(tmp_path, op=OPERATION, lr="params: {lr: {value: 0.7}}\n")
    code, out, _ = run(tmp_path, capsys, "submit", str(op), "-f", str(lr), "--dry-run", "-P", "seed=3", "--id", "x")
    assert code == 0 and "0.7 5 3" in out and "cpu: '1'" in out
    same = run(tmp_path, capsys, "submit", "-f", str(op), "-f", str(lr), "--dry-run", "-P", "seed=3", "--id", "x")
    assert same[1] == out


def test_submit_without_a_file_or_with_an_invalid_one_exits_2_saying_why(tmp_path, capsys, monkeypatch):
    code, _, err = run(tmp_path, capsys, "submit", "--dry-run")
    assert code == cli.EXIT_INVALID and "needs a polyaxonfile: FILE, or -f FILE" in err
    op, bad = files(tmp_path, op="kind: operation\nhubRef: train:1.0\n",
                    bad="params: {lr: {value: x}}\ncomponent: {}\n")
    monkeypatch.delenv("OPSCHED_HUB", raising=False)
    monkeypatch.delenv("OPSCHED_CONTEXT", raising=False)
    code, _, err = run(tmp_path, capsys, "submit", str(op), "--dry-run")
    assert code == cli.EXIT_INVALID and "hubRef (line 2): hubRef 'train:1.0': no component library is set" in err
    code, _, err = run(tmp_path, capsys, "submit", "-f", str(op), "-f", str(bad), "--hub", str(tmp_path), "--dry-run")
    assert code == cli.EXIT_INVALID and f"no train/1.0.yaml in the hub {tmp_path} (from --hub)" in err
    assert f"component ({bad} line 2): 'component' says what runs" in err


def test_the_hub_comes_from_the_flag_then_the_environment_then_the_context(tmp_path, capsys, monkeypatch):
    [op] = files(tmp_path, op="kind: operation\nhubRef: train\n")
    for name in ("flag", "env", "ctx"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.yaml").write_text(f"kind: component\nname: {name}\nrun: {{kind: job, container: "
                                                    "{image: x}}\n")
    (tmp_path / "context.json").write_text('{"url": "nats://127.0.0.1:1", "hub": "ctx"}')
    monkeypatch.setenv("OPSCHED_CONTEXT", str(tmp_path / "context.json"))
    monkeypatch.delenv("OPSCHED_HUB", raising=False)
    assert "opsched.io/op-name: ctx" in run(tmp_path, capsys, "submit", str(op), "--dry-run")[1]
    monkeypatch.setenv("OPSCHED_HUB", str(tmp_path / "env"))
    assert "opsched.io/op-name: env" in run(tmp_path, capsys, "submit", str(op), "--dry-run")[1]
    flagged = run(tmp_path, capsys, "submit", str(op), "--dry-run", "--hub", str(tmp_path / "flag"))[1]
    assert "opsched.io/op-name: flag" in flagged


def test_schedule_reads_several_files_too(tmp_path, capsys):
    op, every = files(tmp_path, op=OPERATION, every="schedule: {kind: interval, frequency: 3600}\n")
    spec, schedule = cli._scheduled_op(cli.parser().parse_args(["schedule", str(op), "-f", str(every)]))
    assert schedule.frequency_s == 3600 and spec.params == {"lr": 0.1, "epochs": 5}
    code, _, err = run(tmp_path, capsys, "schedule", str(op), "--id", "nightly")
    assert code == cli.EXIT_INVALID and "has no schedule section" in err


def test_restart_copy_and_resume_send_the_params_of_their_files_then_p(tmp_path, capsys, monkeypatch):
    one, two, bad = files(tmp_path, one="params: {lr: {value: 0.2}, seed: 1}\n", two="params: {lr: 0.3}\n",
                          bad="params: {lr: 0.3}\nqueue: fast\n")
    for verb in ("restart", "copy", "resume"):
        sends: list = []
        monkeypatch.setattr(cli, "_with_verdict", lambda args, send, sends=sends: sends.append(send) or 0)
        assert run(tmp_path, capsys, verb, "op-1", "-f", str(one), "-f", str(two), "-P", "seed=9")[0] == 0
        client = _Recorder()
        sends[0](client)
        assert client.params == {"lr": 0.3, "seed": 9}, verb
        code, _, err = run(tmp_path, capsys, verb, "op-1", "-f", str(bad))
        assert code == cli.EXIT_INVALID and "queue (line 2): 'queue': restart, copy and resume send new param " \
                                            "values only" in err


class _Recorder:
    """A client that records the params of the rerun it is asked for."""

    params: dict | None = None

    def resume(self, op_id, params, **kwargs):
        self.params = params

    def rerun(self, op_id, params, copy, **kwargs):
        self.params = params
