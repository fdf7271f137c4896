"""`opsched up --autoscale [FILE]` (opsched/embedded.py): the file is the queue configuration (default
examples/queues-autoscale.yaml, whose A100 and T4 flavors have pools from zero), and what contradicts the simulated
autoscaler is refused naming the flag."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched import embedded
from opsched.cli import parser
from opsched.localcluster.autoscaling import pools_from
from opsched.rules.queues_file import load_queues


def up(tmp_path: Path, *options: str) -> embedded.Embedded:
    return embedded.Embedded(parser().parse_args(["--data-dir", str(tmp_path), "up", *options]))


def test_without_a_file_the_example_pools_are_the_queue_configuration(tmp_path: Path):
    e = up(tmp_path, "--autoscale")
    assert e.args.queues == embedded.AUTOSCALE_QUEUES
    pools = pools_from(load_queues(embedded.AUTOSCALE_QUEUES))
    assert [(p.name, p.min_nodes, p.max_nodes) for p in pools] == [("a100", 0, 2), ("t4", 0, 3)]
    assert embedded._pools_text(embedded.AUTOSCALE_QUEUES) == "a100 (0..2), t4 (0..3)"


def test_a_file_given_is_the_queue_configuration(tmp_path: Path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(embedded.AUTOSCALE_QUEUES.read_text())
    assert up(tmp_path, "--autoscale", str(mine)).args.queues == mine
    assert up(tmp_path, "--autoscale", str(mine), "--queues", str(mine)).args.queues == mine


def test_without_autoscale_nothing_changes(tmp_path: Path):
    assert up(tmp_path).args.queues == embedded.EXAMPLE_QUEUES


@pytest.mark.parametrize(("options", "named"), [
    (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig"),
    (["--agents", "2"], "--agents"),
    (["--queues", "examples/queues-agents.yaml"], "--queues"),
])
def test_what_contradicts_it_is_refused_naming_the_flag(tmp_path: Path, options: list[str], named: str):
    with pytest.raises(embedded.AutoscaleError, match=named):
        up(tmp_path, "--autoscale", *options)
