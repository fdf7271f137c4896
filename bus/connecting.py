"""Opening a NATS connection (services, CLI, SDK): the servers, reconnecting, TLS with the CA that verifies
them (monitoring calls use the same context), and a certificate not trusted reported as such, at once."""
from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path
from typing import Any

import nats
import structlog

from opsched.bus import natsclient
from opsched.bus.refusals import Refusals

CaFile = Path | str | None  # a CA certificate (PEM) that verifies the server: TLS; None: as the URL says

# asyncio's SSL transport logs this (on the ``asyncio`` logger, uvloop's too) each time a TLS connection of
# nats-py's is closed by the server: nats-py upgrades to TLS with ``loop.start_tls`` after the server's INFO,
# which never calls ``connection_made`` on its new ``StreamReaderProtocol``, so the protocol does not know it
# is over SSL and its ``eof_received`` returns True. Nothing is wrong (the transport closes either way); the
# line would reach every CLI user's terminal. Only this message is dropped.
SSL_EOF_NOISE = "returning true from eof_received() has no effect when using ssl"


class _SslEofNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != SSL_EOF_NOISE


def _quiet_ssl_eof() -> None:
    asyncio_logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _SslEofNoise) for f in asyncio_logger.filters):
        asyncio_logger.addFilter(_SslEofNoise())


_quiet_ssl_eof()  # once, where every NATS connection of opsched is opened


SCHEMES = ("nats", "tls")  # opsched speaks NATS over TCP, with TLS or not; not over WebSocket (opsched.entrypoint)


def server_urls(url: str) -> list[str]:
    """``NATS_URL`` names one server or several (a cluster's nodes), comma-separated: ``nats://`` or ``tls://``
    URLs, or ``host:port``. ``ValueError`` naming one that is none of these."""
    urls = [u.strip() for u in url.split(",") if u.strip()]
    if not urls:
        raise ValueError("no NATS server URL given")
    for one in urls:
        scheme = one.partition("://")[0].lower() if "://" in one else SCHEMES[0]
        if scheme not in SCHEMES:
            raise ValueError(f"NATS URL {one!r}: opsched connects with nats:// or tls:// (NATS over WebSocket, "
                             "ws:// and wss://, is not supported)")
    return urls


def client_context(ca_file: Path | str) -> ssl.SSLContext:
    """Trust ``ca_file`` alone and check the server's name against its certificate. Raises
    ``FileNotFoundError``/``ssl.SSLError`` if ``ca_file`` is missing or not a certificate."""
    return ssl.create_default_context(cafile=str(ca_file))


def tls_options(ca_file: CaFile) -> dict[str, Any]:
    """``nats.connect``'s TLS options: none without a CA (TLS still, for a ``tls://`` URL or a server that
    requires it, verified with the system's CAs)."""
    return {"tls": client_context(ca_file)} if ca_file else {}


async def open_connection(url: str, name: str, closing: dict[str, bool], *, connect_timeout: float,
                          max_reconnect_attempts: int, tls_ca_file: CaFile, auth: dict[str, Any] | None = None,
                          refusals: Refusals | None = None, inbox_prefix: str = "_INBOX") -> nats.NATS:
    """Connect to any of the servers in ``url``; reconnect ``max_reconnect_attempts`` times (-1: forever).
    A server whose certificate the CA does not verify raises ``ssl.SSLCertVerificationError`` at once: no
    retry helps, and nats-py would hang closing the failed TLS upgrade. ``closing["now"]`` quiets the logs.
    ``auth``: the options that authenticate (``Credentials.connect_options``); ``refusals`` notes the server's
    refusals of publishes (its permissions); ``inbox_prefix``: where its replies and deliveries come
    (``subjects.inbox_prefix``: the only inbox its user may subscribe to)."""
    log = structlog.get_logger().bind(nats=name)
    refusal: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()

    async def on_error(exc: Exception) -> None:
        if isinstance(exc, ssl.SSLCertVerificationError) and not refusal.done():  # not an EOF mid-handshake
            refusal.set_result(exc)
        if not closing["now"]:
            refused = refusals is not None and refusals.note(exc)
            log.warning("nats_refused" if refused else "nats_error", error=repr(exc))

    async def on_disconnected() -> None:
        if not closing["now"]:
            log.warning("nats_disconnected")

    async def on_reconnected() -> None:
        log.info("nats_reconnected")

    connecting = asyncio.ensure_future(natsclient.connect(
        servers=server_urls(url), name=name, connect_timeout=connect_timeout,
        max_reconnect_attempts=max_reconnect_attempts, reconnect_time_wait=0.5,
        allow_reconnect=True, inbox_prefix=inbox_prefix, error_cb=on_error, disconnected_cb=on_disconnected,
        reconnected_cb=on_reconnected, **tls_options(tls_ca_file), **(auth or {})))
    either: set[asyncio.Future[Any]] = {connecting, refusal}
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    if refusal.done():
        connecting.cancel()
        await asyncio.wait({connecting}, timeout=1.0)
        raise refusal.result()
    refusal.cancel()
    return connecting.result()
