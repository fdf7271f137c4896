"""Hooks in a polyaxonfile: each becomes the follow-up op of its trigger, built from its component; what would
only fail when the op ends (a param naming what the op will not have) is refused at the edge, at its line."""
from __future__ import annotations

import textwrap

import pytest

from opsched.polyaxonfile import SpecError, parse_polyaxonfile

HOOKED = """\
version: 1.1
kind: operation
name: train
project: vision
hooks:
  - trigger: {trigger}
    params:
      loss: {{value: "{param}"}}
    conditions: "{{{{ outputs.loss < 0.5 }}}}"
    component:
      name: notify
      inputs: [{{name: loss, type: float}}]
      run:
        kind: job
        container: {{image: "alpine:3.20", args: ["loss={{{{ loss }}}} run={{{{ globals.uuid }}}}"]}}
component:
  outputs: [{{name: loss, type: float, isOptional: true}}]
  run:
    kind: job
    container: {{image: "python:3.11"}}
"""


def hooked(trigger: str = "succeeded", param: str = "{{ outputs.loss }}") -> str:
    return HOOKED.format(trigger=trigger, param=param)


def errors(text: str) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        parse_polyaxonfile(textwrap.dedent(text))
    return {e.loc: f"{e.msg} (line {e.line})" for e in info.value.errors}


def test_its_errors_are_at_the_line_of_the_hook():
    assert errors(hooked(param="{{ outputs.acc }}"))["hooks.0.params.loss"].endswith("(line 8)")


def test_a_hook_is_its_components_op_with_its_params_kept_for_the_end_of_the_op():
    [hook] = parse_polyaxonfile(hooked()).hooks
    assert hook.trigger == "succeeded" and hook.spec.name == "notify"
    assert hook.spec.params == {"loss": "{{ outputs.loss }}"} and hook.spec.inputs == {"loss": "{{ outputs.loss }}"}
    assert hook.spec.conditions == "{{ outputs.loss < 0.5 }}"  # evaluated over the op when it ends
    assert hook.spec.project == "vision" and hook.spec.queue is None  # the op's project; its queue, once it ends
    assert hook.spec.container.args == ["loss={{ loss }} run={{ globals.uuid }}"]  # the hook op's own, at its run


def test_an_operations_hooks_add_to_its_components_unless_its_patch_strategy_says_otherwise():
    """As Polyaxon compiles an operation: its hooks patch its component's with its patchStrategy (a list: post_merge
    appends the operation's, replace keeps the operation's only, isnull the component's, pre_merge puts the
    operation's first)."""
    text = hooked().replace("component:\n  outputs:", "component:\n  hooks: [{trigger: done, component: {run: "
                                                     "{kind: job, container: {image: x}}}}]\n  outputs:")
    assert [h.trigger for h in parse_polyaxonfile(text).hooks] == ["done", "succeeded"]
    for strategy, triggers in (("replace", ["succeeded"]), ("isnull", ["done"]), ("pre_merge", ["succeeded", "done"])):
        spec = parse_polyaxonfile(text.replace("name: train\n", f"name: train\npatchStrategy: {strategy}\n"))
        assert [h.trigger for h in spec.hooks] == triggers, strategy


@pytest.mark.parametrize("text, loc, message", [
    (hooked(param="{{ outputs.acc }}"), "hooks.0.params.loss", "no attribute 'acc'"),
    (hooked(trigger="finished"), "hooks.0.trigger", "'succeeded', 'failed', 'stopped' or 'done', not 'finished' (line 6)"),
    (hooked().replace("    component:\n      name: notify", "    component:\n      name: notify\n      hooks: [{trigger: "
                                                         "done, component: {run: {kind: job, container: {image: x}}}}]"),
     "hooks.0.component.hooks", "a hook never triggers another"),
    (hooked().replace("    conditions:", "    connection: slack\n    conditions:"), "hooks.0.connection",
     "not supported"),
    (hooked().replace("    conditions:", "    presets: [a]\n    conditions:"), "hooks.0.presets", "not supported"),
    (hooked().replace("      loss: {value:", "      lss: {value:"), "hooks.0.params.lss",
     "is not an input or output of the component"),
])
def test_a_hook_that_could_not_run_is_refused_at_its_line(text, loc, message):
    found = errors(text)
    assert loc in found and message in found[loc], found


def test_a_dry_run_says_which_hooks_the_op_has(tmp_path, capsys):
    from opsched import cli

    path = tmp_path / "op.yaml"
    path.write_text(hooked())
    code = cli.main(["--data-dir", str(tmp_path / "data"), "submit", str(path), "--dry-run", "--id", "t"])
    err = capsys.readouterr().err
    assert code == 0 and "t: hook 0 on succeeded: op t-hook-0 (notify) in queue of the op" in err
