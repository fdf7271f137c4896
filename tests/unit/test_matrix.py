"""Sweeps: Polyaxon's ``matrix`` (grid and random) expanded into one OpSpec per combination."""
from __future__ import annotations

import argparse
import textwrap

import pytest

from opsched import cli
from opsched.polyaxonfile import (
    SpecError,
    batch_id,
    expand_matrix,
    load_polyaxonfile_batch,
    parse_polyaxonfile,
    parse_polyaxonfile_batch,
)
from tests.builders import case, case_name

SWEEP = """
version: 1.1
kind: operation
name: sweep
matrix:
  kind: grid
  concurrency: 2
  params:
    lr: {kind: choice, value: [0.1, 0.01]}
    layers: {kind: range, value: [1, 4, 1]}
params:
  epochs: 3
cache: {disable: true}
component:
  inputs:
    - {name: lr, type: float}
    - {name: layers, type: int}
    - {name: epochs, type: int}
  run:
    kind: job
    container:
      image: python:3.11-slim
      command: ["sh", "-c", "sleep 1"]
      resources: {limits: {nvidia.com/gpu: 1}}
"""


def grid(**params) -> dict:
    return {"kind": "grid", "params": params}


def errors(matrix: dict) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        expand_matrix(matrix)
    return {e.loc: e.msg for e in info.value.errors}


def batch_errors(text: str, **kwargs) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        parse_polyaxonfile_batch(textwrap.dedent(text), **kwargs)
    return {e.loc: e.msg for e in info.value.errors}


# --- values of one param ----------------------------------------------------------------------

VALUES = [
    case("choice gives its list as it is", param={"kind": "choice", "value": [1, "a", {"x": 1}]},
         values=[1, "a", {"x": 1}]),
    case("range excludes its stop and keeps ints", param={"kind": "range", "value": [1, 10, 3]},
         values=[1, 4, 7]),
    case("range with a float step gives tidy floats", param={"kind": "range", "value": [0, 0.5, 0.1]},
         values=[0.0, 0.1, 0.2, 0.3, 0.4]),
    case("range accepts a mapping", param={"kind": "range", "value": {"start": 0, "stop": 3, "step": 1}},
         values=[0, 1, 2]),
    case("range accepts a colon string", param={"kind": "range", "value": "2:8:2"}, values=[2, 4, 6]),
    case("linspace includes both ends", param={"kind": "linspace", "value": [0, 1, 5]},
         values=[0.0, 0.25, 0.5, 0.75, 1.0]),
    case("linspace of one value is its start", param={"kind": "linspace", "value": "1:2:1"}, values=[1.0]),
    case("logspace is ten to the linspace", param={"kind": "logspace", "value": [-3, -1, 3]},
         values=[0.001, 0.01, 0.1]),
    case("logspace takes an optional base", param={"kind": "logspace", "value": [0, 3, 4, 2]},
         values=[1.0, 2.0, 4.0, 8.0]),
    case("geomspace is a geometric progression", param={"kind": "geomspace", "value": [1, 1000, 4]},
         values=[1.0, 10.0, 100.0, 1000.0]),
]


@pytest.mark.parametrize("c", VALUES, ids=case_name)
def test_discrete_params_give_their_values(c):
    assert [combo["p"] for combo in expand_matrix(grid(p=c.param))] == c.values


# --- grid -------------------------------------------------------------------------------------

def test_a_grid_is_the_product_of_its_params_with_the_first_param_slowest():
    combos = expand_matrix(grid(a={"kind": "choice", "value": [1, 2]},
                                b={"kind": "choice", "value": ["x", "y", "z"]}))
    assert combos == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"},
                      {"a": 2, "b": "x"}, {"a": 2, "b": "y"}, {"a": 2, "b": "z"}]


def test_num_runs_keeps_the_first_combinations_of_a_grid():
    combos = expand_matrix({**grid(a={"kind": "range", "value": [0, 10, 1]}), "numRuns": 3})
    assert combos == [{"a": 0}, {"a": 1}, {"a": 2}]


