"""Which ``Host`` headers the web view answers (issue 28: DNS rebinding). A page on another site whose name an
attacker points at 127.0.0.1 reaches the view with the attacker's name in ``Host``; the view answers only the
names of the address it serves on: the loopback names (``localhost``, ``127.0.0.1``, ``::1``), the host it binds
(``--host`` / ``--ui-host``) and, bound to every interface (``0.0.0.0``, ``::``), this machine's name and any IP
address (no rebinding page can send an address as its host: its origin is a name). The port, when the header
has one, must be the one it serves on. Anything else: 421 (a host not served here); no or a malformed header: 400."""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
EVERY_INTERFACE = frozenset({"0.0.0.0", "::", ""})

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def _split(header: str) -> tuple[str, int | None] | None:
    """``Host``'s name (lowercase, without a trailing dot or brackets) and port; None: malformed."""
    if not header or any(c in header for c in "/?#@\\ \t"):
        return None
    try:
        parts = urlsplit("//" + header)
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name:
        return None
    return name.rstrip("."), port


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def served_names(bind_host: str) -> frozenset[str]:
    """The names the view answers to, bound to ``bind_host``."""
    names = set(LOOPBACK) | {bind_host.strip("[]").lower().rstrip(".")}
    if bind_host in EVERY_INTERFACE:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names - {""})


def verdict(header: str | None, bind_host: str, port: int) -> int | None:
    """None: answer; else the status refusing it (400: none or malformed; 421: a host or port not served here)."""
    if header is None:
        return 400
    split = _split(header)
    if split is None:
        return 400
    name, given = split
    if (given if given is not None else 80) != port:
        return 421
    if name in served_names(bind_host) or (bind_host in EVERY_INTERFACE and _is_address(name)):
        return None
    return 421


class HostCheck:
    """ASGI middleware: every HTTP request's ``Host`` judged by ``verdict`` before the app sees it."""

    def __init__(self, app: ASGIApp, bind_host: str, port: int) -> None:
        self.app, self.bind_host, self.port = app, bind_host, port

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":  # (it serves no websocket)
            await self.app(scope, receive, send)
            return
        hosts = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"host"]
        status = verdict(hosts[0] if len(hosts) == 1 else None, self.bind_host, self.port)
        if status is None:
            await self.app(scope, receive, send)
            return
        body = (b"misdirected request: this web view answers only its own address\n" if status == 421
                else b"bad request: one Host header is required\n")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
