"""`opsched ops`'s table: REASON cut to the terminal's width (never below 30), ``--wide`` (no cut, PROJECT USER
BATCH), a PARAMS column only when a listed op is a trial of a sweep, and the time columns' formats."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from opsched.view import MIN_REASON, OpsView, clock_text, span_text, table
from tests.builders import T0, failed, op, submitted


def view_of(*events) -> OpsView:
    view = OpsView()
    for event in events:
        view.fold(event)
    return view


LONG = "r" * 300
NOW = T0 + timedelta(minutes=5)


def test_reason_is_cut_to_the_width_of_the_terminal():
    view = view_of(submitted(op("train").build()), failed(reason=LONG))
    for width in (150, 200):
        lines = table(list(view.rows.values()), width=width, now=NOW).splitlines()
        assert len(lines[1]) == width and lines[1].endswith("r…")


def test_reason_keeps_at_least_30_characters_on_a_narrow_terminal():
    view = view_of(submitted(op("train").build()), failed(reason=LONG))
    line = table(list(view.rows.values()), width=20, now=NOW).splitlines()[1]
    assert line.endswith(" " + "r" * (MIN_REASON - 1) + "…")


def test_wide_never_cuts_and_adds_project_user_and_batch():
    spec = msgspec.structs.replace(op("train").project("vision").build(), batch="b-9")
    view = view_of(submitted(spec, by="alice"), failed(reason=LONG))
    head, line = table(list(view.rows.values()), wide=True, width=80, now=NOW).splitlines()
    assert head.split()[-4:] == ["PROJECT", "USER", "BATCH", "REASON"]
    assert line.endswith("vision   alice  b-9    " + LONG)


def trial(op_id: str, lr: float):
    spec = msgspec.structs.replace(op("sweep").params(lr=lr, bs=64).build(), batch="b-1")
    return submitted(spec, op_id=op_id)


def test_a_params_column_shows_the_trial_params_only_when_a_trial_is_listed():
    view = view_of(trial("s-0", 0.1), trial("s-1", 0.01), submitted(op("alone").params(lr=1).build(), op_id="x"))
    lines = table(list(view.rows.values()), width=200, now=NOW).splitlines()
    assert "PARAMS" in lines[0].split()
    col = lines[0].index("PARAMS")
    assert [line[col:].split()[0] for line in lines[1:]] == ["lr=0.1", "lr=0.01", "-"]
    alone = view_of(submitted(op("alone").params(lr=1).build(), op_id="x"))
    assert "PARAMS" not in table(list(alone.rows.values()), width=200, now=NOW)


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (42, "42s"), (192, "3m12s"), (7500, "2h5m"),
                                           (4 * 86400 + 5, "4d"), (-3, "0s")])
def test_spans(seconds, text):
    assert span_text(seconds) == text


def test_started_is_a_local_clock_today_and_a_date_before():
    now = datetime(2026, 3, 10, 15, 0, tzinfo=timezone.utc)
    today = now - timedelta(minutes=30)
    assert clock_text(today, now) == today.astimezone().strftime("%H:%M")
    assert clock_text(now - timedelta(days=3), now) == (now - timedelta(days=3)).astimezone().strftime("%m-%d %H:%M")
    assert clock_text(None, now) == "-"


def test_one_trial_listed_alone_still_shows_what_sets_it_apart_in_its_sweep():
    view = view_of(trial("s-0", 0.1), trial("s-1", 0.01))
    every = list(view.rows.values())
    one = [r for r in every if r.op_id == "s-1"]
    lines = table(one, width=200, now=NOW, among=every).splitlines()
    assert "PARAMS" in lines[0] and "lr=0.01" in lines[1]
