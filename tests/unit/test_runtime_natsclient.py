"""The runtime's nats-py client gives what nats-py's own gives (``bus.natsclient``): header lines
parsed (when read) and header blocks written."""
from __future__ import annotations

import nats.aio.client
import nats.errors
import pytest

from opsched.bus.natsclient import Client, Headers, encode_headers

CASES = [
    b"Nats-Msg-Id: op-1.submitted.0\r\nce-specversion: 1.0\r\nce-type: io.opsched.submitted\r\n"
    b"ce-time: 2026-11-25T04:00:00.123456Z\r\n\r\n",
    b"A:1\r\nB:\tspaced \r\nC: a: b: c\r\n\r\n",
    b"Bad Name: x\r\nGood: y\r\n",
    b"caf\xc3\xa9: non-ascii name\r\nOk: caf\xc3\xa9\r\n",
    b"Broken: \xff\xfe\r\nno colon line\r\n\r\n\r\n",
    b"",
    b"  Padded  :  value  \r\n",
]
BLOCKS = [b"NATS/1.0\r\n" + raw for raw in CASES if raw] + [
    b"NATS/1.0 404 No Messages\r\n\r\n",
    b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1016\r\nNats-Last-Stream: 1024\r\n\r\n",
    b"NATS/1.0 503\r\n\r\n",
    b"NATS/1.0\r\n\r\n",
]


@pytest.mark.parametrize("raw", CASES)
def test_the_header_lines_parse_as_nats_py_parses_them(raw):
    assert Client._parse_header_lines(raw) == nats.aio.client.Client._parse_header_lines(raw)


@pytest.mark.parametrize("block", BLOCKS)
async def test_a_header_block_reads_as_nats_py_reads_it(block):
    ours, theirs = await Client()._process_headers(block), await nats.aio.client.Client()._process_headers(block)
    assert (ours or None) == theirs or (not ours and not theirs)
    if theirs:
        assert dict(ours) == theirs
        assert {name: ours.get(name) for name in [*theirs, "Status", "Missing"]} == \
               {name: theirs.get(name) for name in [*theirs, "Status", "Missing"]}


def test_a_name_that_does_not_occur_is_answered_without_parsing():
    headers = Headers(b"Nats-Msg-Id: x\r\nce-type: t\r\n\r\n")
    assert headers.get("Status") is None and "Status" not in headers and headers
    assert headers._parsed is None
    assert headers["ce-type"] == "t" and len(headers) == 2 and headers == {"Nats-Msg-Id": "x", "ce-type": "t"}
    with pytest.raises(KeyError):
        headers["Status"]


def test_a_name_found_only_in_a_value_is_still_absent():
    headers = Headers(b"Note: Status ok\r\n")
    assert headers.get("Status", "none") == "none" and "Status" not in headers


class Captured(nats.aio.client.Client):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []

    async def _send_command(self, cmd, priority=False):
        self.sent.append(cmd)


class CapturedOurs(Client, Captured):
    pass


HEADERS = [
    {"Nats-Msg-Id": "op-1.submitted.0", "ce-type": "io.opsched.submitted", "ce-time": "2026-11-25T04:00:00Z"},
    {" padded ": "  v  ", "": "skipped", "multi": "a\r\nb\nc"},
    {"caf\u00e9-ok": "caf\u00e9"},  # a non-ASCII value is written as UTF-8
    {},
]


@pytest.mark.parametrize("headers", HEADERS)
async def test_a_publish_writes_what_nats_py_writes(headers):
    ours, theirs = CapturedOurs(), Captured()
    for client in (ours, theirs):
        client._flush_queue = None
    try:
        await theirs._send_publish("ops.x", "_INBOX.r1", b"{}", 2, headers)
    except nats.errors.BadHeaderError:
        with pytest.raises(nats.errors.BadHeaderError):
            await ours._send_publish("ops.x", "_INBOX.r1", b"{}", 2, headers)
        return
    await ours._send_publish("ops.x", "_INBOX.r1", b"{}", 2, headers)
    assert ours.sent == theirs.sent
    assert ours.stats["out_msgs"] == theirs.stats["out_msgs"] == 1


async def test_a_bad_header_name_is_refused_as_nats_py_refuses_it():
    with pytest.raises(nats.errors.BadHeaderError):
        encode_headers({"bad name": "x"})
    assert encode_headers({"Good": " x "}) == b"NATS/1.0\r\nGood: x\r\n\r\n"
