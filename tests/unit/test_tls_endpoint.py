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
from opsched.tls import TlsFiles, ensure_tls


def args(data_dir: Path, nats_ca: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(data_dir=str(data_dir), nats=None, nats_ca=nats_ca)


def test_the_ca_is_the_option_then_the_environment_then_up_json_then_the_data_dir(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPSCHED_NATS_CA", raising=False)
    assert nats_ca(args(tmp_path)) is None  # nothing anywhere: plain, or the system's CAs
    cas = {where: ensure_tls(tmp_path / where).ca for where in ("tls", "up", "env", "opt")}
    assert nats_ca(args(tmp_path)) == cas["tls"]
    (tmp_path / "up.json").write_text(json.dumps({"nats_url": "tls://h:1", "nats_ca": str(cas["up"])}))
    assert nats_ca(args(tmp_path)) == cas["up"]
    monkeypatch.setenv("OPSCHED_NATS_CA", str(cas["env"]))
    assert nats_ca(args(tmp_path)) == cas["env"]
    assert nats_ca(args(tmp_path, nats_ca=str(cas["opt"]))) == cas["opt"]


def test_a_ca_named_but_missing_or_no_certificate_is_refused_naming_where(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPSCHED_NATS_CA", str(tmp_path / "nope.pem"))
    with pytest.raises(ValueError, match=r"\$OPSCHED_NATS_CA: no CA certificate file at .*nope.pem"):
        nats_ca(args(tmp_path))
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match=r"--nats-ca: .*junk.pem is not a usable CA certificate"):
        nats_ca(args(tmp_path, nats_ca=str(tmp_path / "junk.pem")))


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
