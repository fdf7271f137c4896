"""Sweeps beyond grid and random: ``kind: mapping`` (an explicit list of trials), the ``daterange`` and
``datetimerange`` params of Polyaxon's backfills, the kinds that need a tuner (refused, saying so), and the
distinct names of a sweep's trials (``<name>-<iteration>``)."""
from __future__ import annotations

import math
import textwrap
from datetime import date, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsched.polyaxonfile import (
    MAX_BATCH,
    SpecError,
    expand_matrix,
    load_polyaxonfile_batch,
    parse_polyaxonfile_batch,
)
from opsched.polyaxonfile.models_matrix import MAX_VALUES
from opsched.proto import k8s_names
from opsched.proto.limits import MAX_NAME_CHARS
from opsched.rules.templating import Globals, render_spec
from opsched.rules.trial_names import trial_base, trial_name
from opsched.services.cache.fingerprint import fingerprint
from tests.builders import case, case_name
from tests.unit.polyaxonfile_texts import EXAMPLES

MAPPING = """
version: 1.1
kind: operation
name: retrain
matrix:
  kind: mapping
  concurrency: 2
  values:
    - {lr: 0.1, dataset: eu}
    - {lr: 0.01, dataset: us}
    - {lr: 0.001}
params:
  epochs: 3
component:
  inputs:
    - {name: lr, type: float}
    - {name: dataset, type: str, value: all}
    - {name: epochs, type: int}
  run:
    kind: job
    container:
      image: python:3.11-slim
      command: [sh, -c, "echo {{ globals.name }} lr={{ lr }} on {{ dataset }}"]
"""

BACKFILL = """
version: 1.1
kind: operation
name: backfill
matrix:
  kind: grid
  concurrency: 2
  params:
    day: {kind: daterange, value: [2024-01-30, 2024-02-02, 1]}
component:
  inputs:
    - {name: day, type: date}
  run:
    kind: job
    container: {image: busybox, command: [sh, -c, "echo rows of {{ day }}"]}
"""


def batch(text: str, **kwargs) -> list:
    return parse_polyaxonfile_batch(textwrap.dedent(text), salt="s", **kwargs)


def batch_errors(text: str, **kwargs) -> dict[str, tuple[str, int | None]]:
    with pytest.raises(SpecError) as info:
        batch(text, **kwargs)
    return {e.loc: (e.msg, e.line) for e in info.value.errors}


def matrix_errors(matrix: dict) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        expand_matrix(matrix)
    return {e.loc: e.msg for e in info.value.errors}


def grid(**params) -> dict:
    return {"kind": "grid", "params": params}


def rendered(spec):
    return render_spec(spec, Globals(uuid="u", name=spec.name, project_name=spec.project)).container


def rendered_command(spec) -> str:
    return rendered(spec).command[2]


def rendered_args(spec) -> str:
    return rendered(spec).args[0]


# --- kind: mapping ----------------------------------------------------------------------------

def test_a_mapping_makes_one_trial_per_entry_in_order_with_the_concurrency_of_grid_and_random():
    specs = batch(MAPPING)
    assert [s.params for s in specs] == [{"epochs": 3, "lr": 0.1, "dataset": "eu"},
                                         {"epochs": 3, "lr": 0.01, "dataset": "us"},
                                         {"epochs": 3, "lr": 0.001}]
    assert [s.inputs["dataset"] for s in specs] == ["eu", "us", "all"]  # an entry may leave a param out
    assert [s.iteration for s in specs] == [0, 1, 2]
    assert {s.batch_concurrency for s in specs} == {2} and len({s.batch for s in specs}) == 1


def test_a_date_written_in_a_mapping_reaches_the_trial_as_the_iso_string_polyaxon_passes():
    text = MAPPING.replace("{lr: 0.001}", "{lr: 0.001, dataset: 2024-01-31}").replace(
        "{lr: 0.01, dataset: us}", "{lr: 0.01, dataset: 2024-01-31 06:00:00}")
    assert [s.params["dataset"] for s in batch(text)] == ["eu", "2024-01-31T06:00:00", "2024-01-31"]


