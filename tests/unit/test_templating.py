"""Polyaxon templates rendered into what a container runs (rules.templating): names, globals, toEnv,
and every way a template can fail, each a TemplateError naming the field."""
from __future__ import annotations

import time

import msgspec
import pytest

from opsched.proto.queues import Queue, QueuesConfig
from opsched.rules.templating import (
    Globals,
    TemplateError,
    env_value,
    globals_for,
    render_spec,
    render_text,
)
from tests.builders import T0, case, case_name, op

GLOBS = Globals(uuid="op-7", name="train", project_name="vision", owner_name="alice", created_at=T0,
                iteration=3, namespace="team-a")


def with_to_env(spec, **to_env):
    return msgspec.structs.replace(spec, to_env=to_env)


@pytest.mark.parametrize("c", [
    case("a bare param name renders its value", text="--lr={{ lr }}", out="--lr=0.01"),
    case("params.<name> renders the same value", text="--lr={{ params.lr }}", out="--lr=0.01"),
    case("an input is reachable by its bare name and under inputs.", text="{{ data }}/{{ inputs.data }}",
         out="s3://d/s3://d"),
    case("a param wins over an input of the same name", text="{{ epochs }}", out="20"),
    case("expressions and filters work", text="{{ lr * 10 }} {{ tags | join(',') }} {{ 'big' if lr > 0.001 else 'small' }}",
         out="0.1 a,b big"),
    case("globals.uuid and run_uuid are the op id", text="{{ globals.uuid }} {{ run_uuid }}", out="op-7 op-7"),
    case("the op's name, project and owner are globals", text="{{ name }}@{{ project_name }}/{{ owner_name }}",
         out="train@vision/alice"),
    case("created_at is ISO 8601", text="{{ globals.created_at }}", out=T0.isoformat()),
    case("a sweep trial knows its iteration", text="trial-{{ iteration }}", out="trial-3"),
    case("the run paths are under the artifacts root", text="{{ run_artifacts_path }} {{ globals.run_outputs_path }}",
         out="/plx-context/artifacts/op-7 /plx-context/artifacts/op-7/outputs"),
    case("if and for statements are allowed", text="{% for t in tags %}[{{ t }}]{% endfor %}", out="[a][b]"),
    case("text without a template is returned as it is", text="echo {not a template}", out="echo {not a template}"),
    case("raw blocks keep literal braces", text="{% raw %}{{ .Id }}{% endraw %}", out="{{ .Id }}"),
], ids=case_name)
def test_a_template_renders_the_op_s_values(c):
    spec = op("train").params(lr=0.01, epochs=20, tags=["a", "b"]).inputs(data="s3://d", epochs=10).build()
    out = render_spec(msgspec.structs.replace(spec, container=msgspec.structs.replace(spec.container, args=[c.text])),
                      GLOBS)
    assert out.container.args == [c.out]


@pytest.mark.parametrize("c", [
    case("an undefined name names the field and the names it could use", text="{{ lrr }}",
         error="container.args[0]: 'lrr' is undefined; known names: "),
    case("a syntax error is a template error", text="{{ lr ", error="template syntax error"),
    case("reaching Python internals is refused by the sandbox", text="{{ lr.__class__.__mro__ }}",
         error="not allowed in a template: access to attribute '__class__'"),
    case("a mutating call is refused by the immutable sandbox", text="{{ tags.append(1) }}", error="unsafe"),
    case("a huge power is refused", text="{{ 10 ** 100000 }}", error="value too large: 10 ** 100000 would have 300001 bits (at most 4096)"),
    case("a huge string repetition is refused", text="{{ 'a' * 10**8 }}", error="at most 65536"),
    case("a huge list repetition is refused", text="{{ [0] * 10**7 }}", error="at most 65536"),
    case("a huge range is refused", text="{{ range(10**9) | list }}", error="range of 1000000000 items"),
    case("nested loops are refused", text="{% for a in tags %}{% for b in tags %}{% endfor %}{% endfor %}",
         error="loops nested deeper than 1"),
    case("set, macros and includes are refused", text="{% set x = 1 %}{{ x }}", error="is not allowed (only if and for)"),
    case("output past the bound is refused", text="{% for i in range(10000) %}{{ 'x' * 60000 }}{% endfor %}",
         error="renders to more than 65536 characters"),
    case("printing a huge structure is refused before it is turned into text", text="{{ [0] * 60000 }}",
         error="renders to more than 65536 characters"),
    case("a division by zero is a template error", text="{{ 1 / 0 }}", error="division by zero"),
    case("a type error is a template error", text="{{ lr + 'x' }}", error="cannot render"),
], ids=case_name)
def test_a_template_that_cannot_render_is_a_template_error_naming_its_field(c):
    spec = op("train").params(lr=0.01, tags=["a", "b"]).args(c.text).build()
    started = time.process_time()  # work done here, not wall time (other tests share the cores)
    with pytest.raises(TemplateError) as raised:
        render_spec(spec, GLOBS)
    assert c.error in str(raised.value)
    assert raised.value.path == ("container", "args", 0)
    assert time.process_time() - started < 2.0  # a bound, not a hang


