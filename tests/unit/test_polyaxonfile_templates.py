"""Templates, toEnv and typed inputs at the edge: a file whose templates cannot render is refused with the
field and its line before anything is published; each sweep trial carries its own values."""
from __future__ import annotations

import textwrap

import pytest

from opsched.polyaxonfile import parse_polyaxonfile_batch
from opsched.rules.templating import Globals, render_spec
from tests.builders import case, case_name
from tests.unit.polyaxonfile_texts import errors_of, parse, pytorchjob

TEMPLATED = """
version: 1.1
kind: operation
name: tpl
params:
  lr: {value: 0.1, toEnv: LR}
  note: {value: hello, contextOnly: true}
component:
  inputs:
    - {name: lr, type: float}
    - {name: opt, type: str, value: adam, options: [adam, sgd], toEnv: OPTIMIZER}
    - {name: layers, type: int, isList: true, value: [64, 32]}
  run:
    kind: job
    container:
      image: python:3.11-slim
      command: [python, train.py]
      args: ["--lr={{ lr }}", "--opt={{ params.opt }}", "--out={{ globals.run_outputs_path }}", "{{ note }}"]
"""


def templated(**replacements: str) -> str:
    text = TEMPLATED
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_a_templated_file_carries_its_templates_and_to_env_and_renders():
    spec = parse(TEMPLATED)
    assert spec.container.args[0] == "--lr={{ lr }}"  # as written: admission renders it per op
    assert spec.to_env == {"LR": "lr", "OPTIMIZER": "opt"}
    out = render_spec(spec, Globals(uuid="op-1", name=spec.name, project_name=spec.project))
    assert out.container.args == ["--lr=0.1", "--opt=adam", "--out=/plx-context/artifacts/op-1/outputs", "hello"]
    assert [(e.name, e.value) for e in out.container.env] == [("LR", "0.1"), ("OPTIMIZER", "adam")]


@pytest.mark.parametrize("c", [
    case("an undefined name is refused at its field", text=templated(**{'"{{ note }}"': '"{{ nope }}"'}),
         loc="component.run.container.args.3", msg="'nope' is undefined"),
    case("a template reaching Python internals is refused", text=templated(**{"image: python:3.11-slim":
         "image: \"{{ ''.__class__.__mro__ }}\""}), loc="component.run.container.image", msg="not allowed"),
    case("a syntax error is refused", text=templated(**{"command: [python, train.py]": "command: [python, '{{ x']"}),
         loc="component.run.container.command.1", msg="template syntax error"),
    case("a value outside an input's options is refused", text=templated(**{"value: adam,": "value: rmsprop,"}),
         loc="component.inputs.1.value", msg="must be one of ['adam', 'sgd']"),
    case("a list input must be a list", text=templated(**{"value: [64, 32]": "value: 64"}),
         loc="component.inputs.2.value", msg="is a list (isList)"),
    case("each item of a list input is typed", text=templated(**{"value: [64, 32]": "value: [64, x]"}),
         loc="component.inputs.2.value", msg="expects a value of type int, got 'x'"),
    case("a toEnv that is not an env var name is refused", text=templated(**{"toEnv: LR": "toEnv: 1LR"}),
         loc="params.lr.toEnv", msg="invalid env var name"),
    case("two toEnv of the same env var are refused", text=templated(**{"toEnv: OPTIMIZER": "toEnv: LR"}),
         loc="component.inputs.1.toEnv", msg="toEnv LR is already set from 'lr'"),
    case("isFlag is refused, not ignored", text=templated(**{"isList: true,": "isList: true, isFlag: true,"}),
         loc="component.inputs.2.isFlag", msg="'isFlag' is not supported by opsched yet"),
    case("argFormat is refused, not ignored", text=templated(**{"isList: true,": "isList: true, argFormat: x,"}),
         loc="component.inputs.2.argFormat", msg="not supported"),
    case("toInit on a param is refused", text=templated(**{"toEnv: LR}": "toEnv: LR, toInit: true}"}),
         loc="params.lr.toInit", msg="not supported yet"),
    case("a param that is neither an input nor contextOnly is refused",
         text=templated(**{"contextOnly: true": "contextOnly: false"}), loc="params.note",
         msg="is not an input or output"),
], ids=case_name)
def test_a_file_that_cannot_become_what_it_says_is_refused_at_the_field(c):
    errors = errors_of(c.text)
    assert c.loc in errors, errors
    assert c.msg in errors[c.loc].msg
    assert errors[c.loc].line is not None or c.loc.endswith(("toEnv", "toInit", "isFlag", "argFormat"))


def test_every_template_error_of_a_file_is_reported_at_once():
    errors = errors_of(templated(**{"image: python:3.11-slim": 'image: "{{ a }}"', '"{{ note }}"': '"{{ b }}"'}))
    assert {"component.run.container.image", "component.run.container.args.3"} <= set(errors)


def test_a_worker_template_error_is_located_in_the_worker_section():
    errors = errors_of(pytorchjob(**{'command: sh -c "python train.py"': 'command: ["python", "{{ rank }}"]'}))
    assert "run.worker.container.command.1" in errors


def test_a_templated_queue_is_accepted_by_the_parser():
    spec = parse(templated(**{"name: tpl": "name: tpl\nqueue: \"{{ 'gpu-a' if lr > 0.01 else 'cpu' }}\""}))
    assert spec.queue == "{{ 'gpu-a' if lr > 0.01 else 'cpu' }}"


def test_a_templated_queue_that_cannot_render_is_refused():
    errors = errors_of(templated(**{"name: tpl": "name: tpl\nqueue: \"{{ missing }}\""}))
    assert "'missing' is undefined" in errors["queue"].msg


SWEEP = """
version: 1.1
kind: operation
name: sweep
matrix:
  kind: grid
  params:
    lr: {kind: choice, value: [0.1, 0.01, 0.001]}
    batch_size: {kind: choice, value: [32, 64]}
component:
  inputs: [{name: lr, type: float}, {name: batch_size, type: int}]
  run:
    kind: job
    container:
      image: python:3.11-slim
      command: ["sh", "-c", "train --lr={{ lr }} --bs={{ params.batch_size }} --trial={{ iteration }}"]
"""


def test_every_sweep_trial_renders_its_own_values_and_iteration():
    specs = parse_polyaxonfile_batch(textwrap.dedent(SWEEP), salt="s")
    commands = [render_spec(s, Globals(uuid=f"op-{i}", name=s.name, project_name=s.project,
                                       iteration=s.iteration)).container.command[2]
                for i, s in enumerate(specs)]
    assert commands == [f"train --lr={lr} --bs={bs} --trial={i}"
                        for i, (lr, bs) in enumerate((lr, bs) for lr in (0.1, 0.01, 0.001) for bs in (32, 64))]
