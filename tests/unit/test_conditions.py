"""The condition evaluator (rules.conditions): what a condition may say, and that no condition can burn
CPU or memory on admission's event loop: every bomb, and every failure of any kind, is a ConditionError
with a readable message."""
from __future__ import annotations

import time

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.rules import conditions
from opsched.rules.conditions import ConditionError, evaluate
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, case, case_name, op, submit
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import queues

VALUES = {"lr": 0.01, "epochs": 20, "model": "resnet", "layers": [1, 2, 3], "big": "x" * 60000}


@pytest.mark.parametrize("c", [
    case("a comparison over params", text="{{ lr > 0.001 and epochs <= 100 }}", out=True),
    case("params. and inputs. prefixes name the same values", text="{{ params.lr < 0.1 or inputs.epochs > 50 }}",
         out=True),
    case("membership in a list literal", text="{{ model in ['resnet', 'vit'] }}", out=True),
    case("arithmetic and a conditional expression", text="{{ (epochs * 2 if lr < 1 else 0) == 40 }}", out=True),
    case("a bare expression without braces", text="not (epochs > 10)", out=False),
    case("a power within the bound", text="2 ** 4095 > 0", out=True),
    case("a repeat within the bound", text="'ab' * 30000 != ''", out=True),
    case("one to any power is small", text="1 ** 10**100 == 1", out=True),
    case("a negative power is a float", text="2 ** -10**9", out=0.0),
    case("a %-format within the bound", text="'%.2f' % lr == '0.01'", out=True),
], ids=case_name)
def test_a_condition_evaluates_over_the_op_s_values(c):
    assert evaluate(c.text, VALUES) == c.out


@pytest.mark.parametrize("c", [
    case("nested powers are refused before they are computed", text="(((10**64)**64)**64)**64",
         error="value too large: <an integer of 213 bits> ** 64 would have 13569 bits (at most 4096)"),
    case("a power one bit past the bound is refused", text="2 ** 4096", error="would have 4097 bits"),
    case("a huge exponent is refused", text="10 ** 100000", error="value too large: 10 ** 100000"),
    case("a product of big integers is refused", text="(10**700) * (10**700)", error="bits (at most 4096)"),
    case("a string repeat is refused", text="'a' * 10**8",
         error="value too large: 'a' * 100000000 would have 100000000 characters and items (at most 65536)"),
    case("a list repeat is refused", text="[0] * 10**7", error="[0] * 10000000 would have 10000000"),
    case("the issue's bomb: a billion characters", text='{{ "a" * 10**9 }}',
         error="value too large: 'a' * 1000000000 would have 1000000000 characters and items (at most 65536)"),
    case("a factor that would kill admission", text='{{ "a" * 10**100 }}', error="value too large"),
    case("a repeat with the count first is refused", text="10**8 * 'a'", error="value too large"),
    case("a repeat of a nested list counts what is inside", text="[[0] * 100] * 1000",
         error="would have 101000 characters and items"),
    case("string concatenation past the bound is refused", text="big + big", error="would have 120000"),
    case("a param repeated past the bound is refused", text="layers * 30000", error="would have 90000"),
    case("a list literal of big values is refused", text="[big, big] == []", error="a list literal has more than"),
    case("a %-format width is bounded", text="'%0999999999d' % 1",
         error="the width of '%0999999999d' would have 999999999 characters (at most 1000)"),
    case("a %-format star width is refused", text="'%*d' % (10**9, 1)", error="a '*' width is not allowed"),
    case("a shift is not an operator conditions have", text="1 << 10**9",
         error="the operator LShift is not allowed in a condition"),
    case("a huge integer literal is refused", text="9" * 4000, error="value too large: a literal is an integer"),
    case("a condition longer than the bound is refused", text="1 + " * 1200 + "1",
         error="condition too long: 4801 characters (at most 4096)"),
    case("deep unary nesting is refused", text="-" * 1500 + "1", error="expression nested deeper than 32 levels"),
    case("deep not nesting is refused", text="not " * 100 + "True", error="expression nested deeper than 32 levels"),
    case("a long left-nested chain is refused", text="1" + " + 1" * 40, error="nested deeper than 32 levels"),
    case("deep parentheses are refused", text="(" * 300 + "1" + ")" * 300, error="too many nested parentheses"),
    case("deep list nesting is refused", text="[" * 100 + "]" * 100, error="nested deeper than 32 levels"),
    case("too many parts are refused", text="[" + ",".join(["1"] * 1500) + "]",
         error="expression too long: more than 1000 parts"),
    case("a long comparison chain is refused", text="1 < " * 1000 + "2", error="more than 1000 parts"),
    case("a division by zero", text="1 / 0", error="division by zero"),
    case("a float overflow", text="2.0 ** 10**6", error="cannot evaluate"),
    case("a type error", text="'a' + 1", error="can only concatenate str"),
    case("a call", text="__import__('os').system('x')", error="Call is not allowed"),
    case("an unknown name lists the known ones", text="lrr > 1", error="unknown name 'lrr'; known: big, epochs"),
    case("a syntax error", text="{{ lr > }}", error="cannot parse"),
    case("a null byte", text="lr\x00", error="cannot parse"),
    case("a comprehension", text="[x for x in layers]", error="ListComp is not allowed"),
], ids=case_name)
def test_a_bad_or_hostile_condition_is_a_condition_error_with_a_readable_message(c):
    started = time.process_time()  # the work this process did, not the wall time (other tests share the cores)
    with pytest.raises(ConditionError) as raised:
        evaluate(c.text, VALUES)
    assert c.error in str(raised.value)
    assert len(str(raised.value)) < 400  # the message quotes a long condition shortened
    assert time.process_time() - started < 1.0  # refused before the work, not after it


