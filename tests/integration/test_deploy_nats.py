"""deploy/nats's nats.conf, run by the real nats-server with its Secrets made as docs/deploying.md says (the TLS
files of ``python -m opsched.tls``, the ``authorization`` block and password files of ``opsched.natsauth``), laid
out as the StatefulSet mounts them (/etc/nats/nats.conf, /etc/nats/tls/, /etc/nats/auth/auth.conf, /data) under
a temporary directory, on loopback ports: a service connects over TLS as its own user and creates the streams,
a connection without credentials is refused, and the probes' paths answer on the https monitoring port."""
from __future__ import annotations

from pathlib import Path

import nats
import pytest
import yaml

from opsched import natsauth
from opsched.bus.bus import Bus
from opsched.bus.connecting import client_context
from opsched.bus.credentials import Credentials
from opsched.natsserver import NatsServer, free_port, get_json
from opsched.tls import ensure_tls

pytestmark = pytest.mark.integration

NATS_YAML = Path(__file__).resolve().parents[2] / "deploy" / "nats" / "nats.yaml"


def manifests() -> list[dict]:
    return [d for d in yaml.safe_load_all(NATS_YAML.read_text()) if d]


def laid_out(conf: str, root: Path, port: int, monitor: int) -> str:
    """The pod's nats.conf with its paths under ``root`` and its ports on loopback: every one of them must be
    there to be moved."""
    moves = {'"0.0.0.0:4222"': f'"127.0.0.1:{port}"', '"0.0.0.0:8222"': f'"127.0.0.1:{monitor}"',
             '"/data"': f'"{root / "data"}"', '"/etc/nats/': f'"{root / "etc" / "nats"}/'}
    for pod, here in moves.items():
        assert pod in conf, f"{pod} is no longer in deploy/nats/nats.yaml's nats.conf"
        conf = conf.replace(pod, here)
    return conf


@pytest.fixture
def deployed(tmp_path: Path):
    """(the server, its TLS files, the directory of the password files)."""
    etc = tmp_path / "etc" / "nats"
    files = ensure_tls(etc / "tls", ("nats.opsched-system", "nats.opsched-system.svc"))
    passwords = tmp_path / "nats-auth"
    (etc / "auth").mkdir(parents=True)
    (etc / "auth" / "auth.conf").write_text(natsauth.accounts_block(passwords, natsauth.users_of([])))
    (config,) = [d for d in manifests() if d["kind"] == "ConfigMap"]
    port, monitor = free_port(), free_port()
    (etc / "nats.conf").write_text(laid_out(config["data"]["nats.conf"], tmp_path, port, monitor))
    server = NatsServer(tmp_path / "data", port=port, config_file=etc / "nats.conf", tls=files, monitor_port=monitor)
    server.start()
    try:
        yield server, files, passwords
    finally:
        server.stop()


def test_the_statefulset_mounts_what_the_config_reads():
    (sts,) = [d for d in manifests() if d["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["-c", "/etc/nats/nats.conf"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/nats/nats.conf", "/etc/nats/tls", "/etc/nats/auth", "/data"} <= mounts


async def test_a_service_connects_over_tls_as_its_own_user_and_creates_the_streams(deployed):
    server, files, passwords = deployed
    bus = await Bus.connect(server.url, "opsched-cost", max_reconnect_attempts=0, tls_ca_file=files.ca,
                            credentials=Credentials.of("cost", natsauth.password_file(passwords, "cost")))
    try:
        await bus.ensure_streams()  # JetStream is on, and the service's user may use its API
        assert bus.connected
    finally:
        await bus.close()


async def test_a_connection_without_credentials_is_refused(deployed):
    server, files, _ = deployed
    with pytest.raises(Exception, match="(?i)authorization"):
        await nats.connect(server.url, tls=client_context(files.ca), max_reconnect_attempts=0,
                           allow_reconnect=False)


@pytest.mark.parametrize("probe", ["startupProbe", "livenessProbe", "readinessProbe"])
def test_the_probes_paths_answer_ok_on_the_https_monitoring_port(deployed, probe):
    server, files, _ = deployed
    (sts,) = [d for d in manifests() if d["kind"] == "StatefulSet"]
    get = sts["spec"]["template"]["spec"]["containers"][0][probe]["httpGet"]
    assert (get["port"], get["scheme"]) == ("monitor", "HTTPS")
    assert get_json(f"{server.monitor_url}{get['path']}", tls=files) == {"status": "ok"}
