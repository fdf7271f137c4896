"""The webhook signature: Stripe's scheme. ``Opsched-Signature: t=<unix>,v1=<hex>`` where ``<hex>`` is
HMAC-SHA256 over ``"<t>.<body>"`` with the connection's secret. A receiver recomputes it, compares in
constant time, and rejects a timestamp outside its replay window (5 minutes by default)."""
from __future__ import annotations

import hashlib
import hmac

HEADER = "Opsched-Signature"
REPLAY_WINDOW_S = 300


class SignatureError(ValueError):
    """The signature header is missing, malformed, wrong or too old; the message says which."""


def sign(secret: bytes, body: bytes, unix: int) -> str:
    mac = hmac.new(secret, f"{unix}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={unix},v1={mac}"


def verify(secret: bytes, body: bytes, header: str | None, now_unix: float,
           window_s: float = REPLAY_WINDOW_S) -> int:
    """Check ``header`` for ``body``; return its timestamp or raise ``SignatureError``.

    >>> h = sign(b"s3cret", b'{"a":1}', 1700000000)
    >>> verify(b"s3cret", b'{"a":1}', h, now_unix=1700000060)
    1700000000
    """
    if not header:
        raise SignatureError(f"no {HEADER} header")
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureError(f"{HEADER}: malformed part {part!r}")
        fields.setdefault(key, []).append(value)
    try:
        t = int(fields["t"][0])
    except (KeyError, ValueError):
        raise SignatureError(f"{HEADER}: no integer t=") from None
    if abs(now_unix - t) > window_s:
        raise SignatureError(f"{HEADER}: timestamp {t} outside the {window_s:g} s replay window")
    expected = sign(secret, body, t).partition(",v1=")[2]
    if not any(hmac.compare_digest(expected, v) for v in fields.get("v1", [])):
        raise SignatureError(f"{HEADER}: no v1 signature matches")
    return t
