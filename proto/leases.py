"""Leases: which instance of a role (admission) decides, and the claim that fences the others.

``Lease`` is the value of the role's key in the lease bucket (``proto.subjects.LEASE_BUCKET``), changed
only by compare-and-set on the key's revision: who holds it and until when (the holder's clock).
``LeaderClaimed`` is published on ``proto.subjects.lease_claim(role)`` (stream ``OPSCHED_OPS``) by an
instance that just acquired the lease; its stream sequence fences that leader's decisions (a publish
expecting it as the subject's last sequence is refused once another instance has claimed since). It is
not an op event (no ``opId``): op views and folds skip it, as they skip any message they cannot decode.
"""
from __future__ import annotations

from datetime import datetime

import msgspec

from opsched.proto.spec import Wire


class Lease(Wire, kw_only=True):
    holder: str  # one process: host, pid and a random suffix
    expires_at: datetime  # by the holder's clock; others take it over after this (on theirs)


class LeaderClaimed(Wire, tag="leader_claimed", tag_field="type", kw_only=True):
    role: str  # "admission"
    holder: str
    lease_revision: int  # the lease key's revision this holder acquired
    at: datetime


_claim_decoder = msgspec.json.Decoder(LeaderClaimed)


def is_claim(data: bytes) -> bool:
    """Whether an op-stream message is a leader's claim (which op folds skip without a word)."""
    try:
        _claim_decoder.decode(data)
    except Exception:  # noqa: BLE001 - not a claim, however it fails (too deep, not UTF-8, ...)
        return False
    return True
