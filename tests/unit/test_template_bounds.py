"""No template can burn CPU or memory on admission's event loop (rules.template_sandbox): every bomb, and every
failure of any kind, is a TemplateError naming the field, refused before the work where its size is predictable;
and what templates are for still renders."""
from __future__ import annotations

import time

import msgspec
import pytest

from opsched.rules import template_sandbox
from opsched.rules.template_sandbox import time_budget
from opsched.rules.templating import Globals, TemplateError, render_spec, render_text
from tests.builders import T0, case, case_name, op

GLOBS = Globals(uuid="op-7", name="train", project_name="vision", created_at=T0)
BIG = "x" * 60000


def render(text: str) -> str:
    spec = op("train").params(lr=0.01, tags=["a", "b"], big=BIG, n=3).args(text).build()
    return render_spec(spec, GLOBS).container.args[0]


@pytest.mark.parametrize("c", [
    case("filters and methods people use", text="{{ tags | join(',') | upper }} {{ 'a-b'.split('-') | last }} "
         "{{ '%.3f' | format(lr) }} {{ lr | round(1) }} {{ tags | tojson }} {{ 'ab' | replace('a', 'c') }}",
         out='A,B b 0.010 0.0 ["a", "b"] cb'),
    case("a loop with loop variables and ~", text="{% for t in tags %}{{ loop.index ~ '=' ~ t }};{% endfor %}",
         out="1=a;2=b;"),
    case("a loop's else and length", text="{% for t in tags if t == 'b' %}{{ loop.length }}{% else %}none{% endfor %}",
         out="1"),
    case("arithmetic within the bounds", text="{{ 2 ** 4095 > 0 }} {{ (n * 10) // 4 }} {{ n % 2 }} {{ 10 - n }}",
         out="True 7 1 7"),
    case("a repeat within the bound", text="{{ ('ab' * 30000) | length }}", out="60000"),
    case("a dict's items", text="{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}", out="a1"),
], ids=case_name)
def test_what_templates_are_for_still_renders(c):
    assert render(c.text) == c.out


