"""Property (a): every decoder of the contract (``proto.codec``) either returns a message or raises
``msgspec.DecodeError``/``ValidationError``, whatever the bytes: valid messages of every type, the same
mutated (fields dropped, renamed, retyped, extreme numbers, long strings, deep nesting, unknown tags,
extreme datetimes, bad quantities), and broken bytes."""
from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.mutations import encode_raw, mangled, mutated
from tests.fuzz.wire import ALL_TYPES, DECODERS, encode, message

DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
DECODER_NAMES = sorted(DECODERS)


def decode_all(data: bytes) -> None:
    """Every decoder on ``data``: each returns a message or refuses it as a decode error."""
    for name in DECODER_NAMES:
        decoder, _ = DECODERS[name]
        try:
            decoder(data)
        except DECODE_ERRORS:
            pass


@pytest.mark.parametrize("cls", ALL_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=15)
@given(data=st.data())
def test_a_valid_message_of_every_type_decodes_as_itself(cls, data):
    doc = data.draw(message(cls))
    for name, (decoder, types) in DECODERS.items():
        if cls in types:
            assert type(decoder(encode(doc))) is cls, name


@pytest.mark.parametrize("cls", ALL_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=15)
@given(data=st.data())
def test_a_mutated_message_of_every_type_decodes_or_is_refused_as_a_decode_error(cls, data):
    doc = data.draw(mutated(data.draw(message(cls))))
    decode_all(encode_raw(doc))


@settings(max_examples=150)
@given(data=st.data())
def test_broken_bytes_are_refused_as_a_decode_error(data):
    doc = data.draw(st.sampled_from(ALL_TYPES).flatmap(message))
    decode_all(data.draw(mangled(encode(doc))))


@pytest.mark.parametrize("name", DECODER_NAMES)
def test_a_message_nested_deeper_than_any_stack_is_a_decode_error(name):
    nested = b'{"type":"submitted","opId":"a","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    decoder, _ = DECODERS[name]
    with pytest.raises(msgspec.DecodeError):
        decoder(nested)