MAPPING_ERRORS = [
    case("an empty list", old="values:\n    - {lr: 0.1, dataset: eu}\n    - {lr: 0.01, dataset: us}\n"
                              "    - {lr: 0.001}", new="values: []",
         loc="matrix.values", msg="at least one entry", line=8),
    case("an entry that is not a mapping", old="- {lr: 0.001}", new="- 0.001",
         loc="matrix.values.2", msg="expected a mapping", line=11),
    case("an invalid param name", old="{lr: 0.001}", new="{lr: 0.001, 'a b': 1}",
         loc="matrix.values.2.a b", msg="invalid param name", line=11),
    case("a value of the wrong type for its input", old="{lr: 0.001}", new="{lr: fast}",
         loc="matrix.values.2.lr", msg="expects a value of type float", line=11),
    case("a param that is not an input", old="{lr: 0.001}", new="{lr: 0.001, depth: 3}",
         loc="matrix.values.2.depth", msg="is not an input", line=11),
    case("a param both fixed and mapped", old="epochs: 3", new="epochs: 3\n  dataset: eu",
         loc="matrix.values.0.dataset", msg="either fixed or swept", line=9),
    case("earlyStopping", old="concurrency: 2", new="concurrency: 2\n  earlyStopping: [{kind: failure_early_stopping}]",
         loc="matrix.earlyStopping", msg="needs a tuner watching the trials' metrics", line=8),
    case("a key of grid and random", old="concurrency: 2", new="concurrency: 2\n  numRuns: 2",
         loc="matrix.numRuns", msg="unknown field", line=8),
    case("a concurrency below one", old="concurrency: 2", new="concurrency: 0",
         loc="matrix.concurrency", msg="greater than or equal to 1", line=7),
]


@pytest.mark.parametrize("c", MAPPING_ERRORS, ids=case_name)
def test_a_bad_mapping_is_refused_at_the_field_and_line_at_fault(c):
    found = batch_errors(MAPPING.replace(c.old, c.new))
    assert c.loc in found, found
    assert c.msg in found[c.loc][0] and found[c.loc][1] == c.line


def test_overrides_may_not_name_a_mapped_param():
    found = batch_errors(MAPPING, overrides={"params": {"dataset": "eu"}})
    assert "swept by the matrix" in found["overrides.params.dataset"][0]


def test_a_required_input_an_entry_leaves_out_is_refused_naming_the_trial():
    found = batch_errors(MAPPING.replace("{lr: 0.001}", "{dataset: eu}"))
    msg, line = found["component.inputs.0"]
    assert "input 'lr' is required" in msg and '(in trial 2: dataset="eu")' in msg and line == 16


def test_every_bad_entry_is_reported_at_once():
    found = batch_errors(MAPPING.replace("{lr: 0.1, dataset: eu}", "{lr: x}").replace("{lr: 0.001}", "{lr: y}"))
    assert set(found) == {"matrix.values.0.lr", "matrix.values.2.lr"}


def test_a_mapping_of_more_than_max_batch_entries_is_refused():
    found = matrix_errors({"kind": "mapping", "values": [{"i": i} for i in range(MAX_BATCH + 1)]})
    assert f"at most {MAX_BATCH}" in found["matrix.values"]


def test_a_mapping_without_values_says_what_they_hold():
    assert matrix_errors({"kind": "mapping", "concurrency": 2}) == {
        "matrix.values": "a mapping needs values: a list of {param: value, ...}, one trial each"}


@pytest.mark.parametrize("kind", ["hyperband", "bayes", "hyperopt", "iterative", "tuner"])
def test_the_kinds_that_need_a_tuner_are_refused_saying_why(kind):
    found = matrix_errors({"kind": kind, "params": {"a": {"kind": "choice", "value": [1]}}})
    assert found == {"matrix.kind": f"kind {kind!r} needs a tuner, which opsched does not have yet; "
                                    "use grid, random or mapping"}


def test_an_unknown_kind_lists_the_three_kinds_opsched_runs():
    assert matrix_errors({"kind": "sometimes"}) == {
        "matrix.kind": "kind 'sometimes' is unknown; expected 'grid', 'random' or 'mapping'"}


# --- daterange and datetimerange ----------------------------------------------------------------

RANGES = [
    case("a daterange steps in days and excludes its stop",
         param={"kind": "daterange", "value": ["2024-01-30", "2024-02-02", 1]},
         values=["2024-01-30", "2024-01-31", "2024-02-01"]),
    case("a daterange step of several days",
         param={"kind": "daterange", "value": {"start": "2024-01-01", "stop": "2024-01-10", "step": 4}},
         values=["2024-01-01", "2024-01-05", "2024-01-09"]),
    case("a daterange takes YAML's dates, and a datetime at midnight as its date",
         param={"kind": "daterange", "value": [date(2024, 2, 28), "2024-03-01 00:00", 1]},
         values=["2024-02-28", "2024-02-29"]),
    case("a datetimerange steps in seconds and excludes its stop",
         param={"kind": "datetimerange", "value": ["2024-01-31 22:00", "2024-02-01T01:00:00", 3600]},
         values=["2024-01-31T22:00:00", "2024-01-31T23:00:00", "2024-02-01T00:00:00"]),
    case("a datetimerange with offsets is in UTC, without one, as Polyaxon passes it",
         param={"kind": "datetimerange", "value": ["2024-01-01T08:00:00+02:00", "2024-01-01T07:00:00Z", 1800]},
         values=["2024-01-01T06:00:00", "2024-01-01T06:30:00"]),
    case("a datetimerange whose step does not divide the range",
         param={"kind": "datetimerange", "value": ["2024-01-01", "2024-01-01 00:00:05", 2]},
         values=["2024-01-01T00:00:00", "2024-01-01T00:00:02", "2024-01-01T00:00:04"]),
]


