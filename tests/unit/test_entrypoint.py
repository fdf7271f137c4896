"""opsched's own programs (the CLI, each service) go without aiohttp, which nats-py would import for a WebSocket
transport opsched never uses (0.3 s of every start); a program using opsched as a library keeps it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from opsched.proto import permissions

REPORT = "import sys; print(sys.modules.get('aiohttp', 'absent') is None, 'nats' in sys.modules)"


def probe(code: str) -> str:
    return subprocess.run([sys.executable, "-c", f"{code}\n{REPORT}"], capture_output=True, text=True, check=True,
                          timeout=60).stdout.split("\n")[-2]


@pytest.mark.parametrize("service", [*permissions.SERVICES, permissions.GATEWAY])
def test_a_service_process_imports_nats_py_without_aiohttp(service):
    assert probe(f"import runpy; runpy.run_module('opsched.services.{service}', run_name='probe')") == "True True"


def test_a_cli_call_connects_without_aiohttp():
    code = ("from opsched.cli import main\n"
            "assert main(['--nats', 'nats://127.0.0.1:1', 'queues']) == 3  # nothing listens: unreachable")
    assert probe(code) == "True True"


def test_the_sdk_leaves_aiohttp_to_the_program_that_imports_it():
    assert probe("import opsched.client, aiohttp; aiohttp.ClientSession") == "False True"


@pytest.mark.parametrize("url", ["ws://127.0.0.1:4222", "nats://a:4222,wss://b:443"])
def test_a_websocket_url_is_refused_naming_it_by_the_cli_and_the_services(url, capsys, monkeypatch):
    from opsched.cli import main
    from opsched.services.cost.service import Cost
    from opsched.services.runtime import runner

    with pytest.raises(SystemExit) as exited:
        main(["--nats", url, "queues"])
    assert exited.value.code == 2
    assert "ws" in capsys.readouterr().err.split("NATS URL ")[1].split(":")[0]
    monkeypatch.setenv("NATS_URL", url)
    with pytest.raises(SystemExit, match="NATS_URL: .*nats:// or tls://"):
        runner.main(Cost, [])


@pytest.mark.parametrize("service", [*permissions.SERVICES, permissions.GATEWAY])
def test_a_service_process_answers_help_with_its_settings_and_refuses_an_argument(service):
    """`python -m opsched.services.<name> --help` (as the image test runs in the image) lists every setting as the
    variable it is read from; an argument is refused (exit 2, named), never ignored: the settings are the env."""
    from opsched.services.runtime.settings import Settings

    helped = subprocess.run([sys.executable, "-m", f"opsched.services.{service}", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: python -m opsched.services.{service}")
    assert all(variable in helped.stdout for variable, _ in Settings.variables())
    assert "NATS_URL (default nats://127.0.0.1:4222)" in helped.stdout and "KUBECONFIG" in helped.stdout
    refused = subprocess.run([sys.executable, "-m", f"opsched.services.{service}", "--nats", "x"], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "unrecognized arguments: --nats x" in refused.stderr


def test_a_service_stopped_before_it_serves_exits_0_and_a_cli_is_not_told_so():
    """SIGTERM while a service's process still imports (a pod stopped as it starts): nothing is in hand, exit 0.
    The CLI keeps the default: a command killed did not succeed."""
    code = ("import os, signal, time\nfrom opsched import entrypoint\nentrypoint.begin(service={})\n"
            "os.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)\nraise SystemExit(3)")
    assert subprocess.run([sys.executable, "-c", code.format(True)], timeout=60).returncode == 0
    assert subprocess.run([sys.executable, "-c", code.format(False)], timeout=60).returncode == -15
