"""The gateway's bearer tokens: ``ops_<id>_<secret>``, each mapped to an identity (a client user of the bus, so a
role: ``proto.permissions.VERBS``), with an expiry, a revocation and a rate. Stored in a JSON file (0600; in a
deployment a mounted Secret) as the SHA-256 of the secret: the secret is 32 random bytes, so a slow hash would buy
nothing; compared with ``hmac.compare_digest``. The gateway re-reads the file when it changes (its mtime), so a
revoke reaches every replica sharing the file without a restart. ``opsched tokens`` writes it."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from opsched.proto.outputs import TokenItem

PREFIX = "ops"
DEFAULT_RATE = 10.0  # requests a second a token may make ...
DEFAULT_BURST = 20  # ... of which this many at once
FILE_NAME = "gateway-tokens.json"  # under ``<data dir>/auth/``


@dataclass(frozen=True)
class Token:
    id: str
    identity: str  # the bus user the token acts as
    sha256: str  # of the secret
    created: str  # RFC 3339
    expires: str | None = None
    revoked: str | None = None
    rate: float = DEFAULT_RATE
    burst: int = DEFAULT_BURST

    def listed(self) -> TokenItem:
        """What ``opsched tokens list`` shows: everything but the hash."""
        return TokenItem(id=self.id, identity=self.identity, created=_parse(self.created),
                         expires=_parse(self.expires) if self.expires else None,
                         revoked=_parse(self.revoked) if self.revoked else None, rate=self.rate, burst=self.burst)


class Unauthorized(Exception):
    """No token, an unknown one, or one revoked or expired: ``reason`` says which of the latter two only."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _parse(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00"))


def _stamp(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split(token: str) -> tuple[str, str] | None:
    """``ops_<id>_<secret>`` -> (id, secret); None if it is not of that form."""
    prefix, sep, rest = token.partition("_")
    token_id, sep2, secret = rest.partition("_")
    if prefix != PREFIX or not sep or not sep2 or not token_id or not secret:
        return None
    return token_id, secret


class TokenStore:
    """The tokens of one file, re-read whenever its mtime changes; ``now`` the clock expiries are judged by."""

    def __init__(self, path: Path, now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.path, self.now = Path(path), now
        self._tokens: dict[str, Token] = {}
        self._mtime: int | None = None

    def tokens(self) -> dict[str, Token]:
        """Every token by id, as the file says now (read again if it changed; no file: none)."""
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._tokens, self._mtime = {}, None
            return self._tokens
        if mtime != self._mtime:
            data = json.loads(self.path.read_text() or "{}")
            self._tokens = {t["id"]: Token(**t) for t in data.get("tokens", [])}
            self._mtime = mtime
        return self._tokens

    def authenticate(self, header: str | None) -> Token:
        """The token of an ``Authorization: Bearer ...`` header, valid now; else ``Unauthorized``."""
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("a bearer token is required (Authorization: Bearer ops_...)")
        parts = split(value.strip())
        token = self.tokens().get(parts[0]) if parts else None
        if parts is None or token is None or not hmac.compare_digest(token.sha256, _digest(parts[1])):
            raise Unauthorized("the token is not valid")
        if token.revoked:
            raise Unauthorized("the token was revoked")
        if token.expires and _parse(token.expires) <= self.now():
            raise Unauthorized("the token has expired")
        return token

    def create(self, identity: str, expires_in: timedelta | None = None, rate: float = DEFAULT_RATE,
               burst: int = DEFAULT_BURST) -> tuple[Token, str]:
        """A new token for ``identity``, written to the file: (its record, the token itself, shown once)."""
        token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        now = self.now()
        token = Token(id=token_id, identity=identity, sha256=_digest(secret), created=_stamp(now),
                      expires=_stamp(now + expires_in) if expires_in else None, rate=rate, burst=burst)
        self._write({**self.tokens(), token_id: token})
        return token, f"{PREFIX}_{token_id}_{secret}"

    def revoke(self, token_id: str) -> Token:
        """Revoke a token (KeyError: no such id); revoked twice: the first time stays."""
        token = self.tokens()[token_id]
        if not token.revoked:
            token = replace(token, revoked=_stamp(self.now()))
            self._write({**self.tokens(), token_id: token})
        return token

    def _write(self, tokens: dict[str, Token]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"tokens": [asdict(t) for t in tokens.values()]}, out, indent=1)
        os.replace(partial, self.path)  # whole or not at all, for every replica reading it
        self._mtime = None


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``15m``, ``90s`` -> a timedelta (ValueError naming the text)."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    try:
        value = float(text[:-1])
        seconds = value * units[text[-1]]
    except (KeyError, ValueError, IndexError):
        raise ValueError(f"--expires {text!r}: expected a number and a unit, e.g. 30d, 12h, 15m") from None
    if seconds <= 0:
        raise ValueError(f"--expires {text!r}: must be positive")
    return timedelta(seconds=seconds)