@pytest.mark.parametrize("c", RANGES, ids=case_name)
def test_a_date_range_gives_iso_strings(c):
    assert [combo["p"] for combo in expand_matrix(grid(p=c.param))] == c.values


def test_a_random_search_draws_distinct_dates_from_a_daterange():
    matrix = {"kind": "random", "numRuns": 3, "seed": 4,
              "params": {"day": {"kind": "daterange", "value": ["2024-01-01", "2024-01-31", 1]}}}
    days = [c["day"] for c in expand_matrix(matrix)]
    assert len(set(days)) == 3 and all("2024-01-01" <= d < "2024-01-31" for d in days)
    assert days == [c["day"] for c in expand_matrix(matrix)]


def dr(value, kind="daterange") -> dict:
    return grid(p={"kind": kind, "value": value})


RANGE_ERRORS = [
    case("a stop before the start", matrix=dr(["2024-02-02", "2024-01-30", 1]), msg="stop must be after start"),
    case("a stop equal to the start", matrix=dr(["2024-01-30", "2024-01-30", 1]), msg="stop must be after start"),
    case("a zero step", matrix=dr(["2024-01-01", "2024-01-05", 0]), msg="whole number of days >= 1, got 0"),
    case("a negative step", matrix=dr(["2024-01-01T00:00", "2024-01-05T00:00", -60], "datetimerange"),
         msg="whole number of seconds >= 1, got -60"),
    case("a fractional step", matrix=dr(["2024-01-01", "2024-01-05", 1.5]), msg="whole number of days"),
    case("a step that is a boolean", matrix=dr(["2024-01-01", "2024-01-05", True]), msg="whole number of days"),
    case("an impossible date", matrix=dr(["2024-02-30", "2024-03-05", 1]), msg="'2024-02-30' is not a valid date"),
    case("a date with a time", matrix=dr(["2024-01-01 06:00", "2024-01-05", 1]), msg="must be a date 'YYYY-MM-DD'"),
    case("a date as a number", matrix=dr([20240101, "2024-01-05", 1]), msg="must be a date"),
    case("a datetime that is not ISO 8601", matrix=dr(["01/02/2024 10:00", "2024-01-05", 60], "datetimerange"),
         msg="must be an ISO 8601 datetime"),
    case("one end with a UTC offset and one without",
         matrix=dr(["2024-01-01T00:00Z", "2024-01-05T00:00", 60], "datetimerange"), msg="both have a UTC offset"),
    case("the 'a:b:c' string of the numeric ranges", matrix=dr("2024-01-01:2024-01-05:1"),
         msg="as a list or a mapping"),
    case("a missing step", matrix=dr({"start": "2024-01-01", "stop": "2024-01-05"}), msg="missing 'step'"),
    case("too many values", matrix=dr(["2000-01-01", "2040-01-01", 1]), msg=f"at most {MAX_VALUES}"),
]


@pytest.mark.parametrize("c", RANGE_ERRORS, ids=case_name)
def test_a_bad_date_range_is_refused_at_its_value(c):
    found = matrix_errors(c.matrix)
    assert "matrix.params.p.value" in found, found
    assert c.msg in found["matrix.params.p.value"]


def test_a_grid_of_dates_is_bounded_like_any_grid():
    found = matrix_errors(dr(["2020-01-01", "2023-01-01", 1]))
    assert f"at most {MAX_BATCH}" in found["matrix"]


def test_a_backfill_renders_each_day_as_polyaxon_would():
    specs = batch(BACKFILL)
    assert [rendered_command(s) for s in specs] == [f"echo rows of 2024-0{d}" for d in ("1-30", "1-31", "2-01")]


@pytest.mark.parametrize("declared", ["str", None, "datetime"])
def test_a_date_range_must_fill_an_input_of_type_date_as_in_polyaxon(declared):
    text = BACKFILL.replace("type: date}", f"type: {declared}}}" if declared else "}")
    msg, line = batch_errors(text)["matrix.params.day.kind"]
    assert "a daterange fills an input of type date" in msg and "set `type: date`" in msg and line == 9


