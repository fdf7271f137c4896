"""Templates on the bus: an op that arrives without the CLI and cannot render is rejected with the
field, with an error event and a dead-letter copy, and admission keeps serving; the admitted event
carries the rendered command. The CLI refuses such a file (exit 2) and prints dry-run pods."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from opsched.proto.events import ErrorRaised, OperationAdmitted, OperationRejected
from tests.builders import op
from tests.service.test_bad_input import dead_letters

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def test_an_op_on_the_bus_that_cannot_render_is_rejected_and_dead_lettered(stack_factory, bus, client, events):
    await stack_factory(dispatcher_mode="null")
    bad = await client.submit(op("bad").params(lr=0.1).args("--lr={{ lrr }}").build())
    rejected = await events.expect(OperationRejected, bad)
    assert rejected.reason == "invalid_template"
    assert "container.args[0]: 'lrr' is undefined" in rejected.message
    error = await events.expect(ErrorRaised, bad)
    assert error.service == "admission" and error.reason == "invalid_template"
    assert len(await dead_letters(bus, "admission")) == 1
    good = await client.submit(op("good").params(lr=0.1).args("--lr={{ lr }}", "{{ globals.uuid }}").build())
    admitted = await events.expect(OperationAdmitted, good)
    assert admitted.spec.container.args == ["--lr=0.1", good]


def run_cli(*argv: str, nats: str = "nats://127.0.0.1:1") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opsched.cli", "--nats", nats, *argv], capture_output=True,
                          text=True, timeout=60)


def test_dry_run_prints_every_trial_s_pod_rendered_without_a_bus():
    result = run_cli("submit", str(EXAMPLES / "sweep.yaml"), "--dry-run", "-o", "yaml", "--id", "sw")
    assert result.returncode == 0, result.stderr
    pods = list(yaml.safe_load_all(result.stdout))
    assert [p["metadata"]["name"] for p in pods] == [f"op-sw-{i}-0" for i in range(6)]
    commands = [p["spec"]["containers"][0]["command"][2] for p in pods]
    assert len(set(commands)) == 6 and not any("{{" in c for c in commands)
    assert "lr=0.001 bs=64" in commands[5]
    assert pods[0]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_a_file_whose_templates_cannot_render_exits_2_with_the_field_and_publishes_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = (EXAMPLES / "sweep.yaml").read_text().replace("{{ params.lr }}", "{{ params.lr.__class__ }}")
    bad.write_text(text)
    for extra in ((), ("--dry-run",)):
        result = run_cli("submit", str(bad), *extra)
        assert result.returncode == 2
        assert "component.run.container.command.2" in result.stderr and "not allowed" in result.stderr


def test_to_env_naming_nvidia_visible_devices_is_refused_by_the_cli(tmp_path):
    text = (EXAMPLES / "sweep.yaml").read_text().replace("{name: lr, type: float}",
                                                         "{name: lr, type: float, toEnv: NVIDIA_VISIBLE_DEVICES}")
    path = tmp_path / "sneaky.yaml"
    path.write_text(text)
    result = run_cli("submit", str(path), "--dry-run")
    assert result.returncode == 2 and "NVIDIA_VISIBLE_DEVICES" in result.stderr