def test_a_condition_that_runs_past_its_time_budget_is_refused(monkeypatch):
    monkeypatch.setattr(conditions, "MAX_SECONDS", -1.0)
    with pytest.raises(ConditionError, match="the condition took longer than the time budget of -1 s"):
        evaluate("lr > 0", VALUES)


@pytest.mark.parametrize("error", [RecursionError, MemoryError, KeyError, RuntimeError])
def test_any_failure_while_evaluating_is_a_condition_error_never_a_handler_bug(monkeypatch, error):
    def fail(*args):
        raise error("boom")
    monkeypatch.setattr(conditions, "binop", fail)
    with pytest.raises(ConditionError):
        evaluate("lr + 1 > 0", VALUES)


@pytest.mark.parametrize("condition, says", [
    ("{{ (((10**64)**64)**64)**64 }}", "value too large"),
    ("{{ 'a' * 10**8 }}", "value too large"),
    ("{{ " + "-" * 1500 + "1 }}", "nested deeper than"),
], ids=["power", "repeat", "depth"])
def test_the_cli_refuses_a_condition_bomb_with_exit_2_before_publishing(tmp_path, capsys, monkeypatch, condition,
                                                                          says):
    from opsched.bus import logging as oplog
    from opsched.cli import main

    monkeypatch.setattr(oplog, "configure", lambda *a, **k: None)  # logging stays the tests' (not this capture's)
    path = tmp_path / "bomb.yaml"
    path.write_text("version: 1.1\nkind: operation\nname: bomb\n"
                    f"conditions: \"{condition}\"\n"
                    "component:\n  run:\n    kind: job\n    container:\n      image: busybox\n")
    # no NATS: a refused file never reaches the bus
    assert main(["--nats", "nats://127.0.0.1:1", "submit", str(path)]) == 2
    err = capsys.readouterr().err
    assert "conditions:" in err and says in err, err


def test_admission_rejects_the_issues_condition_bomb_at_submit_quickly_and_stays_up():
    """Issue 15: ``{{ "a" * 10**9 }}`` in a condition made admission build a 1 GB string. Now the submit is
    refused (the op rejected ``invalid_condition``, an error event and a dead letter) before the work."""
    spec = msgspec.structs.replace(op("bomb").build(), conditions='{{ "a" * 10**9 }}')
    ctx = Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))
    started = time.process_time()  # work done here, not wall time (other tests share the cores)
    with pytest.raises(InvalidInput) as refused:
        on_submit(submit(spec, op_id="bomb"), ctx, AdmissionState(), queues(("default", 1)))
    assert time.process_time() - started < 1.0
    [rejected] = refused.value.events
    assert rejected.reason == refused.value.reason == "invalid_condition"
    assert "value too large: 'a' * 1000000000" in rejected.message


def test_a_long_condition_is_refused_before_the_parser_even_from_a_deep_stack():
    """CPython 3.11's AST builder, called from a deep stack, fails a 1000-part chain with a SystemError (not a
    RecursionError); the token count refuses it before the parser is called (seen under pytest-xdist)."""
    def deep(n: int) -> str:
        if n:
            return deep(n - 1)
        with pytest.raises(ConditionError) as raised:
            evaluate("1 < " * 1000 + "2", VALUES)
        return str(raised.value)

    assert "more than 1000 parts" in deep(300)