# --- random -----------------------------------------------------------------------------------

RANDOM = {"kind": "random", "numRuns": 5, "seed": 7, "params": {
    "lr": {"kind": "loguniform", "value": [-7, -2]},
    "dropout": {"kind": "uniform", "value": [0.1, 0.5]},
    "momentum": {"kind": "normal", "value": [0.9, 0.01]},
    "batch": {"kind": "choice", "value": [16, 32, 64]},
    "act": {"kind": "pchoice", "value": [["relu", 0.5], ["gelu", 0.5]]},
}}


def test_a_random_search_with_a_seed_is_reproducible():
    first, again = expand_matrix(RANDOM), expand_matrix(RANDOM)
    assert first == again and len(first) == 5
    assert expand_matrix({**RANDOM, "seed": 8}) != first


def test_a_random_search_makes_num_runs_distinct_combinations_within_their_laws():
    combos = expand_matrix(RANDOM)
    assert len({tuple(sorted(c.items())) for c in combos}) == 5
    for c in combos:
        assert 0.1 <= c["dropout"] < 0.5 and 0.0009 < c["lr"] < 0.14  # exp(-7), exp(-2)
        assert c["batch"] in (16, 32, 64) and c["act"] in ("relu", "gelu")


def test_a_random_search_over_a_small_discrete_space_makes_each_combination_once():
    matrix = {"kind": "random", "numRuns": 50, "seed": 1,
              "params": {"a": {"kind": "choice", "value": [1, 2]}, "b": {"kind": "range", "value": [0, 3, 1]}}}
    combos = expand_matrix(matrix)
    assert sorted((c["a"], c["b"]) for c in combos) == [(a, b) for a in (1, 2) for b in (0, 1, 2)]


def test_quantized_distributions_are_multiples_of_q():
    matrix = {"kind": "random", "numRuns": 4, "seed": 3,
              "params": {"q": {"kind": "quniform", "value": [0, 100, 5]}}}
    assert all(c["q"] % 5 == 0 for c in expand_matrix(matrix))


# --- errors -----------------------------------------------------------------------------------

ERRORS = [
    case("a grid refuses a distribution", matrix=grid(lr={"kind": "uniform", "value": [0, 1]}),
         loc="matrix.params.lr.kind", msg="is a distribution"),
    case("a range whose stop is not above its start", matrix=grid(lr={"kind": "range", "value": [5, 1, 1]}),
         loc="matrix.params.lr.value", msg="stop must be greater than start"),
    case("a range with a zero step", matrix=grid(lr={"kind": "range", "value": [0, 1, 0]}),
         loc="matrix.params.lr.value", msg="step must be > 0"),
    case("a linspace with too few numbers", matrix=grid(lr={"kind": "linspace", "value": [0, 1]}),
         loc="matrix.params.lr.value", msg="expected 3 numbers"),
    case("a linspace with a fractional num", matrix=grid(lr={"kind": "linspace", "value": [0, 1, 2.5]}),
         loc="matrix.params.lr.value", msg="whole number"),
    case("a choice that is not a list", matrix=grid(lr={"kind": "choice", "value": 3}),
         loc="matrix.params.lr.value", msg="non-empty list"),
    case("a value that is not a number", matrix=grid(lr={"kind": "range", "value": "a:b:c"}),
         loc="matrix.params.lr.value", msg="must be a number"),
    case("an unknown param kind", matrix=grid(lr={"kind": "sometimes", "value": [1]}),
         loc="matrix.params.lr.kind", msg="is unknown"),
    case("a param without a value", matrix=grid(lr={"kind": "choice"}),
         loc="matrix.params.lr.value", msg="field required"),
    case("a pchoice whose probabilities do not sum to one",
         matrix={"kind": "random", "numRuns": 2, "params": {"a": {"kind": "pchoice", "value": [["x", 0.2]]}}},
         loc="matrix.params.a.value", msg="sum to 1"),
    case("a random search without numRuns", matrix={"kind": "random", "params": {"a": {"kind": "choice",
                                                                                     "value": [1]}}},
         loc="matrix.numRuns", msg="needs numRuns"),
    case("a concurrency below one", matrix={**grid(a={"kind": "choice", "value": [1]}), "concurrency": 0},
         loc="matrix.concurrency", msg="greater than or equal to 1"),
    case("a matrix kind that needs a tuner", matrix={"kind": "hyperband", "params": {}},
         loc="matrix.kind", msg="needs a tuner, which opsched does not have yet; use grid, random or mapping"),
    case("early stopping", matrix={**grid(a={"kind": "choice", "value": [1]}), "earlyStopping": []},
         loc="matrix.earlyStopping", msg="not supported"),
    case("a grid of more than 1000 operations", matrix=grid(a={"kind": "range", "value": [0, 2000, 1]}),
         loc="matrix", msg="at most 1000"),
    case("a matrix without params", matrix={"kind": "grid", "params": {}},
         loc="matrix.params", msg="at least one param"),
]