def test_a_datetimerange_fills_an_input_of_type_datetime():
    text = BACKFILL.replace("kind: daterange, value: [2024-01-30, 2024-02-02, 1]",
                            "kind: datetimerange, value: ['2024-01-30 00:00', '2024-01-30 02:00', 3600]")
    assert "input 'day' has type 'date'" in batch_errors(text)["matrix.params.day.kind"][0]
    specs = batch(text.replace("type: date}", "type: datetime}"))
    assert [s.params["day"] for s in specs] == ["2024-01-30T00:00:00", "2024-01-30T01:00:00"]


# --- the names of a sweep's trials ----------------------------------------------------------------

def test_each_trial_is_named_for_its_iteration_and_templates_see_that_name():
    specs = batch(MAPPING)
    assert [s.name for s in specs] == ["retrain-0", "retrain-1", "retrain-2"]
    assert rendered_command(specs[1]) == "echo retrain-1 lr=0.01 on us"


def test_a_trial_of_an_unnamed_file_is_named_for_the_file(tmp_path):
    path = tmp_path / "nightly.yaml"
    path.write_text(textwrap.dedent(BACKFILL).replace("name: backfill\n", ""))
    assert [s.name for s in load_polyaxonfile_batch(path, salt="s")] == ["nightly-0", "nightly-1", "nightly-2"]


def test_a_long_name_is_cut_the_same_for_every_trial_and_keeps_its_suffix():
    long = "n" * MAX_NAME_CHARS
    specs = batch(BACKFILL.replace("name: backfill", f"name: {long}").replace("2024-02-02", "2024-05-30"))
    assert len(specs) == 121 and specs[-1].name == "n" * (MAX_NAME_CHARS - 4) + "-120"
    assert {trial_base(s.name, s.iteration) for s in specs} == {"n" * (MAX_NAME_CHARS - 4)}


def test_the_name_of_a_trial_changes_neither_its_component_hash_nor_its_cache_fingerprint():
    text = MAPPING.replace("{lr: 0.01, dataset: us}", "{lr: 0.1, dataset: eu}").replace("{{ globals.name }} ", "")
    first, second, _ = batch(text)
    assert first.name != second.name
    assert first.component_hash == second.component_hash and fingerprint(first) == fingerprint(second)


NAME_CHARS = st.text(st.sampled_from("abcXYZ019-_"), min_size=1, max_size=MAX_NAME_CHARS)


@settings(max_examples=200, deadline=None)
@given(base=NAME_CHARS, count=st.integers(1, MAX_BATCH), data=st.data())
def test_trial_names_are_valid_distinct_and_share_their_base(base, count, data):
    iterations = data.draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=5, unique=True))
    names = [trial_name(base, i, count) for i in iterations]
    assert all(k8s_names.op_name(n) is None and n.endswith(f"-{i}") for n, i in zip(names, iterations))
    assert len(set(names)) == len(names)
    assert len({trial_base(n, i) for n, i in zip(names, iterations)}) == 1
    assert trial_base(names[0], iterations[0]) == base[:MAX_NAME_CHARS - len(f"-{count - 1}")]


@settings(max_examples=100, deadline=None)
@given(start=st.dates(date(1990, 1, 1), date(2090, 1, 1)), days=st.integers(1, 400), step=st.integers(1, 40))
def test_a_daterange_is_every_step_from_start_up_to_and_excluding_stop(start, days, step):
    stop = start + timedelta(days=days)
    values = [c["p"] for c in expand_matrix(dr([start.isoformat(), stop.isoformat(), step]))]
    assert len(values) == math.ceil(days / step) and values[0] == start.isoformat()
    assert [date.fromisoformat(v) for v in values] == [start + timedelta(days=i * step) for i in range(len(values))]
    assert date.fromisoformat(values[-1]) < stop


# --- the examples ---------------------------------------------------------------------------------

def test_the_mapping_example_is_three_named_trials_two_at_a_time():
    specs = load_polyaxonfile_batch(EXAMPLES / "polyaxon" / "sweep-mapping.yaml")
    assert [s.name for s in specs] == ["retrain-0", "retrain-1", "retrain-2"]
    assert [s.inputs["region"] for s in specs] == ["eu", "us", "all"] and {s.batch_concurrency for s in specs} == {2}
    assert rendered_args(specs[2]) == "echo retrain-2: lr=0.001 region=all epochs=2; sleep 1"


def test_the_backfill_example_is_one_op_per_day_up_to_its_stop_two_at_a_time():
    specs = load_polyaxonfile_batch(EXAMPLES / "polyaxon" / "backfill-daterange.yaml")
    assert [s.params["day"] for s in specs] == ["2024-01-29", "2024-01-30", "2024-01-31", "2024-02-01"]
    assert {s.batch_concurrency for s in specs} == {2}
    assert not any("nvidia.com/gpu" in s.container.resources.limits for s in specs)
    assert rendered_args(specs[0]) == "echo computing features of 2024-01-29; sleep 1"
