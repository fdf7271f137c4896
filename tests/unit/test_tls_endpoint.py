"""Where the CLI finds the NATS CA (opsched/endpoint.py), what it says when the server is not trusted, and the
TLS parts of nats-server's configuration (opsched/natsserver.py)."""
from __future__ import annotations

import argparse
import json
import ssl
from pathlib import Path

import pytest

from opsched.endpoint import nats_ca, unreachable
from opsched.natsserver import NatsCluster, NatsServer, tls_block
from opsched.tls import TlsFiles


def args(data_dir: Path, **kw) -> argparse.Namespace:
    return argparse.Namespace(data_dir=str(data_dir), nats=None, nats_ca=None, **kw)


def test_the_ca_is_the_option_then_the_environment_then_up_json_then_the_data_dir(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPSCHED_NATS_CA", raising=False)
    assert nats_ca(args(tmp_path)) is None  # nothing anywhere: plain, or the system's CAs
    (tmp_path / "tls").mkdir()
    (tmp_path / "tls" / "ca.pem").write_text("x")
    assert nats_ca(args(tmp_path)) == tmp_path / "tls" / "ca.pem"
    (tmp_path / "up.json").write_text(json.dumps({"nats_url": "tls://h:1", "nats_ca": "/up/ca.pem"}))
    assert nats_ca(args(tmp_path)) == Path("/up/ca.pem")
    monkeypatch.setenv("OPSCHED_NATS_CA", "/env/ca.pem")
    assert nats_ca(args(tmp_path)) == Path("/env/ca.pem")
    a = args(tmp_path)
    a.nats_ca = "/opt/ca.pem"
    assert nats_ca(a) == Path("/opt/ca.pem")


def test_an_untrusted_certificate_is_reported_as_such_naming_the_ca(tmp_path: Path):
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_message = "unable to get local issuer certificate"
    message = unreachable("tls://127.0.0.1:4222", tmp_path / "ca.pem", exc)
    assert "not trusted (unable to get local issuer certificate)" in message and str(tmp_path / "ca.pem") in message
    assert "--nats-ca" in unreachable("tls://127.0.0.1:4222", None, exc)


def test_a_missing_ca_file_is_named(tmp_path: Path):
    message = unreachable("tls://127.0.0.1:4222", tmp_path / "nope.pem", FileNotFoundError(2, "No such file"))
    assert f"NATS CA file {tmp_path / 'nope.pem'} cannot be read" in message


def test_a_server_down_is_still_a_server_down():
    assert "cannot reach NATS at nats://h:1 (ConnectionRefusedError)" in unreachable(
        "nats://h:1", None, ConnectionRefusedError())


FILES = TlsFiles(ca=Path("/d/ca.pem"), cert=Path("/d/server.pem"), key=Path("/d/server-key.pem"))


def test_the_tls_block_names_the_certificate_key_and_ca():
    assert tls_block(FILES) == ('tls { cert_file: "/d/server.pem", key_file: "/d/server-key.pem", '
                                'ca_file: "/d/ca.pem", timeout: 2 }')
    assert tls_block(FILES, verify=True).endswith("timeout: 2, verify: true }")


def test_a_tls_server_is_reached_by_tls_urls_and_monitored_over_https(tmp_path: Path):
    server = NatsServer(tmp_path, port=4999, tls=FILES)
    assert server.url == "tls://127.0.0.1:4999" and server.monitor_url.startswith("https://127.0.0.1:")
    plain = NatsServer(tmp_path, port=4999)
    assert plain.url == "nats://127.0.0.1:4999" and plain.monitor_url is None


def test_a_tls_cluster_secures_clients_monitoring_and_routes(tmp_path: Path):
    cluster = NatsCluster(tmp_path, n=2, tls=FILES)
    config = cluster._config(0)
    assert f"https: \"127.0.0.1:{cluster.http_ports[0]}\"" in config and "\nhttp:" not in config
    assert config.count("cert_file") == 2 and "verify: true" in config.split("cluster {")[1]
    assert cluster.urls.startswith("tls://")
    assert "tls {" not in NatsCluster(tmp_path, n=2)._config(0)
