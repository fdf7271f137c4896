"""What the CLI says when the server is not trusted or a CA is missing (opsched/endpoint.py; where it finds the CA:
tests/unit/test_context.py), and the TLS parts of nats-server's configuration (opsched/natsserver.py)."""
from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from opsched.endpoint import unreachable
from opsched.natsserver import NatsCluster, NatsServer, tls_block
from opsched.tls import TlsFiles


def test_the_cli_refuses_a_missing_ca_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from opsched.cli import EXIT_INVALID, main

    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(tmp_path), "--nats-ca", str(tmp_path / "nope.pem"), "ops"])
    assert exited.value.code == EXIT_INVALID
    assert f"--nats-ca: no CA certificate file at {tmp_path / 'nope.pem'}" in capsys.readouterr().err


def test_an_untrusted_certificate_is_reported_as_such_naming_the_ca(tmp_path: Path):
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_message = "unable to get local issuer certificate"
    message = unreachable("tls://127.0.0.1:4222", tmp_path / "ca.pem", exc)
    assert "not trusted (unable to get local issuer certificate)" in message and str(tmp_path / "ca.pem") in message
    assert "--nats-ca" in unreachable("tls://127.0.0.1:4222", None, exc)


def test_a_server_down_is_still_a_server_down():
    assert "cannot reach NATS at nats://h:1 (ConnectionRefusedError)" in unreachable(
        "nats://h:1", None, ConnectionRefusedError())


FILES = TlsFiles(ca=Path("/d/ca.pem"), cert=Path("/d/server.pem"), key=Path("/d/server-key.pem"))


def test_the_tls_block_names_the_certificate_key_and_ca():
    assert tls_block(FILES) == ('tls { cert_file: "/d/server.pem", key_file: "/d/server-key.pem", '
                                'ca_file: "/d/ca.pem", timeout: 2 }')
    assert tls_block(FILES, verify=True).endswith("timeout: 2, verify: true }")


def test_a_tls_server_is_reached_by_tls_urls_and_monitored_over_https_on_loopback_only_when_asked(tmp_path: Path):
    server = NatsServer(tmp_path, port=4999, tls=FILES, monitor_port=5999)
    assert server.url == "tls://127.0.0.1:4999" and server.monitor_url == "https://127.0.0.1:5999"
    assert NatsServer(tmp_path, port=4999, tls=FILES).monitor_url is None  # off unless asked for
    plain = NatsServer(tmp_path, port=4999)
    assert plain.url == "nats://127.0.0.1:4999" and plain.monitor_url is None


def test_the_monitoring_endpoint_is_off_by_default_and_on_loopback_when_asked(tmp_path: Path):
    secured = NatsServer(tmp_path / "a", port=4999, tls=FILES, authorization="authorization { users = [] }\n")
    secured._command()
    assert "http" not in secured.config_file.read_text().replace("https_", "")  # no http: nor https: line
    asked = NatsServer(tmp_path / "b", port=4999, tls=FILES, authorization="authorization { users = [] }\n",
                       monitor_port=5999)
    asked._command()
    assert 'https: "127.0.0.1:5999"' in asked.config_file.read_text()
    plain = NatsServer(tmp_path / "c", port=4999, monitor_port=5999)._command()
    assert plain[plain.index("-a") + 1] == "127.0.0.1" and plain[plain.index("-m") + 1] == "5999"  # -m binds -a's host


def test_a_tls_cluster_secures_clients_monitoring_and_routes(tmp_path: Path):
    cluster = NatsCluster(tmp_path, n=2, tls=FILES)
    config = cluster._config(0)
    assert f"https: \"127.0.0.1:{cluster.http_ports[0]}\"" in config and "\nhttp:" not in config
    assert config.count("cert_file") == 2 and "verify: true" in config.split("cluster {")[1]
    assert cluster.urls.startswith("tls://")
    assert "tls {" not in NatsCluster(tmp_path, n=2)._config(0)


def test_opsched_up_leaves_the_monitoring_endpoint_off_unless_asked_for():
    from opsched.cli import parser

    assert parser().parse_args(["up"]).nats_monitor_port is None
    assert parser().parse_args(["up", "--nats-monitor-port", "8222"]).nats_monitor_port == 8222
