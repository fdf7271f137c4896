"""The wire contract (a): every message round-trips through the codec, and the samples cover every field."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto import codec
from opsched.proto.commands import BULK_COMMANDS, COMMANDS
from opsched.proto.events import EVENTS
from tests.contract.wire_samples import FULL_SPEC, MESSAGES, SAMPLES, tag_of, wire_of

# ---- (a) round trips --------------------------------------------------------------------------

def test_every_event_and_command_has_a_representative_sample():
    assert set(SAMPLES) == {tag_of(c) for c in MESSAGES}, "add a sample for each new message type"


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_a_message_round_trips_through_the_codec(tag):
    message = SAMPLES[tag]
    assert codec.decode(codec.encode(message)) == message


@pytest.mark.parametrize("tag", sorted(tag_of(c) for c in EVENTS))
def test_an_event_round_trips_through_the_event_decoder(tag):
    assert codec.decode_event(codec.encode(SAMPLES[tag])) == SAMPLES[tag]


@pytest.mark.parametrize("tag", sorted(tag_of(c) for c in COMMANDS + BULK_COMMANDS))
def test_a_command_round_trips_through_the_command_decoder(tag):
    assert codec.decode_command(codec.encode(SAMPLES[tag])) == SAMPLES[tag]


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_a_sample_sets_every_field_so_the_round_trip_covers_it(tag):
    message = SAMPLES[tag]
    info = msgspec.inspect.type_info(type(message))
    missing = sorted(f.encode_name for f in info.fields if f.encode_name not in wire_of(message))
    assert not missing, f"the {tag} sample leaves {missing} at their defaults; set them in SAMPLES"


def _unset_fields(struct: msgspec.Struct, path: str) -> list[str]:
    wire = wire_of(struct)
    out: list[str] = []
    for f in msgspec.inspect.type_info(type(struct)).fields:
        value = getattr(struct, f.name)
        if f.encode_name not in wire and not (path.endswith(".hooks.spec") and f.encode_name == "hooks"):
            out.append(f"{path}.{f.encode_name}")  # (a hook's op has no hooks: a hook never triggers another)
        items = [item for item in (value if isinstance(value, list) else [value]) if isinstance(item, msgspec.Struct)]
        unset = [_unset_fields(item, f"{path}.{f.encode_name}") for item in items]
        # the items of a list set every field between them (an init step is one of git, file or container)
        out += sorted(set.intersection(*map(set, unset))) if unset else []
    return out


def test_the_full_spec_sets_every_field_at_every_depth():
    assert _unset_fields(FULL_SPEC, "spec") == [], "set these fields in FULL_SPEC"


def test_the_spec_round_trips_on_its_own():
    assert codec.decode_spec(codec.encode(FULL_SPEC)) == FULL_SPEC


def test_an_event_is_not_accepted_where_a_command_is_expected():
    with pytest.raises(msgspec.ValidationError):
        codec.decode_command(codec.encode(SAMPLES["submitted"]))
