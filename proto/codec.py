"""Encoding and decoding of every wire message (msgspec JSON)."""
from __future__ import annotations

from typing import Union

import msgspec

from proto.commands import COMMANDS, Command
from proto.events import EVENTS, Event
from proto.spec import OpSpec

AnyEvent = Union[EVENTS]  # type: ignore[valid-type]
AnyCommand = Union[COMMANDS]  # type: ignore[valid-type]
AnyMessage = Union[EVENTS + COMMANDS]  # type: ignore[valid-type]

_encoder = msgspec.json.Encoder()
_event_decoder = msgspec.json.Decoder(AnyEvent)
_command_decoder = msgspec.json.Decoder(AnyCommand)
_message_decoder = msgspec.json.Decoder(AnyMessage)
_spec_decoder = msgspec.json.Decoder(OpSpec)

DecodeError = msgspec.DecodeError  # raised for malformed JSON and for schema violations


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


def decode_event(data: bytes) -> Event:
    return _event_decoder.decode(data)


def decode_command(data: bytes) -> Command:
    return _command_decoder.decode(data)


def decode(data: bytes) -> Event | Command:
    return _message_decoder.decode(data)


def decode_spec(data: bytes) -> OpSpec:
    return _spec_decoder.decode(data)


def type_of(message: msgspec.Struct) -> str:
    return type(message).__struct_config__.tag  # type: ignore[return-value]
