"""The wire contract (d): evolution: unknown fields are tolerated, missing required ones are not."""
from __future__ import annotations

import json

import msgspec
import pytest

from opsched.proto import codec
from tests.contract.wire_samples import SAMPLES, wire_of

# ---- (d) evolution ----------------------------------------------------------------------------

def _with(tag: str, **changes) -> bytes:
    doc = wire_of(SAMPLES[tag])
    doc.update(changes)
    return json.dumps(doc).encode()


def _without(tag: str, key: str) -> bytes:
    doc = wire_of(SAMPLES[tag])
    del doc[key]
    return json.dumps(doc).encode()


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_an_unknown_extra_field_is_tolerated(tag):
    assert codec.decode(_with(tag, addedInAFutureVersion={"x": 1})) == SAMPLES[tag]


def test_an_unknown_field_inside_the_spec_is_tolerated():
    doc = wire_of(SAMPLES["submit"])
    doc["spec"]["container"]["gpuSharing"] = "mig"
    assert codec.decode(json.dumps(doc).encode()) == SAMPLES["submit"]


@pytest.mark.parametrize("tag,key", [
    ("submitted", "opId"), ("submitted", "spec"), ("submitted", "queue"), ("submitted", "at"),
    ("cost_estimated", "estimate"), ("failed", "reason"), ("admitted", "podName"),
    ("submit", "spec"), ("stop", "opId"),
], ids=lambda v: str(v))
def test_a_missing_required_field_fails_validation(tag, key):
    with pytest.raises(msgspec.ValidationError, match=key):
        codec.decode(_without(tag, key))


def test_an_unknown_type_fails_validation():
    with pytest.raises(msgspec.ValidationError):
        codec.decode(_with("stopped", type="exploded"))


def test_malformed_json_fails_with_a_decode_error():
    with pytest.raises(msgspec.DecodeError):
        codec.decode(b"{not json")
