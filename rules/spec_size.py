"""The size of an op spec, encoded, against ``proto.limits.MAX_SPEC_BYTES``: checked once, by the SDK and the
CLI before a submit is published and by admission at submit, restart, copy and resume, so every event that
carries the spec (``submitted``, ``admitted``) stays well under NATS's max payload with its headers."""
from __future__ import annotations

from opsched.proto import codec
from opsched.proto.limits import MAX_SPEC_BYTES
from opsched.proto.reasons import Refusal
from opsched.proto.spec import OpSpec

SPEC_TOO_LARGE = Refusal.SPEC_TOO_LARGE  # the reason an op over the bound is rejected with


class SpecTooLarge(ValueError):
    """A spec over ``MAX_SPEC_BYTES``, refused before anything is published."""


def spec_bytes(spec: OpSpec) -> int:
    return len(codec.encode(spec))


def too_large(spec: OpSpec) -> str | None:
    """Why ``spec`` is too large to submit (its size and the bound), or None: it is not."""
    size = spec_bytes(spec)
    if size <= MAX_SPEC_BYTES:
        return None
    return (f"the op spec is {size} bytes encoded, over the bound of {MAX_SPEC_BYTES} bytes "
            f"(MAX_SPEC_BYTES, {MAX_SPEC_BYTES // 1024} KiB): make the spec smaller (env, params, inputs, replicas)")
