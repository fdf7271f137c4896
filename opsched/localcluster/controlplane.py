"""Start a real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-scheduler.

The Kubernetes binaries (v1.20.2) are built once from Debian's source package by
``scripts/build-control-plane.sh`` into a cache directory outside the repository; etcd and
openssl come from Debian. There is no kube-controller-manager and no kubelet: use
``opsched.localcluster.simkubelet`` for nodes.

Run ``python -m opsched.localcluster.controlplane`` to start one by hand.
"""
from __future__ import annotations

import argparse
import atexit
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import urllib3
import yaml

from opsched.children import die_with_parent
from opsched.natsserver import free_port  # a free TCP port on 127.0.0.1

K8S_VERSION = "v1.20.2"
KUBE_COMMANDS = ("kube-apiserver", "kube-scheduler", "kubectl")  # what the build script builds
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build-control-plane.sh"
_LOG_TAIL_LINES = 40


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, found or started."""


def cache_dir() -> Path:
    """``$OPSCHED_CACHE``, else ``$XDG_CACHE_HOME/opsched``, else ``~/.cache/opsched``."""
    explicit = os.environ.get("OPSCHED_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opsched"


def binaries_dir() -> Path:
    """Where the build script puts kube-apiserver, kube-scheduler and kubectl (``kubectl.kubectl_path``)."""
    return cache_dir() / f"k8s-{K8S_VERSION}" / "bin"


def _missing_tools() -> list[str]:
    missing = [str(path) for n in KUBE_COMMANDS if not os.access(path := binaries_dir() / n, os.X_OK)]
    patches = BUILD_SCRIPT.parent / "control-plane-patches"  # what the build applies: binaries without one are stale
    wanted = "\n".join(sorted(p.name for p in patches.glob("*.patch"))) if patches.is_dir() else None
    stamp = binaries_dir() / "PATCHES"
    if not missing and wanted is not None and (stamp.read_text().strip() if stamp.is_file() else "") != wanted:
        missing.append(f"{binaries_dir()} built with {wanted.replace(chr(10), ', ')}")
    return missing + [tool for tool in ("etcd", "openssl") if shutil.which(tool) is None]


def ensure_built(build: bool = True) -> Path:
    """Return the binaries directory, running the build script first if anything is missing.

    The build (about 6 minutes cold on 2 cores) streams its progress to stderr. With
    ``build=False`` a missing binary raises ControlPlaneError instead.
    """
    missing = _missing_tools()
    if not missing:
        return binaries_dir()
    hint = f"run {BUILD_SCRIPT} (builds Kubernetes {K8S_VERSION} from Debian sources, ~6 min)"
    if not build:
        raise ControlPlaneError(f"missing {', '.join(missing)}; {hint}")
    if not BUILD_SCRIPT.is_file() or shutil.which("bash") is None:
        raise ControlPlaneError(f"missing {', '.join(missing)} and no build script at {BUILD_SCRIPT}")
    print(f"[opsched] building the local control plane: {BUILD_SCRIPT}", file=sys.stderr, flush=True)
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.DEVNULL, stderr=None, check=False)
    if result.returncode != 0:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {result.returncode}; {hint}")
    missing = _missing_tools()
    if missing:
        raise ControlPlaneError(f"still missing after the build: {', '.join(missing)}; {hint}")
    return binaries_dir()


def tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' when it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class ControlPlane:
    """etcd + kube-apiserver + kube-scheduler on random loopback ports.

    ``workdir`` holds data, keys, certificates, ``kubeconfig.yaml`` and ``logs/*.log``. When
    it is not given, a temporary directory is created and removed again by ``stop()`` (kept
    if startup failed, for its logs).
    """

    def __init__(self, workdir: Path | None = None) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="opsched-cp-"))
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: dict[str, IO[bytes]] = {}
        self._token: str | None = None
        self._server: str | None = None
        self.startup_seconds: float | None = None

    # -- properties -------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig.yaml"

    @property
    def server(self) -> str:
        if self._server is None:
            raise ControlPlaneError("the control plane has not been started")
        return self._server

    @property
    def token(self) -> str:
        if self._token is None:
            raise ControlPlaneError("the control plane has not been started")
        return self._token

    log_dir = property(lambda self: self.workdir / "logs")  # the processes' logs

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> ControlPlane:
        """Start everything; return when the API server is ready and the scheduler schedules."""
        if self._procs:
            raise ControlPlaneError("the control plane is already running")
        bins = ensure_built(build=False)
        began = time.monotonic()
        deadline = began + timeout
        try:
            self._prepare_files()
            etcd_url = self._start_etcd()
            self._start_apiserver(bins, etcd_url)
            self._write_kubeconfig()
            self._wait_until(self._apiserver_ready, deadline, "kube-apiserver", "/readyz to answer ok")
            self._start_scheduler(bins)
            self._wait_for_scheduler(deadline)
        except BaseException:
            self._own_workdir = False  # keep the logs of a failed start
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        atexit.register(self.stop)
        return self

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM every process, SIGKILL what is left after ``grace`` seconds. Idempotent."""
        atexit.unregister(self.stop)
        procs = list(reversed(self._procs.values()))
        self._procs.clear()
        for proc in procs:  # reverse start order: the API server shuts down slowly without etcd
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        if self._own_workdir and procs:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def kill(self, name: str = "kube-apiserver") -> None:
        """kill -9 one process (a crash); ``revive`` (on the main thread: a child dies with the thread that
        started it) starts it again with the same flags and data."""
        self._procs[name].kill()
        self._procs[name].wait()

    def revive(self, name: str = "kube-apiserver", timeout: float = 60.0) -> None:
        self._logs.pop(name).close()
        self._spawn(name, list(self._procs[name].args))  # type: ignore[arg-type]
        if name == "kube-apiserver":
            self._wait_until(self._apiserver_ready, time.monotonic() + timeout, name, "/readyz to answer ok")

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers for users ----------------------------------------------------------------
    def pids(self) -> dict[str, int]:  # its running processes (etcd, kube-apiserver, kube-scheduler) by name
        return {name: proc.pid for name, proc in self._procs.items() if proc.poll() is None}

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` for this cluster (close it when done)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        """Create namespace ``name`` with ``labels``; if it exists, set them on it."""
        from kubernetes import client
        with self.api_client() as api:
            try:
                client.CoreV1Api(api).create_namespace({"metadata": {"name": name, "labels": labels or {}}})
            except client.ApiException as e:
                if e.status != 409:
                    raise
                client.CoreV1Api(api).patch_namespace(name, {"metadata": {"labels": labels or {}}})

    # -- startup steps ----------------------------------------------------------------------
    def _prepare_files(self) -> None:
        for sub in ("etcd", "certs", "logs", "pki"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        pki = self.workdir / "pki"
        self._token = secrets.token_hex(24)
        tokens = pki / "tokens.csv"
        tokens.write_text(f'{self._token},admin,admin-uid,"system:masters"\n')
        tokens.chmod(0o600)
        for argv in (
            ["openssl", "genrsa", "-out", str(pki / "sa.key"), "2048"],
            ["openssl", "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")],
        ):
            result = subprocess.run(argv, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise ControlPlaneError(f"{' '.join(argv)} failed: {result.stderr.strip()}")

    def _start_etcd(self) -> str:
        client_url = f"http://127.0.0.1:{free_port()}"
        peer_url = f"http://127.0.0.1:{free_port()}"
        self._spawn("etcd", [
            shutil.which("etcd") or "etcd", "--name=opsched", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client_url}", f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=opsched={peer_url}", "--log-level=warn",
        ])
        return client_url

    def _start_apiserver(self, bins: Path, etcd_url: str) -> None:
        port = free_port()
        pki = self.workdir / "pki"
        self._server = f"https://127.0.0.1:{port}"
        self._spawn("kube-apiserver", [
            str(bins / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", "--insecure-port=0",
            f"--cert-dir={self.workdir / 'certs'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--token-auth-file={pki / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount", "--service-cluster-ip-range=10.96.0.0/24",
            "--kubelet-preferred-address-types=InternalIP",  # the simulated kubelet's: 127.0.0.1 (``pods/log``)
        ])

    def _start_scheduler(self, bins: Path) -> None:
        self._spawn("kube-scheduler", [
            str(bins / "kube-scheduler"), f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false", "--port=0", "--secure-port=0",
        ])

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "opsched-local",
                          "cluster": {"server": self.server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "opsched-local",
                          "context": {"cluster": "opsched-local", "user": "admin", "namespace": "default"}}],
            "current-context": "opsched-local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed by stop()
        self._logs[name] = log
        self._procs[name] = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent,
        )

    # -- readiness --------------------------------------------------------------------------
    def _failure(self, name: str, what: str) -> ControlPlaneError:
        log = self.log_dir / f"{name}.log"
        return ControlPlaneError(f"{what}\n--- last lines of {log} ---\n{tail(log)}")

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            code = proc.poll()
            if code is not None:
                raise self._failure(name, f"{name} exited with code {code} during startup")

    def _wait_until(self, ready: Callable[[], bool], deadline: float, name: str, what: str) -> None:
        while True:
            self._check_alive()
            if ready():
                return
            if time.monotonic() > deadline:
                raise self._failure(name, f"timed out waiting for {what}")
            time.sleep(0.1)

    def _apiserver_ready(self) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # self-signed serving certificate on loopback
        request = urllib.request.Request(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=2) as response:
                return response.status == 200 and response.read().strip() == b"ok"
        except OSError:
            return False

    def _wait_for_scheduler(self, deadline: float) -> None:
        """Create an unschedulable probe pod; the scheduler works once it marks it Unschedulable."""
        from kubernetes import client

        name = f"opsched-scheduler-probe-{secrets.token_hex(4)}"
        probe = {
            "metadata": {"name": name},
            "spec": {"nodeSelector": {"opsched.io/scheduler-probe": "no-such-node"},
                     "containers": [{"name": "probe", "image": "probe"}]},
        }
        with self.api_client() as api:
            core = client.CoreV1Api(api)

            def scheduled_condition() -> bool:
                try:
                    pod = core.read_namespaced_pod(name, "default")
                except client.ApiException as e:
                    if e.status != 404:
                        raise
                    core.create_namespaced_pod("default", probe)  # "default" may still be coming
                    return False
                return any(c.type == "PodScheduled" for c in pod.status.conditions or [])

            try:
                with warnings.catch_warnings():  # loopback, self-signed: insecure-skip-tls-verify
                    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                    self._wait_until(_ignore_api_errors(scheduled_condition), deadline, "kube-scheduler",
                                     "kube-scheduler to process a probe pod")
                    _delete_quietly(core, name, "default")
            except BaseException:
                _delete_quietly(core, name, "default")
                raise


def _ignore_api_errors(check: Callable[[], bool]) -> Callable[[], bool]:
    from kubernetes import client

    def wrapped() -> bool:
        try:
            return check()
        except client.ApiException:
            return False

    return wrapped


def _delete_quietly(core: Any, name: str, namespace: str) -> None:
    from kubernetes import client

    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except client.ApiException:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a local Kubernetes control plane until Ctrl-C.")
    parser.add_argument("--workdir", type=Path, help="keep data, logs and kubeconfig here (default: temporary)")
    parser.add_argument("--timeout", type=float, default=60.0, help="startup timeout in seconds")
    args = parser.parse_args(argv)
    try:
        ensure_built()
        cp = ControlPlane(args.workdir).start(timeout=args.timeout)
    except ControlPlaneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    try:
        print(f"control plane ready in {cp.startup_seconds:.1f}s at {cp.server}", file=sys.stderr)
        print(f"logs: {cp.log_dir}\nexport KUBECONFIG={cp.kubeconfig}", file=sys.stderr)
        print(cp.kubeconfig, flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
