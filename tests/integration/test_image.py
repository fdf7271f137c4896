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
import platform
import subprocess
import tarfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from opsched import natsauth
from opsched.localcluster import kubectl
from opsched.natsserver import free_port
from opsched.proto import permissions
from opsched.proto.events import OperationSucceeded
from opsched.tls import ensure_tls
from tests.builders import op
from tests.waiting import eventually

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DEPLOYED = (*permissions.SERVICES, permissions.GATEWAY)


@dataclass
class Image:
    layout: Path         # the OCI image layout
    tag: str
    config: dict         # the image's configuration (its "config" blob)
    files: dict[str, tarfile.TarInfo]   # its layer's members by path
    rootfs: Path         # unpacked by umoci
    runtime: dict        # the runtime configuration umoci derived (config.json)

    def command(self, *argv: str, env: dict[str, str] | None = None, user: str | None = None) -> list[str]:
        """``argv`` in the root filesystem in the image's working directory, as ``user`` (default: the image's),
        with the image's environment and ``env`` only."""
        owner = self.runtime["process"]["user"]
        user = user or "{}:{}".format(owner["uid"], owner["gid"])
        variables = [*self.runtime["process"]["env"], *(f"{k}={v}" for k, v in (env or {}).items())]
        return ["chroot", f"--userspec={user}", str(self.rootfs), "/usr/bin/env", "-i", *variables, "sh", "-c",
                f'cd {self.runtime["process"]["cwd"]} && exec "$@"', "-", *argv]

    def resolved(self, path: str) -> str:
        """``path`` in the layer with its symbolic links followed (opsched/services -> ../services)."""
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            member = self.files.get("/".join(parts[:i]))
            if member is not None and member.issym():
                target = os.path.normpath(os.path.join("/".join(parts[:i - 1]), member.linkname))
                return self.resolved("/".join([target, *parts[i:]]))
        return path


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
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    assert image.config["architecture"] == arch and image.config["os"] == "linux"   # this machine's, as its wheels
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


def served_dev_overlay(kubeconfig: Path, workdir: Path) -> list[dict]:
    """deploy/overlays/dev as the API server takes it: rendered by kubectl's kustomize and applied as a server-side
    dry run (validated and defaulted by the real API server, nothing stored: tests/integration/test_deploy.py
    applies it for real)."""
    rendered = workdir / "dev.yaml"
    rendered.write_text(kubectl.run(kubeconfig, "kustomize", str(DEPLOY / "overlays" / "dev")).stdout)
    served = json.loads(kubectl.run(kubeconfig, "apply", "--server-side", "--dry-run=server", "-f", str(rendered),
                                    "-o", "json").stdout)
    return served["items"] if served["kind"] == "List" else [served]