@pytest.mark.parametrize("c", [
    case("nested powers", text="{{ (((10**64)**64)**64)**64 }}",
         error="value too large: <an integer of 213 bits> ** 64 would have 13569 bits (at most 4096)"),
    case("a power of a big literal", text="{{ 99999999999999999999999999999999999999999999999999 ** 99 }}",
         error="would have 16435 bits"),
    case("a product of big integers", text="{{ (10**700) * (10**700) }}", error="bits (at most 4096)"),
    case("a string repeat", text="{{ 'a' * 10**8 }}", error="would have 100000000 characters and items"),
    case("a list repeat", text="{{ [0] * 10**7 }}", error="[0] * 10000000 would have 10000000"),
    case("a repeat of a nested list", text="{{ ['x' * 60000] * 60000 }}", error="would have 3600060000"),
    case("string + past the bound", text="{{ big + big }}", error="would have 120000 characters"),
    case("~ past the bound", text="{{ big ~ big }}", error="~ would build 120000 characters"),
    case("a %-format width", text="{{ '%0100000000d' % 1 }}", error="the width of '%0100000000d'"),
    case("a %-format mapping repeated", text="{{ '%(a)s' * 1000 % {'a': big} }}", error="value too large"),
    case("a huge integer literal", text="{{ " + "9" * 4000 + " }}", error="a literal is an integer of"),
    case("a huge range", text="{{ range(10**9) | list }}", error="range of 1000000000 items (at most 10000)"),
    case("a range too large to count", text="{{ range(10**100) }}", error="cannot render"),
    case("deep parentheses", text="{{ " + "(" * 300 + "1" + ")" * 300 + " }}", error="nested too deeply"),
    case("deep nesting the parser accepts", text="{{ " + "not " * 40 + "n }}",
         error="the template nests deeper than 32 levels"),
    case("a long chain", text="{{ " + " + ".join(["n"] * 1000) + " }}", error="nests deeper than 32 levels"),
    case("too many parts", text="{{ [" + ",".join(["1"] * 2000) + "] }}", error="more than 2000 parts"),
    case("a source past the bound", text="{{ n }}" + " " * 9000, error="characters (at most 8192)"),
    case("a concatenation loop", text="{% for i in range(10000) %}{{ big ~ big }}{% endfor %}",
         error="~ would build 120000"),
    case("a for bomb: output past the bound", text="{% for i in range(10000) %}{{ 'x' * 60000 }}{% endfor %}",
         error="renders to more than 65536 characters"),
    case("a for bomb: nested loops", text="{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}"
         "{% endfor %}", error="loops nested deeper than 1"),
    case("recursion via a recursive loop", text="{% for x in range(10) recursive %}{{ loop(range(10)) }}{% endfor %}",
         error="recursive loops are not allowed"),
    case("recursion via macros", text="{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
         error="{% macro %} is not allowed"),
    case("center's width", text="{{ 'x' | center(100000000) }}", error="center(100000000) (at most 65536)"),
    case("replace multiplying a string", text="{{ big | replace('x', big) }}",
         error="replace() would build 3600000000 characters"),
    case("replace through the method", text="{{ big.replace('x', big) }}", error="replace() would build"),
    case("join with a big separator", text="{{ range(10000) | join(big) }}", error="join would build"),
    case("the format filter's width", text="{{ '%0100000000d' | format(1) }}", error="the width of"),
    case("sum concatenating lists", text="{{ [[0] * 60000, [0] * 60000] | sum(start=[]) }}", error="sum would build"),
    case("tojson's indent", text="{{ tags | tojson(indent=100000000) }}", error="tojson(indent=100000000)"),
    case("a filter with a size argument", text="{{ [1] | batch(100000000, 0) | list }}",
         error="the filter 'batch' is not allowed"),
    case("indent", text="{{ big | indent(100000) }}", error="the filter 'indent' is not allowed"),
    case("a filter that renders differently each time", text="{{ tags | random }}",
         error="the filter 'random' is not allowed"),
    case("a padding method", text="{{ 'x'.ljust(100000000) }}", error="access to attribute 'ljust' of 'str'"),
    case("str.format", text="{{ '{:>100000000}'.format(1) }}", error="access to attribute 'format' of 'str'"),
    case("a method of a number", text="{{ (1).to_bytes(100000000, 'big') }}", error="attribute 'to_bytes'"),
    case("a float overflow", text="{{ 2.0 ** 100000 }}", error="cannot render"),
], ids=case_name)
def test_a_template_bomb_is_a_template_error_naming_its_field(c):
    started = time.process_time()  # work done here, not wall time (other tests share the cores)
    with pytest.raises(TemplateError) as raised:
        render(c.text)
    assert c.error in str(raised.value)
    assert raised.value.path == ("container", "args", 0)
    assert len(str(raised.value)) < 600  # a long template is quoted shortened
    assert time.process_time() - started < 1.0  # refused before the work, not after it


def test_a_template_that_runs_past_its_time_budget_is_refused_within_the_budget():
    started = time.process_time()  # work done here, not wall time (other tests share the cores)
    with pytest.raises(TemplateError, match="the templates took longer than the time budget of 0.2 s"):
        with time_budget(0.2):
            render("{% for i in range(10000) %}{% if ([0] * 60000) == ([1] * 60000) %}{% endif %}{% endfor %}")
    assert time.process_time() - started < 1.0


def test_all_the_templates_of_an_op_share_one_time_budget():
    spec = op("train").params(n=1).args(*["{{ n }}"] * 5).build()
    errors: list[TemplateError] = []
    with time_budget(-1.0):
        render_spec(spec, GLOBS, errors)
    assert [e.path for e in errors] == [("container", "args", i) for i in range(5)]
    assert all("took longer than the time budget" in e.message for e in errors)
    assert render_spec(spec, GLOBS).container.args == ["1"] * 5  # a new budget for the next op


@pytest.mark.parametrize("error", [RecursionError, MemoryError, KeyError, RuntimeError, SyntaxError])
def test_any_failure_while_rendering_is_a_template_error_never_a_handler_bug(monkeypatch, error):
    def fail(*args):
        raise error("boom")
    monkeypatch.setattr(template_sandbox, "binop", fail)
    with pytest.raises(TemplateError) as raised:
        render_text("{{ n + 1 }}", {"n": 1}, ("queue",))
    assert raised.value.path == ("queue",)


def test_the_same_bounds_hold_for_a_templated_queue():
    with pytest.raises(TemplateError, match="queue: value too large"):
        render_text("{{ 'a' * 10**8 }}", {}, ("queue",))


def test_a_spec_without_templates_is_not_touched_by_the_bounds():
    spec = op("a").args("x" * 60000).build()
    assert render_spec(msgspec.structs.replace(spec), GLOBS).container.args == ["x" * 60000]
