"""A real HTTP receiver on loopback for the notifier's tests (tests/service/test_notifications.py, the
integration test): it records what arrives, and can answer 503s first or hang."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

SECRET = b"test-signing-secret"


@dataclass
class Receiver:
    """A loopback HTTP receiver: answers ``fail`` 503s first (or hangs while ``hang`` is set), then 200."""
    fail: int = 0
    hang: threading.Event | None = None
    got: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    port: int = 0

    def serve(self) -> http.server.ThreadingHTTPServer:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if receiver.hang is not None:
                    receiver.hang.wait(30)
                if receiver.fail > 0:
                    receiver.fail -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                receiver.got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server

    def at(self, path: str) -> list[tuple[dict[str, str], bytes]]:
        return [(h, b) for p, h, b in self.got if p == path]


def serving() -> Iterator[Receiver]:
    """A receiver serving until the generator is closed (a test module's ``receiver`` fixture yields from it)."""
    r = Receiver()
    server = r.serve()
    yield r
    if r.hang is not None:
        r.hang.set()
    server.shutdown()


def connections_file(tmp_path, port: int, subscriptions: str = "") -> str:
    """A connections file naming the receiver as a webhook (``ops-hook``, signed with ``SECRET``), a CloudEvents
    sink (``ce``) and a Slack-compatible one (``chat``)."""
    (tmp_path / "secret").write_bytes(SECRET + b"\n")
    path = tmp_path / "connections.yaml"
    path.write_text(f"""
connections:
  - name: ops-hook
    kind: webhook
    url: http://127.0.0.1:{port}/hook
    secretFile: {tmp_path / 'secret'}
  - name: ce
    kind: cloudevents
    url: http://127.0.0.1:{port}/ce
  - name: chat
    kind: slack
    url: http://127.0.0.1:{port}/slack
{subscriptions}""")
    return str(path)


