"""nats-py's client with less Python per message: header lines parsed only when read, and written without a
regex per line.

Every event carries its CloudEvents headers (``addressing``), so every delivery, replayed message and follow
brings about nine header lines and every publish writes them; in the (b) pipeline the two were about 8% of
the samples (py-spy), 3.2% after. Two changes, each giving what nats-py gives:

- **Headers parsed when read** (``Headers``): a message's header block is kept as bytes and parsed on the
  first read of a name that occurs in it. Most readers never look (a follow's fold, a handler), and
  nats-py's own checks of every delivery (``Status``, a pull's status messages) ask for names that do not
  occur, answered without parsing. Inline status lines (``NATS/1.0 404``) are nats-py's path. The parse is
  nats-py's result (names ASCII without whitespace, kept as written; values stripped, UTF-8 with
  replacement), by decoding the block once and checking names with a regex: 2.6 µs a message against 5.6.
  One difference: a block whose every line is malformed reads as an empty mapping, where nats-py gives None.
- **Headers written without a regex per line** (``encode_headers``): a name is checked once (nats-py's
  rule: stripped, empty skipped, the token characters only, else ``BadHeaderError``) and remembered; a
  value is stripped and its line breaks become spaces, as nats-py does.

(Taking a pull consumer's already queued messages without nats-py's task per ``next_msg`` was measured too and
left out: fetches returned sooner with fewer messages, so more pull requests, and the server's CPU per op rose.)

Bound to nats-py internals (``_process_headers``, ``_send_publish``, ``_send_command``, ``_flush_pending``): the
version is pinned in pyproject.toml, and ``tests/unit/test_runtime_natsclient.py`` compares each with nats-py's."""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import nats
import nats.aio.client
import nats.errors

_WHITESPACE = re.compile(r"\s")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # nats-py's rule for a header name
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_HDR_LINE = b"NATS/1.0"
_NAMES_KEPT = 512  # checked names remembered (ours are a dozen; a caller's own are not unbounded)
_checked: dict[str, str] = {}


def parse_header_lines(raw: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in raw.decode("utf-8", "replace").split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep:
            continue
        key = name.strip()
        if not key.isascii() or "\ufffd" in key or _WHITESPACE.search(key):
            continue
        out[key] = value.strip()
    return out


class Headers(Mapping[str, str]):
    """A message's header lines, parsed on the first read that needs them."""

    __slots__ = ("_raw", "_parsed")

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._parsed: dict[str, str] | None = None

    def _lines(self) -> dict[str, str]:
        parsed = self._parsed
        if parsed is None:
            parsed = self._parsed = parse_header_lines(self._raw)
        return parsed

    def _absent(self, key: object) -> bool:
        """Certainly not a name here: a parsed name is a stretch of the block, kept as written."""
        return self._parsed is None and isinstance(key, str) and key.isascii() and key.encode() not in self._raw

    def get(self, key: str, default: Any = None) -> Any:
        return default if self._absent(key) else self._lines().get(key, default)

    def __contains__(self, key: object) -> bool:
        return not self._absent(key) and key in self._lines()

    def __getitem__(self, key: str) -> str:
        if self._absent(key):
            raise KeyError(key)
        return self._lines()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines())

    def __len__(self) -> int:
        return len(self._lines())

    def __bool__(self) -> bool:  # asked of every delivery: a block with a name line is taken as not empty
        return bool(self._parsed) if self._parsed is not None else b":" in self._raw

    def __repr__(self) -> str:
        return f"Headers({self._lines()!r})"


def _name(key: str) -> str:
    name = _checked.get(key)
    if name is None:
        name = key.strip()
        if name and not _TOKEN.fullmatch(name):
            raise nats.errors.BadHeaderError(name)
        if len(_checked) < _NAMES_KEPT:
            _checked[key] = name
    return name


def encode_headers(headers: Mapping[str, Any]) -> bytes:
    """The header block nats-py writes for ``headers``."""
    parts = ["NATS/1.0\r\n"]
    for key, value in headers.items():
        name = _name(key)
        if not name:
            continue
        text = value.strip()
        if "\r" in text or "\n" in text:
            text = text.translate(_NEWLINES)
        parts.append(f"{name}: {text}\r\n")
    parts.append("\r\n")
    return "".join(parts).encode()


class Client(nats.aio.client.Client):
    _parse_header_lines = staticmethod(parse_header_lines)

    async def _process_headers(self, headers: bytes) -> Any:
        if not headers or headers[len(_HDR_LINE):len(_HDR_LINE) + 1] == b" ":  # none, or an inline status
            return await super()._process_headers(headers)
        raw = headers[len(_HDR_LINE) + 2:]
        return Headers(raw) if len(raw) > 2 else None

    async def _send_publish(self, subject: str, reply: str, payload: bytes, payload_size: int,
                            headers: dict[str, Any] | None) -> None:
        if headers is None or subject == "":
            return await super()._send_publish(subject, reply, payload, payload_size, headers)
        block = encode_headers(headers)
        command = f"HPUB {subject} {reply} {len(block)} {len(block) + payload_size}\r\n".encode()
        self.stats["out_msgs"] += 1
        self.stats["out_bytes"] += payload_size
        await self._send_command(command + block + payload + b"\r\n")
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()


async def connect(**options: Any) -> nats.NATS:
    """``nats.connect`` with this client."""
    client = Client()
    await client.connect(**options)
    return client
