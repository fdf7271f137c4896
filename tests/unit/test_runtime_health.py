"""The health server cannot be held by a client (issue 28): the whole request head must come within its read
timeout; one that sends nothing, trickles its headers or sends too many is cut off, and others are answered
meanwhile. Real sockets on loopback, a read timeout of a fraction of a second; each wait is bounded."""
from __future__ import annotations

import asyncio
import contextlib

from opsched.services.runtime.health import MAX_HEADER_LINES, HealthServer

TIMEOUT_S = 0.3
CUT_OFF_WITHIN_S = 5.0  # far more than the read timeout, far less than a held connection


async def served() -> HealthServer:
    server = HealthServer(lambda: {"connected": True, "ready": True}, read_timeout_s=TIMEOUT_S)
    await server.start()
    return server


async def get(port: int, path: str = "/healthz") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), CUT_OFF_WITHIN_S)
    writer.close()
    return answer


async def cut_off(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before it closed the connection (b"": nothing); fails if it keeps it open."""
    with contextlib.suppress(ConnectionError):
        return await asyncio.wait_for(reader.read(), CUT_OFF_WITHIN_S)
    return b""


async def test_a_client_that_sends_nothing_is_cut_off_and_holds_no_one_else():
    server = await served()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert (await get(server.port)).startswith(b"HTTP/1.1 200")  # answered while the silent one waits
        assert await cut_off(reader) == b""
        writer.close()
    finally:
        await server.stop()


async def test_a_client_trickling_its_headers_is_cut_off_at_the_read_timeout_not_per_line():
    server = await served()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        closed = asyncio.ensure_future(cut_off(reader))

        async def trickle() -> None:  # a header line at a time, each well within the timeout, never the blank line
            with contextlib.suppress(ConnectionError):
                for i in range(1000):
                    writer.write(f"X-Slow-{i}: 1\r\n".encode())
                    await writer.drain()
                    await asyncio.sleep(TIMEOUT_S / 10)
        trickling = asyncio.ensure_future(trickle())
        assert await closed == b""  # cut off, with the trickle still going
        assert not trickling.done()
        trickling.cancel()
        writer.close()
    finally:
        await server.stop()


async def test_a_client_sending_too_many_headers_is_cut_off_unanswered():
    server = await served()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\n" + b"X-A: 1\r\n" * (MAX_HEADER_LINES + 1) + b"\r\n")
        await writer.drain()
        assert await cut_off(reader) == b""
        writer.close()
        assert (await get(server.port)).startswith(b"HTTP/1.1 200")
    finally:
        await server.stop()