@pytest.mark.parametrize("c", ERRORS, ids=case_name)
def test_invalid_matrices_are_refused_with_the_field_at_fault(c):
    found = errors(c.matrix)
    assert c.loc in found, found
    assert c.msg in found[c.loc]


# --- whole files ------------------------------------------------------------------------------

def test_a_sweep_file_gives_one_spec_per_combination_with_its_params_and_inputs():
    specs = parse_polyaxonfile_batch(SWEEP, salt="s")
    assert [(s.params["lr"], s.params["layers"]) for s in specs] == [
        (0.1, 1), (0.1, 2), (0.1, 3), (0.01, 1), (0.01, 2), (0.01, 3)]
    assert all(s.params["epochs"] == 3 and s.inputs["lr"] == s.params["lr"] for s in specs)


def test_every_op_of_a_sweep_carries_the_batch_id_the_concurrency_and_the_cache_as_written():
    specs = parse_polyaxonfile_batch(SWEEP, salt="s")
    assert {s.batch for s in specs} == {batch_id(SWEEP, None, "s")}
    assert all(s.batch_concurrency == 2 and s.cache.disable is True for s in specs)
    [batch] = {s.batch for s in specs}
    assert batch.startswith("sweep-") and len(batch) == len("sweep-") + 8


def test_the_batch_id_is_deterministic_for_a_salt_and_differs_without_one():
    assert parse_polyaxonfile_batch(SWEEP, salt="a")[0].batch == parse_polyaxonfile_batch(SWEEP, salt="a")[0].batch
    assert parse_polyaxonfile_batch(SWEEP, salt="a")[0].batch != parse_polyaxonfile_batch(SWEEP, salt="b")[0].batch
    assert parse_polyaxonfile_batch(SWEEP)[0].batch != parse_polyaxonfile_batch(SWEEP)[0].batch


def test_a_file_without_a_matrix_is_one_op_and_no_batch():
    text = SWEEP[:SWEEP.index("matrix:")] + SWEEP[SWEEP.index("params:\n  epochs"):]
    text = text.replace("params:\n  epochs: 3", "params:\n  epochs: 3\n  lr: 0.1\n  layers: 2")
    [spec] = parse_polyaxonfile_batch(text)
    assert spec.batch is None and spec.batch_concurrency is None and spec.params["layers"] == 2


def test_a_component_file_may_carry_a_matrix_at_its_top_level():
    text = """
    kind: component
    name: c
    matrix: {kind: grid, params: {x: {kind: choice, value: [a, b]}}}
    run: {kind: job, container: {image: busybox}}
    """
    assert [s.params for s in parse_polyaxonfile_batch(textwrap.dedent(text))] == [{"x": "a"}, {"x": "b"}]


def test_the_single_op_parser_refuses_a_sweep():
    with pytest.raises(SpecError) as info:
        parse_polyaxonfile(SWEEP)
    [error] = info.value.errors
    assert error.loc == "matrix" and "load_polyaxonfile_batch" in error.msg and error.line == 5


