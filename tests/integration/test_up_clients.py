"""What `opsched up` gives its clients, on a real nats-server with TLS and a user per service and the four services in
this process, all started as `opsched up` starts them (``Embedded``, from `opsched up`'s own options; no control
plane: the dispatcher in null mode, and a stand-in for the cluster reports each dispatched attempt running, then
succeeded, as the dispatcher's user): the context file, the SDK block of docs/sdk.md run exactly as written, the CLI
connecting from the context with nothing stray on stderr, and /metrics on the metrics port."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import stat
import sys
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from opsched import context
from opsched.bus.bus import Bus
from opsched.bus.connecting import SSL_EOF_NOISE
from opsched.cli import parser
from opsched.embedded import Embedded, ServicesInProcess
from opsched.natsserver import free_port
from opsched.proto import codec, subjects
from tests.builders.events import running, succeeded
from tests.docs import snippet

ROOT = Path(__file__).resolve().parents[2]
CONNECTION_ENV = (context.CONTEXT_ENV, context.URL_ENV, context.CA_ENV, context.USER_ENV, context.PASSWORD_FILE_ENV,
                  context.CREDS_ENV, "KUBECONFIG")


class StandInCluster:
    """Each dispatched attempt runs and succeeds at once, reported on the dispatcher's own connection (its user)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.sub = None

    async def start(self) -> "StandInCluster":
        self.sub = await self.bus.follow(subjects.OPS_STREAM, "ops.dispatched.*", self._on)
        return self

    async def _on(self, data: bytes, seq: int) -> None:
        event = codec.decode_event(data)
        now = datetime.now(timezone.utc)
        await self.bus.publish(running(event.op_id, at=now, attempt=event.attempt, node="gpu-stand-in"))
        await self.bus.publish(succeeded(event.op_id, at=now, attempt=event.attempt, node="gpu-stand-in"))

    async def stop(self) -> None:
        if self.sub is not None:
            await self.sub.unsubscribe()
        await self.bus.close()


@contextlib.asynccontextmanager
async def opsched_up(tmp_path: Path, *options: str):
    """`opsched up --data-dir <tmp>/.opsched --metrics-port <free> OPTIONS` in this process, the services it serves
    (``Embedded.service_names``), without its control plane."""
    data_dir = tmp_path / ".opsched"
    args = parser().parse_args(["--data-dir", str(data_dir), "up", "--kubeconfig", str(tmp_path / "no-cluster"),
                                "--metrics-port", str(free_port()), *options])
    embedded = Embedded(args)
    stack = cluster = None
    try:
        embedded.start()
        settings = embedded.settings().model_copy(update={"dispatcher_mode": "null", "log_format": "console"})
        stack = await ServicesInProcess(settings, embedded.service_names, embedded.connect).start()
        cluster = await StandInCluster(await embedded.connect(embedded.nats_url, "opsched-dispatcher")).start()
        yield embedded
    finally:
        if cluster is not None:
            await cluster.stop()
        if stack is not None:
            await stack.close()
        embedded.close()


@pytest.fixture
async def up(tmp_path: Path):
    async with opsched_up(tmp_path) as embedded:
        yield embedded


def client_env(**extra: str) -> dict[str, str]:
    """This process's environment without any connection setting: only the context file tells."""
    return {**{k: v for k, v in os.environ.items() if k not in CONNECTION_ENV}, **extra}


