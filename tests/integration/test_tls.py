"""TLS on a real nats-server started with the generated configuration (``opsched.tls`` certificates, the
``tls {}`` block): a client with the CA connects and the services run over it; a client without the CA fails
certificate verification; a plain client is refused by the server; the monitoring port answers https only;
a 3-node cluster's routes speak TLS. The servers are the tests' secured ones (``tests.securebus``: the users
`opsched up` generates too), as `opsched up` runs by default."""
from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from opsched.bus.bus import Bus
from opsched.natsserver import get_json
from opsched.proto import subjects
from opsched.proto.events import OperationAdmitted
from opsched.tls import TlsFiles, ensure_tls
from tests.builders import op
from tests.builders.identities import ADMIN, HARNESS
from tests.conftest import Stack
from tests.eventlog import EventLog
from tests.securebus import SecureNats

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tls_files(nats_server: SecureNats) -> TlsFiles:
    return nats_server.tls


@pytest.fixture
def tls_server(nats_server: SecureNats):
    return nats_server.server


async def test_a_client_with_the_ca_connects_and_the_services_run_over_tls(nats_server):
    bus = await nats_server.connect(name="test", identity=HARNESS)
    await bus.ensure_streams()
    log = await EventLog(bus).start()
    stack = await Stack(nats_server.settings(dispatcher_mode="null"), ("admission", "cost", "cache"),
                        nats_server.connect).start()
    client = await nats_server.client()  # admin, verifying the server with the CA
    try:
        assert client.bus.nc.is_connected and client.bus.nc._transport is not None
        op_id = await client.submit(op("tls").build())
        await log.expect(OperationAdmitted, op_id)
    finally:
        await client.close()
        await stack.close()
        await log.stop()
        await bus.close()


async def test_a_client_without_the_ca_fails_certificate_verification(tls_server, tmp_path):
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        await Bus.connect(tls_server.url, "no-ca", connect_timeout=2.0, max_reconnect_attempts=1)
    other = ensure_tls(tmp_path / "another-ca")  # trusting a CA that did not sign it is no better
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        await Bus.connect(tls_server.url, "wrong-ca", connect_timeout=2.0, max_reconnect_attempts=1,
                          tls_ca_file=other.ca)


def test_the_cli_says_the_certificate_is_not_trusted_and_works_with_the_ca(nats_server, tls_server, tls_files,
                                                                          tmp_path):
    user = {k: v for k, v in nats_server.env(ADMIN).items() if k != "OPSCHED_NATS_CA"}  # admin; no CA but --nats-ca

    def opsched(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "opsched.cli", "--data-dir", str(tmp_path / "none"),
                               "--nats", tls_server.url, *args, "ops"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT,
                              env={**{k: v for k, v in os.environ.items() if k != "OPSCHED_NATS_CA"}, **user})

    refused = opsched()
    assert refused.returncode == 3, refused.stderr
    assert "the server's TLS certificate is not trusted" in refused.stderr and "--nats-ca" in refused.stderr
    listed = opsched("--nats-ca", str(tls_files.ca))
    assert listed.returncode == 0 and "no operations yet" in listed.stdout, listed.stderr


def test_a_plain_client_is_refused(tls_server):
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=5) as sock:
        info = sock.recv(4096)
        assert info.startswith(b"INFO ") and json.loads(info[5:].split(b"\r\n")[0])["tls_required"] is True
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\nPUB ops.admitted.x 2\r\nhi\r\n')
        answer = b""
        while chunk := sock.recv(4096):  # the server closes the connection: no PONG, nothing taken
            answer += chunk
    assert b"PONG" not in answer and b"+OK" not in answer
    assert "TLS handshake error" in tls_server.log_file.read_text()


def test_the_monitoring_port_answers_https_verified_with_the_ca_only(tls_server, tls_files, tmp_path):
    assert tls_server.monitor_url.startswith("https://")
    varz = get_json(f"{tls_server.monitor_url}/varz", tls_files)
    assert varz["tls_required"] is True and varz["port"] == tls_server.port
    with pytest.raises(urllib.error.URLError, match="certificate verify failed"):
        get_json(f"{tls_server.monitor_url}/varz", ensure_tls(tmp_path / "another-ca"))
    plain = tls_server.monitor_url.replace("https://", "http://")
    with pytest.raises(urllib.error.HTTPError) as answer:  # an http request to the https port
        urllib.request.urlopen(f"{plain}/varz", timeout=2)
    assert answer.value.code == 400


async def test_a_cluster_routes_over_tls_and_serves_tls_clients(nats_cluster: SecureNats):
    tls_files = nats_cluster.tls  # started: a meta leader, so the routes are up
    try:
        for node in nats_cluster.server.nodes:  # every node's routes require TLS, both ends verified, and are up
            varz = get_json(f"{node.monitor_url}/varz", tls_files)
            assert varz["cluster"]["tls_required"] is True and varz["cluster"]["tls_verify"] is True
            assert get_json(f"{node.monitor_url}/routez", tls_files)["num_routes"] >= 2
        bus = await nats_cluster.connect(name="test", identity=HARNESS)  # replicas: 3
        try:
            await bus.ensure_streams()  # replicated over the TLS routes
            info = await bus.js.stream_info(subjects.OPS_STREAM)
            assert info.config.num_replicas == 3 and info.cluster is not None and len(info.cluster.replicas or []) == 2
        finally:
            await bus.close()
    finally:
        nats_cluster.stop()