def test_every_rendered_field_of_every_container_is_rendered():
    spec = op("ddp").params(lr=0.5, tag="v2").image("img:{{ tag }}").command("python", "{{ name }}.py") \
        .args("--lr={{ lr }}").env("LR", "{{ lr }}").replicas("worker", 2).build()
    spec = msgspec.structs.replace(spec, container=msgspec.structs.replace(spec.container, working_dir="/w/{{ uuid }}"))
    out = render_spec(spec, GLOBS)
    for container in (out.container, out.replicas[0].container):
        assert container.image == "img:v2"
        assert container.command == ["python", "train.py"]
        assert container.args == ["--lr=0.5"]
        assert [(e.name, e.value) for e in container.env] == [("LR", "0.5")]
    assert out.container.working_dir == "/w/op-7"


def test_to_env_sets_the_param_on_every_container_of_the_gang():
    spec = with_to_env(op("ddp").params(lr=0.5, debug=True, layers=[1, 2]).replicas("worker", 1).build(),
                       LR="lr", DEBUG="debug", LAYERS="layers")
    out = render_spec(spec, GLOBS)
    expected = [("LR", "0.5"), ("DEBUG", "true"), ("LAYERS", "[1, 2]")]
    assert [(e.name, e.value) for e in out.container.env] == expected
    assert [(e.name, e.value) for e in out.replicas[0].container.env] == expected


@pytest.mark.parametrize("c", [
    case("a string is written as it is", value="adam", out="adam"),
    case("a boolean is lowercase", value=False, out="false"),
    case("None is empty", value=None, out=""),
    case("a number is JSON", value=1e-3, out="0.001"),
    case("a mapping is JSON with sorted keys", value={"b": 1, "a": "x"}, out='{"a": "x", "b": 1}'),
], ids=case_name)
def test_to_env_writes_values_as_text(c):
    assert env_value(c.value) == c.out


def test_to_env_may_not_clash_with_an_env_var_the_user_wrote():
    spec = with_to_env(op("a").params(lr=1).env("LR", "2").build(), LR="lr")
    with pytest.raises(TemplateError, match="LR is set both in env and by toEnv"):
        render_spec(spec, GLOBS)


def test_to_env_of_an_unknown_param_is_an_error():
    with pytest.raises(TemplateError, match="not a param, input or output"):
        render_spec(with_to_env(op("a").build(), LR="lr"), GLOBS)


def test_errors_can_be_collected_for_every_field_at_once():
    spec = op("a").image("{{ x }}").args("{{ y }}", "ok").build()
    errors: list[TemplateError] = []
    render_spec(spec, GLOBS, errors)
    assert [e.path for e in errors] == [("container", "image"), ("container", "args", 0)]


def test_a_spec_without_templates_is_returned_unchanged():
    spec = op("a").args("--x=1").build()
    assert render_spec(spec, GLOBS) is spec


def test_globals_take_the_queue_s_namespace_and_artifacts_root_else_the_config_s():
    config = QueuesConfig(queues=[Queue(name="a", namespace="team-a", artifacts_root="/data/runs"), Queue(name="b")],
                          artifacts_root="/mnt/artifacts")
    spec = op("x").build()
    own = globals_for("op-1", spec, "a", config, namespace="opsched", created_at=T0, requested_by=None)
    other = globals_for("op-1", spec, "b", config, namespace="opsched", created_at=T0, requested_by="bob")
    assert (own.namespace, own.as_dict()["run_outputs_path"], own.owner_name) == \
        ("team-a", "/data/runs/op-1/outputs", "default")
    assert (other.namespace, other.as_dict()["run_artifacts_path"], other.owner_name) == \
        ("opsched", "/mnt/artifacts/op-1", "bob")


def test_render_text_names_the_path_it_was_given():
    with pytest.raises(TemplateError) as raised:
        render_text("{{ nope }}", {}, ("queue",))
    assert str(raised.value).startswith("queue: 'nope' is undefined")
