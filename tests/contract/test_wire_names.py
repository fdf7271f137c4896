"""The wire contract (b): tags are the wire ``type``, and keys are camelCase."""
from __future__ import annotations

import pytest

from opsched.proto import codec
from opsched.proto.events import EVENTS, event_type
from tests.contract.wire_samples import FULL_SPEC, MESSAGES, SAMPLES, tag_of, wire_of

# ---- (b) tags and wire names ------------------------------------------------------------------

def test_tags_are_unique_across_events_and_commands():
    tags = [tag_of(c) for c in MESSAGES]
    assert all(isinstance(tag, str) and tag for tag in tags)
    assert len(tags) == len(set(tags)), f"duplicate tags: {sorted(t for t in tags if tags.count(t) > 1)}"


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_the_tag_is_the_type_field_on_the_wire(tag):
    message = SAMPLES[tag]
    assert wire_of(message)["type"] == tag == codec.type_of(message)


@pytest.mark.parametrize("cls", EVENTS, ids=lambda c: tag_of(c))
def test_event_type_names_the_tag(cls):
    assert event_type(cls) == tag_of(cls)


def _keys(value) -> list[str]:
    """Every object key of a JSON document, except inside free-form maps of user data."""
    free_form = {"params", "inputs", "outputs", "labels", "annotations", "nodeSelector", "limits",
                 "requests", "breakdown", "securityContext", "affinity", "tolerations", "volumes",
                 "volumeMounts"}
    out: list[str] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            out.append(key)
            if key not in free_form:
                out += _keys(sub)
    elif isinstance(value, list):
        for item in value:
            out += _keys(item)
    return out


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_the_wire_uses_camel_case_keys(tag):
    keys = _keys(wire_of(SAMPLES[tag]))
    assert ("opId" in keys or "opIds" in keys) and "op_id" not in keys  # a bulk command: opIds
    assert [k for k in keys if "_" in k] == []


def test_camel_case_names_of_the_spec_on_the_wire():
    wire = wire_of(FULL_SPEC)
    assert {"isApproved", "componentHash", "runKind"} <= set(wire)
    assert {"nodeSelector", "priorityClassName", "serviceAccountName"} <= set(wire["environment"])
    assert {"maxRetries"} <= set(wire["termination"])
    assert {"workingDir", "securityContext", "volumeMounts"} <= set(wire["container"])
