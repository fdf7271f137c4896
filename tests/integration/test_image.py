"""The image, built as CI builds it (``scripts/build-image.sh``: Debian's packages and the pinned wheels, packed by
umoci; no engine, no base image pulled) and then used: its configuration is the Deployments' (user, working
directory, command), it holds what they run and nothing to install with, and every service runs from its root
filesystem — unpacked by umoci with the runtime configuration it derives from the image — as the image's user:
``--help`` from each, then the five services and the gateway started against the test's NATS (TLS, a user each)
and the real control plane, ready on their health ports, an op run through them to success.

No container engine runs here (podman's crun cannot set the rlimits it wants in this VM and does not support its
hybrid cgroups), so a process runs as a runtime would run it, minus the namespaces: ``chroot`` into the unpacked
root filesystem with the image's user, environment, working directory and arguments."""
from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import subprocess
import tarfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from opsched import natsauth
from opsched.natsserver import free_port
from opsched.proto import permissions
from opsched.proto.events import OperationSucceeded
from tests.builders import op
from tests.waiting import eventually

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEPLOYED = (*permissions.SERVICES, permissions.GATEWAY)


@dataclass
class Image:
    layout: Path         # the OCI image layout
    tag: str
    config: dict         # the image's configuration (its "config" blob)
    files: dict[str, tarfile.TarInfo]   # its layer's members by path
    rootfs: Path         # unpacked by umoci
    runtime: dict        # the runtime configuration umoci derived (config.json)

    def blob(self, digest: str) -> bytes:
        return (self.layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()

    def command(self, *argv: str, env: dict[str, str] | None = None) -> list[str]:
        """``argv`` in the root filesystem as the image's user, with the image's environment (and ``env``) only."""
        user = self.runtime["process"]["user"]
        variables = [*self.runtime["process"]["env"], *(f"{k}={v}" for k, v in (env or {}).items())]
        return ["chroot", f"--userspec={user['uid']}:{user['gid']}", str(self.rootfs), "/usr/bin/env", "-i",
                *variables, "sh", "-c", f'cd {self.runtime["process"]["cwd"]} && exec "$@"', "-", *argv]

    def resolved(self, path: str) -> str:
        """``path`` in the layer with its symbolic links followed (opsched/services -> ../services)."""
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            member = self.files.get("/".join(parts[:i]))
            if member is not None and member.issym():
                target = os.path.normpath(os.path.join("/".join(parts[:i - 1]), member.linkname))
                return self.resolved("/".join([target, *parts[i:]]))
        return path

    def place(self, source: Path, name: str) -> str:
        """A copy of ``source`` inside the root filesystem, readable by the image's user: its path there."""
        target = self.rootfs / "run" / "opsched" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        os.chown(target, self.runtime["process"]["user"]["uid"], self.runtime["process"]["user"]["gid"])
        target.chmod(0o400)
        return "/" + str(target.relative_to(self.rootfs))


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Image:
    work = tmp_path_factory.mktemp("image")
    layout = work / "layout"
    built = subprocess.run([str(ROOT / "scripts" / "build-image.sh"), str(layout)], capture_output=True, text=True,
                           timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    tag = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    index = json.loads((layout / "index.json").read_text())
    (entry,) = index["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == tag and built.stdout.strip() == entry["digest"]
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / entry["digest"].removeprefix("sha256:")).read_text())
    config = json.loads((blobs / manifest["config"]["digest"].removeprefix("sha256:")).read_text())
    (layer,) = manifest["layers"]
    with tarfile.open(fileobj=gzip.open(blobs / layer["digest"].removeprefix("sha256:"))) as tar:
        files = {m.name.removeprefix(".").removeprefix("/"): m for m in tar.getmembers()}   # "./app" -> "app", "." -> ""
    bundle = work / "bundle"
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)], check=True, capture_output=True,
                   timeout=300)
    runtime = json.loads((bundle / "config.json").read_text())
    return Image(layout, tag, config, files, bundle / "rootfs", runtime)


def test_the_image_runs_as_the_deployments_say_a_numeric_non_root_user_in_app(image):
    conf = image.config["config"]
    assert conf["User"] == "65532:65532" and conf["WorkingDir"] == "/app"
    assert conf["Cmd"] == ["python", "-m", "opsched.services.admission"] and not conf.get("Entrypoint")
    env = dict(e.split("=", 1) for e in conf["Env"])
    assert env["PYTHONPATH"] == "/app:/opt/opsched/site-packages" and env["PYTHONUNBUFFERED"] == "1"
    assert image.config["architecture"] == "amd64" and image.config["os"] == "linux"
    for service in DEPLOYED:   # what each Deployment runs, as the user it asks for
        manifest = next(yaml.safe_load_all((ROOT / "deploy" / "base" / f"30-{service}.yaml").read_text()))
        pod = manifest["spec"]["template"]["spec"]
        assert f'{pod["securityContext"]["runAsUser"]}:{pod["securityContext"]["runAsGroup"]}' == conf["User"]
        (container,) = pod["containers"]
        assert container["command"][:2] == ["python", "-m"]
        module = image.resolved("app/" + container["command"][2].replace(".", "/"))
        assert f"{module}/__main__.py" in image.files, service