def test_a_swept_value_of_the_wrong_type_for_its_input_is_located_at_the_matrix():
    found = batch_errors(SWEEP.replace("value: [1, 4, 1]", "value: [1, 2, 0.5]"))
    assert "matrix.params.layers.value" in found and "type int" in found["matrix.params.layers.value"]


def test_a_swept_param_that_is_not_an_input_is_refused():
    found = batch_errors(SWEEP.replace("layers: {kind", "depth: {kind"))
    assert "is not an input" in found["matrix.params.depth.value"]


def test_a_param_may_not_be_both_fixed_and_swept_nor_overridden():
    found = batch_errors(SWEEP.replace("epochs: 3", "epochs: 3\n  lr: 0.5"))
    assert "either fixed or swept" in found["matrix.params.lr"]
    found = batch_errors(SWEEP, overrides={"params": {"layers": 9}})
    assert "swept by the matrix" in found["overrides.params.layers"]


def test_matrix_errors_and_other_errors_are_reported_together_with_lines():
    text = SWEEP.replace("concurrency: 2", "concurrency: -1").replace("name: sweep", "name: bad name!")
    with pytest.raises(SpecError) as info:
        parse_polyaxonfile_batch(text)
    found = {e.loc: e for e in info.value.errors}
    assert set(found) == {"name", "matrix.concurrency"}
    assert found["matrix.concurrency"].line == 7


def test_a_matrix_inside_the_inline_component_is_refused():
    text = SWEEP.replace("component:\n  inputs:", "component:\n  matrix: {kind: grid}\n  inputs:")
    found = batch_errors(text)
    assert "belongs to the operation" in found["component.matrix"]


def test_load_polyaxonfile_batch_reads_a_file(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    specs = load_polyaxonfile_batch(path, {"queue": "fast"}, salt="x")
    assert len(specs) == 6 and all(s.queue == "fast" for s in specs)


# --- the CLI ----------------------------------------------------------------------------------

class FakeClient:
    def __init__(self) -> None:
        self.submitted: list = []

    async def submit(self, spec, op_id=None, requested_by="sdk", traceparent=None):
        op_id = op_id or f"op{len(self.submitted)}"
        self.submitted.append((op_id, spec))
        return op_id

    async def queue_config(self):
        return None  # none in force yet: the CLI leaves routing (and refusing) to admission

    async def close(self) -> None:
        pass


def submit_args(path, **kwargs) -> argparse.Namespace:
    defaults = dict(file=str(path), param=[], queue=None, priority=None, id=None, wait=False, nats=None,
                    dry_run=False, output="yaml")
    return argparse.Namespace(**{**defaults, **kwargs})


@pytest.fixture
def fake_client(monkeypatch) -> FakeClient:
    client = FakeClient()

    async def connect(args):
        return client
    monkeypatch.setattr(cli, "_connect", connect)
    return client


def test_submit_of_a_sweep_submits_every_op_and_prints_each_id_then_the_batch_id(tmp_path, fake_client, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    assert cli.cmd_submit(submit_args(path)) == 0
    lines = capsys.readouterr().out.split()
    assert len(fake_client.submitted) == 6
    assert lines[:6] == [op_id for op_id, _ in fake_client.submitted]
    assert lines[6] == fake_client.submitted[0][1].batch and lines[6].startswith("sweep-")


def test_submit_of_a_sweep_with_an_id_numbers_its_ops_and_keeps_its_batch_id(tmp_path, fake_client, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    cli.cmd_submit(submit_args(path, id="exp1"))
    cli.cmd_submit(submit_args(path, id="exp1"))
    ids = [op_id for op_id, _ in fake_client.submitted]
    assert ids == [f"exp1-{i}" for i in range(6)] * 2
    assert len({spec.batch for _, spec in fake_client.submitted}) == 1


def test_submit_of_an_invalid_sweep_exits_2_and_submits_nothing(tmp_path, fake_client, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.replace("value: [1, 4, 1]", "value: [4, 1, 1]"))
    assert cli.cmd_submit(submit_args(path)) == cli.EXIT_INVALID
    assert "matrix.params.layers.value" in capsys.readouterr().err and not fake_client.submitted
