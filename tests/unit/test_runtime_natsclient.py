"""The runtime's header parser gives what nats-py's own gives (``services.runtime.natsclient``)."""
from __future__ import annotations

import nats.aio.client
import pytest

from services.runtime.natsclient import Client

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


@pytest.mark.parametrize("raw", CASES)
def test_the_header_lines_parse_as_nats_py_parses_them(raw):
    assert Client._parse_header_lines(raw) == nats.aio.client.Client._parse_header_lines(raw)