def test_the_image_holds_the_pinned_packages_compiled_and_nothing_to_install_with(image):
    pins = dict(line.split("==") for line in (ROOT / "deploy" / "constraints.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    site = "opt/opsched/site-packages/"
    installed = {}
    for path in image.files:
        if path.startswith(site) and path.endswith(".dist-info/METADATA"):
            name, version = path[len(site):].split("/")[0].removesuffix(".dist-info").rsplit("-", 1)
            installed[name.lower().replace("_", "-")] = version
    assert installed == {name.lower().replace("_", "-"): version for name, version in pins.items()}
    assert not [p for p in image.files if "/pip/" in p or p.startswith(("usr/bin/pip", "usr/local/bin/pip"))]
    assert not [p for p in image.files if p.startswith("usr/bin/") and ("gcc" in p or p.endswith("-gcc"))]
    assert "app/services/runtime/__pycache__/runner.cpython-311.pyc" in image.files  # compiled ahead
    assert not [p for p in image.files if p.startswith("app/tests/") or p.startswith("app/bench/")]
    assert image.files[""].mode & 0o755 == 0o755   # / : its user reaches everything beneath
    for path, member in image.files.items():   # the image's user can change nothing it runs
        if path.startswith(("app/", "opt/opsched/")) and not member.issym():
            assert member.uid == 0 and not member.mode & 0o022, path


async def run(argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_every_service_answers_help_from_the_image_as_its_user(image):
    for service in DEPLOYED:
        code, out, err = await run(image.command("python", "-m", f"opsched.services.{service}", "--help"))
        assert code == 0 and out.startswith(f"usage: python -m opsched.services.{service}"), (service, err)
    code, out, _ = await run(image.command("id", "-u"))
    assert out.strip() == "65532"
    code, _, err = await run(image.command("python", "-c", "open('/app/opsched/x', 'w')"))
    assert code != 0 and "Permission denied" in err   # its code is not its user's to change


async def test_the_services_run_from_the_image_and_run_an_op(image, nats_server, control_plane, k8s_namespace,
                                                           sim_nodes, client, events, tmp_path):
    sim_nodes(("gpu-image", 1, "A100"))
    ca = image.place(nats_server.ca, "ca.pem")
    env_key = image.place(nats_server.env_key, "env.key")
    kubeconfig = image.place(control_plane.kubeconfig, "kubeconfig.yaml")
    tokens = tmp_path / "gateway-tokens.json"
    tokens.write_text('{"tokens": []}')
    ports = {service: free_port() for service in DEPLOYED}
    procs = {}
    try:
        for service in DEPLOYED:
            password = image.place(natsauth.password_file(nats_server.auth_dir, service), f"{service}.password")
            env = {"NATS_URL": nats_server.url, "OPSCHED_NATS_CA": ca, "OPSCHED_NATS_USER": service,
                   "OPSCHED_NATS_PASSWORD_FILE": password, "OPSCHED_HEALTH_PORT": str(ports[service]),
                   "OPSCHED_LOG_FORMAT": "json", "OPSCHED_NAMESPACE": k8s_namespace}
            if service in ("admission", "dispatcher"):
                env["OPSCHED_ENV_KEY_FILE"] = env_key
            if service == "dispatcher":
                env["KUBECONFIG"] = kubeconfig
            if service == permissions.GATEWAY:
                env |= {"OPSCHED_GATEWAY_TOKENS_FILE": image.place(tokens, "gateway-tokens.json"),
                        "OPSCHED_GATEWAY_PORT": str(free_port()), "OPSCHED_GATEWAY_USERS": '["admin:admin"]'}
            log = open(tmp_path / f"{service}.log", "wb")  # noqa: SIM115 - closed with the process
            procs[service] = subprocess.Popen(image.command("python", "-m", f"opsched.services.{service}", env=env),
                                              stdout=log, stderr=subprocess.STDOUT)

        async def ready(service: str) -> bool:
            def get() -> int:
                with urllib.request.urlopen(f"http://127.0.0.1:{ports[service]}/readyz", timeout=5) as answer:
                    return answer.status
            try:
                return await asyncio.to_thread(get) == 200
            except OSError:
                assert procs[service].poll() is None, (tmp_path / f"{service}.log").read_text()[-3000:]
                return False
        for service in DEPLOYED:
            await eventually(lambda s=service: ready(s), f"{service} from the image, ready", timeout=60)
        op_id = await client.submit(op("from-the-image").gpus(1).runs("sleep 0.2").build())
        done = await events.expect(OperationSucceeded, op_id, timeout=60)
        assert done.node == "gpu-image"
    finally:
        for proc in procs.values():
            proc.terminate()
        codes = {service: proc.wait(30) for service, proc in procs.items()}
    assert codes == dict.fromkeys(DEPLOYED, 0), "SIGTERM drains and exits 0"