@dataclass
class Pod:
    """A Deployment's pod as a container runtime would start it from the image, minus the network namespace (its
    ports are this machine's): a mount namespace of its own (``unshare``) with the root filesystem read-only, an
    emptyDir on ``/tmp``, each Secret volume's files at its mount path with the volume's mode and the pod's
    fsGroup; then ``chroot`` as the pod's user, with the image's environment, the container's (``envFrom`` the
    ConfigMap, ``env``; ``overrides`` last) and its command."""

    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen | None = None

    @classmethod
    def of(cls, image: Image, deployment: dict, objects: list[dict], secrets: dict[str, dict[str, bytes]],
           workdir: Path, overrides: dict[str, str], command: list[str] | None = None) -> Pod:
        name = deployment["metadata"]["name"]
        spec = deployment["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        env = {}
        for source in container.get("envFrom", []):
            config = next(o for o in objects if o["kind"] == "ConfigMap"
                          and o["metadata"]["name"] == source["configMapRef"]["name"])
            env |= config["data"]
        env |= {e["name"]: e["value"] for e in container.get("env", [])}
        env |= overrides
        root = image.rootfs
        group = spec["securityContext"]["fsGroup"]
        mounts = ["set -e", f"mount --bind {root} {root}", f"mount -o remount,bind,ro {root}"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        for mount in container["volumeMounts"]:
            volume, target = volumes[mount["name"]], root / mount["mountPath"].lstrip("/")
            target.mkdir(parents=True, exist_ok=True)   # the mount point, made before the root goes read-only
            if "emptyDir" in volume:
                mounts.append(f"mount -t tmpfs -o size=64m,mode=1777 tmpfs {target}")
                continue
            secret = volume["secret"]
            source = workdir / name / mount["name"]
            source.mkdir(parents=True)
            data = secrets[secret["secretName"]]
            items = secret.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                file = source / item["path"]
                file.write_bytes(data[item["key"]])
                os.chown(file, 0, group)
                file.chmod(secret.get("defaultMode", 0o644))
            mounts.append(f"mount --bind {source} {target}" + (" && mount -o remount,bind,ro " + str(target)
                                                                if mount.get("readOnly") else ""))
        user = f'{spec["securityContext"]["runAsUser"]}:{spec["securityContext"]["runAsGroup"]}'
        run = image.command(*(command or container["command"]), env=env, user=user)
        script = " && ".join(mounts[1:]) + ' && exec "$@"'
        return cls(name, ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "-", *run],
                   workdir / f"{name}.log")

    def start(self) -> None:
        log = open(self.log, "wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
        return True


async def answers(url: str) -> bool:
    def get() -> int:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    try:
        return await asyncio.to_thread(get) == 200
    except OSError:
        return False


def dev_pods(image: Image, objects: list[dict], nats_server, kubeconfig: Path, workdir: Path
             ) -> tuple[dict[str, Pod], dict[str, int]]:
    """A Pod per Deployment of ``objects``, its Secrets made of the test's NATS files; each one's port."""
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    gateway_tls = ensure_tls(workdir / "gateway-tls")
    passwords = {f"{user}.password": natsauth.password_file(nats_server.auth_dir, user).read_bytes()
                 for user in (*DEPLOYED, "ui")}
    secrets = {"opsched-nats-ca": {"ca.pem": nats_server.ca.read_bytes()}, "opsched-nats-auth": passwords,
               "opsched-env-key": {"env.key": nats_server.env_key.read_bytes()},
               "opsched-gateway-tokens": {"gateway-tokens.json": b'{"tokens": []}'},
               "opsched-gateway-tls": {"tls.crt": gateway_tls.cert.read_bytes(), "tls.key": gateway_tls.key.read_bytes()},
               "opsched-notifier-connections": {"connections.yaml": b"connections: []\n"},
               "kubeconfig": {"kubeconfig": kubeconfig.read_bytes()}}
    ports = {name: free_port() for name in deployments}
    pods = {}
    for name, deployment in deployments.items():
        overrides = {"NATS_URL": nats_server.url, "OPSCHED_HEALTH_PORT": str(ports[name]),
                     "OPSCHED_GATEWAY_PORT": str(free_port())}
        spec = deployment["spec"]["template"]["spec"]
        command = None
        if name == "opsched-dispatcher":   # a kubeconfig where the pod would have its ServiceAccount's token
            spec["volumes"].append({"name": "kubeconfig", "secret": {"secretName": "kubeconfig", "defaultMode": 288}})
            spec["containers"][0]["volumeMounts"].append({"name": "kubeconfig", "mountPath": "/etc/opsched/kube",
                                                          "readOnly": True})
            overrides["KUBECONFIG"] = "/etc/opsched/kube/kubeconfig"
        if name == "opsched-ui":   # its --port, the last argument
            command = [*spec["containers"][0]["command"][:-1], str(ports[name])]
        pods[name] = Pod.of(image, deployment, objects, secrets, workdir / "pods", overrides, command)
    return pods, ports


async def test_the_dev_overlay_runs_from_the_image_as_its_pods_would_and_runs_an_op(
        image, nats_server, control_plane, core_v1, sim_nodes, client, events, tmp_path):
    """Every Deployment of deploy/overlays/dev (as the API server took it) started from the image as its pod would
    be: its user, read-only root, its Secrets' files where it mounts them, its ConfigMap and env, its command.
    Only what a cluster would give differently is replaced: NATS_URL (the test's server, not the Service's DNS
    name), the ports (one network namespace here, not one per pod) and, for the dispatcher, a kubeconfig (no
    ServiceAccount token without kube-controller-manager)."""
    for namespace in ("opsched-system", "opsched"):   # a dry run does not create the namespaces it names
        control_plane.ensure_namespace(namespace)
    objects = served_dev_overlay(control_plane.kubeconfig, tmp_path)
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "Deployment"} == \
        {f"opsched-{name}" for name in (*DEPLOYED, "ui")}
    sim_nodes(("gpu-image", 1, "A100"))
    pods, ports = dev_pods(image, objects, nats_server, control_plane.kubeconfig, tmp_path)
    try:
        for pod in pods.values():
            pod.start()
        for name, pod in pods.items():
            path = "/healthz" if name == "opsched-ui" else "/readyz"
            await eventually(lambda p=pod, u=f"http://127.0.0.1:{ports[name]}{path}": p.alive() and answers(u),
                             f"{name} from the image, ready", timeout=90)
        op_id = await client.submit(op("from-the-dev-overlay").gpus(1).runs("sleep 0.2").build())
        done = await events.expect(OperationSucceeded, op_id, timeout=60)
        assert done.node == "gpu-image"
        assert core_v1.list_namespaced_pod("opsched", label_selector=f"opsched.io/op-id={op_id}").items  # its queue namespace

        async def viewed() -> bool:
            def get() -> str:
                with urllib.request.urlopen(f"http://127.0.0.1:{ports['opsched-ui']}/api/state", timeout=5) as r:
                    return r.read().decode()
            return op_id in await asyncio.to_thread(get)
        await eventually(viewed, "the op on the web view's page", timeout=30)
    finally:
        for pod in pods.values():
            if pod.proc is not None and pod.proc.poll() is None:
                pod.proc.terminate()
        codes = {name: pod.proc.wait(30) for name, pod in pods.items() if pod.proc is not None}
        core_v1.delete_collection_namespaced_pod("opsched", label_selector="opsched.io/op-id", grace_period_seconds=0)
    assert codes == dict.fromkeys(pods, 0), "SIGTERM drains and exits 0"