async def run(*command: str, cwd: Path, env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    """Run ``command`` (without blocking the services in this loop): exit code, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(*command, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"{command} did not end within {timeout}s: {out.decode()}{err.decode()}") from None
    return proc.returncode or 0, out.decode(), err.decode()


def test_the_context_names_the_url_ca_user_and_password_file_never_the_password(up: Embedded):
    path = up.data_dir / "context.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    body = json.loads(path.read_text())
    password_file = up.data_dir / "auth" / "admin.password"
    assert body == {"description": f"opsched up in {up.data_dir}", "url": up.nats_url,
                    "ca": str(up.data_dir / "tls" / "ca.pem"), "user": "admin",
                    "password_file": str(password_file), "creds": None, "hub": None}
    assert body["url"].startswith("tls://")
    assert password_file.read_text().strip() not in path.read_text()


async def test_the_readme_sdk_snippet_runs_as_written_next_to_opsched_up(up: Embedded, tmp_path: Path):
    """In the directory `opsched up` ran in (its .opsched/ there), the SDK block of docs/sdk.md, unchanged, submits the
    example and watches it to its end."""
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "train-1gpu.yaml", tmp_path / "examples")
    code, out, err = await run(sys.executable, "-c", snippet("sdk"), cwd=tmp_path, env=client_env())
    assert code == 0, err
    lines = out.splitlines()
    op_id = lines[0].split()[0]
    assert lines[0].split()[1:] == ["OperationSubmitted", "pending"]
    assert lines[-1].split() == [op_id, "OperationSucceeded", "succeeded"]
    assert err == ""


async def test_elsewhere_the_exported_context_is_all_the_sdk_and_cli_need(up: Embedded, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "train-1gpu.yaml", elsewhere / "examples")
    env = client_env(**{context.CONTEXT_ENV: str(up.context_file)})
    code, out, err = await run(sys.executable, "-c", snippet("sdk"), cwd=elsewhere, env=env)
    assert code == 0 and out.splitlines()[-1].endswith("succeeded"), err
    code, out, err = await run(sys.executable, "-m", "opsched.cli", "ops", cwd=elsewhere, env=env)
    assert code == 0 and "succeeded" in out, err
    code, _, err = await run(sys.executable, "-m", "opsched.cli", "ops", cwd=elsewhere, env=client_env())
    assert code == 3 and "cannot reach NATS at nats://127.0.0.1:4222" in err  # no context: the default port


async def test_cli_commands_over_tls_print_nothing_stray_on_stderr(up: Embedded, tmp_path: Path):
    """Each command's stderr is empty: no asyncio SSL warning, no log line (run as a user runs them)."""
    env = client_env(**{context.CONTEXT_ENV: str(up.context_file)})
    shutil.copy(ROOT / "examples" / "train-1gpu.yaml", tmp_path / "train.yaml")

    async def cli(*args: str) -> str:
        code, out, err = await run(sys.executable, "-m", "opsched.cli", *args, cwd=tmp_path, env=env)
        assert code == 0, f"opsched {' '.join(args)}: exit {code}: {err}"
        assert SSL_EOF_NOISE not in err
        assert err == "", f"opsched {' '.join(args)} printed on stderr: {err!r}"
        return out

    waited = await cli("submit", "train.yaml", "--id", "quiet-1", "--wait")
    assert waited.splitlines()[-1].split()[1:4] == ["quiet-1", "succeeded", "->"]
    assert "quiet-1" in await cli("ops")
    assert "default" in await cli("queues")
    assert "quiet-1" in await cli("why", "quiet-1")
    assert json.loads(await cli("cost", "-o", "json"))["type"] == "cost_answer"


async def test_opsched_up_serves_metrics_health_and_readiness_on_its_metrics_port(up: Embedded):
    base = f"http://127.0.0.1:{up.metrics_port}"

    def get(path: str) -> tuple[int, str]:
        with urllib.request.urlopen(base + path, timeout=5) as answer:
            return answer.status, answer.read().decode()
    status, body = await asyncio.to_thread(get, "/metrics")
    assert status == 200
    for service in ("admission", "cost", "cache", "dispatcher"):
        assert f'opsched_service_ready{{service="{service}"}} 1.0' in body
    assert "# TYPE opsched_messages_handled_total counter" in body
    assert "# TYPE opsched_admission_attempt_duration_seconds histogram" in body
    assert 'opsched_build_info{python_version=' in body and "# TYPE process_cpu_seconds_total counter" in body
    assert (await asyncio.to_thread(get, "/readyz"))[0] == 200
    assert json.loads((await asyncio.to_thread(get, "/healthz"))[1])["ready"] is True


async def test_the_readme_curl_submits_through_the_gateway_of_opsched_up_gateway(tmp_path: Path):
    """`opsched up --gateway`: the README's curl block, run in the directory `opsched up` ran in (only the port is
    this test's free one), submits the example over HTTPS as admin; the op runs to success; /metrics counts the
    request."""
    port = free_port()
    async with opsched_up(tmp_path, "--gateway", "--gateway-port", str(port)) as up:
        assert (up.data_dir / "auth" / "admin.token").read_text().startswith("ops_")
        (tmp_path / "examples").mkdir()
        shutil.copy(ROOT / "examples" / "train-1gpu.yaml", tmp_path / "examples")
        code, out, err = await run("bash", "-c", snippet("gateway-curl").replace(":8787/", f":{port}/"),
                                   cwd=tmp_path, env=client_env())
        assert code == 0, err
        (op_id,) = json.loads(out)["opIds"]
        env = client_env(**{context.CONTEXT_ENV: str(up.context_file)})
        code, out, err = await run(sys.executable, "-m", "opsched.cli", "watch", op_id, cwd=tmp_path, env=env)
        assert code == 0 and out.splitlines()[-1].split()[1:4] == [op_id, "succeeded", "->"], (out, err)

        def metrics() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{up.metrics_port}/metrics", timeout=5) as answer:
                return answer.read().decode()
        body = await asyncio.to_thread(metrics)
        assert 'opsched_service_ready{service="gateway"} 1.0' in body
        assert 'opsched_gateway_requests_total{route="/v1/ops",status="202"} 1.0' in body
        # every service in one scrape: each family it serves is in docs/observability.md's table, and each the
        # table lists is served (but the pod creates': this dispatcher creates no pods, test_metrics_scrape.py's does)
        served = {f.name for f in text_string_to_metric_families(body) if f.name.startswith("opsched_")}
        assert served == documented_metrics() - {"opsched_pod_create_duration_seconds", "opsched_pod_create_errors"}


def documented_metrics() -> set[str]:
    """The opsched_* families docs/observability.md's metrics table lists (its first column; a counter's family
    is its name without ``_total``)."""
    names: set[str] = set()
    for line in (ROOT / "docs" / "observability.md").read_text().splitlines():
        if line.startswith("| `"):
            names |= {n.removesuffix("_total") for n in re.findall(r"`(opsched_[a-z_]+)`", line.split("|")[1])}
    return names


def test_an_open_opsched_up_writes_a_context_without_ca_nor_user_and_removes_it_when_it_stops(tmp_path: Path):
    args = parser().parse_args(["--data-dir", str(tmp_path), "up", "--kubeconfig", str(tmp_path / "none"),
                                "--metrics-port", "0", "--no-auth", "--no-tls"])
    embedded = Embedded(args)
    try:
        embedded.start()
        found = context.read(embedded.context_file)
        assert (found.url, found.ca, found.user, found.password_file) == (embedded.nats_url, None, None, None)
        assert embedded.metrics_port is None
    finally:
        embedded.close()
    assert not embedded.context_file.exists() and not (tmp_path / "up.json").exists()

