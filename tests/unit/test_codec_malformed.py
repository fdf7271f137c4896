"""A message nested deeper than the decoder's recursion limit, or with a string that is not UTF-8, is
malformed input, refused as a ``DecodeError`` like any other, never a RecursionError or UnicodeDecodeError
that escapes the readers (both found by the fuzz suite)."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto import codec

DEPTH = 100_000
NESTED = b"[" * DEPTH + b"]" * DEPTH
DECODERS = [codec.decode, codec.decode_event, codec.decode_command, codec.decode_spec, codec.decode_cluster,
            codec.decode_config, codec.decode_query, codec.decode_ops_stream]


@pytest.mark.parametrize("where", [
    b'{"type":"submitted","opId":"a","unknownField":%s}',
    b'{"type":"submit","opId":"a","spec":{"name":"x","container":{"image":"i"},"params":{"p":%s}}}',
    b'{"name":"x","container":{"image":"i"},"params":{"p":%s}}',
    b'%s',
], ids=["in an unknown field", "in a free-form field of a command", "in a spec", "at the top"])
@pytest.mark.parametrize("decoder", DECODERS, ids=lambda d: d.__name__)
def test_a_document_nested_too_deeply_is_a_decode_error(decoder, where):
    with pytest.raises(msgspec.DecodeError):
        decoder(where % NESTED)


def test_a_shallow_free_form_value_still_decodes():
    spec = codec.decode_spec(b'{"name":"x","container":{"image":"i"},"params":{"p":[[[1]]]}}')
    assert spec.params == {"p": [[[1]]]}


@pytest.mark.parametrize("data", [
    b'{"type":"stop","opId":"\x80a"}',
    b'{"type":"submitted","opId":"a","unknownField":"\xff\xfe"}',
    b'{"name":"\xc3","container":{"image":"i"}}',
], ids=["in a known field", "in an unknown field", "a truncated sequence"])
@pytest.mark.parametrize("decoder", DECODERS, ids=lambda d: d.__name__)
def test_a_string_that_is_not_utf8_is_a_decode_error(decoder, data):
    with pytest.raises(msgspec.DecodeError):
        decoder(data)
