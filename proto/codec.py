"""Encoding and decoding of every wire message (msgspec JSON)."""
from __future__ import annotations

import functools
from collections import OrderedDict
from typing import TypeVar, Union

import msgspec

from opsched.proto.cluster import CLUSTER_EVENTS, ClusterEvent
from opsched.proto.commands import BULK_COMMANDS, COMMANDS, Command
from opsched.proto.config import CONFIG_MESSAGES, PricesConfigured, QueuesConfigured, SetQueues
from opsched.proto.events import EVENTS, Event
from opsched.proto.queries import (
    CostAnswer,
    CostRequest,
    LogsChunk,
    LogsRequest,
    QueuesAnswer,
    QueuesRequest,
    SchedulesAnswer,
    SchedulesRequest,
    WhyAnswer,
    WhyRequest,
)
from opsched.proto.queue_stops import QUEUE_STOP_COMMANDS, QueueStopSet
from opsched.proto.schedules import SCHEDULE_COMMANDS, SCHEDULE_EVENTS
from opsched.proto.spec import OpSpec

AnyEvent = Union[EVENTS]  # type: ignore[valid-type]
AnyCommand = Union[COMMANDS + (SetQueues,) + SCHEDULE_COMMANDS + QUEUE_STOP_COMMANDS + BULK_COMMANDS]  # type: ignore[valid-type]
AnyMessage = Union[EVENTS + COMMANDS + (SetQueues,) + SCHEDULE_EVENTS + SCHEDULE_COMMANDS  # type: ignore[valid-type]
                   + QUEUE_STOP_COMMANDS + BULK_COMMANDS]
AnyOpsStream = Union[EVENTS + SCHEDULE_EVENTS]  # type: ignore[valid-type]  # everything on ops.>
AnySchedule = Union[SCHEDULE_EVENTS]  # type: ignore[valid-type]
AnyCluster = Union[CLUSTER_EVENTS]  # type: ignore[valid-type]
AnyConfig = Union[CONFIG_MESSAGES]  # type: ignore[valid-type]  # everything on config.>
AnyQuery = Union[WhyRequest, WhyAnswer, QueuesRequest, QueuesAnswer, CostRequest, CostAnswer, SchedulesRequest,
                 SchedulesAnswer]

_encoder = msgspec.json.Encoder()
_event_decoder = msgspec.json.Decoder(AnyEvent)
_command_decoder = msgspec.json.Decoder(AnyCommand)
_message_decoder = msgspec.json.Decoder(AnyMessage)
_spec_decoder = msgspec.json.Decoder(OpSpec)
_cluster_decoder = msgspec.json.Decoder(AnyCluster)
_config_decoder = msgspec.json.Decoder(AnyConfig)
_query_decoder = msgspec.json.Decoder(AnyQuery)
_ops_stream_decoder = msgspec.json.Decoder(AnyOpsStream)
_schedule_decoder = msgspec.json.Decoder(AnySchedule)
_logs_request_decoder = msgspec.json.Decoder(LogsRequest)
_logs_chunk_decoder = msgspec.json.Decoder(LogsChunk)

DecodeError = msgspec.DecodeError  # raised for malformed JSON and for schema violations
M = TypeVar("M", bound=msgspec.Struct)


class Refused(ValueError):
    """A message the contract refuses (the services would dead-letter it): said before it is published."""


def checked(message: M) -> M:
    """``message`` as a service will decode it (every bound of ``proto.spec`` included); raises ``Refused``
    naming the field, so a producer refuses what the services would, before publishing it."""
    try:
        return _decoder_of(type(message)).decode(encode(message))
    except (msgspec.ValidationError, ValueError) as exc:
        raise Refused(f"{type_of(message) or type(message).__name__} refused: {exc}") from None


def refusal(message: msgspec.Struct) -> str | None:
    """Why the contract refuses ``message`` (``checked``), or None."""
    try:
        checked(message)
    except Refused as exc:
        return str(exc)
    return None


@functools.cache
def _decoder_of(kind: type) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(kind)


T = TypeVar("T")


def _decoded(decoder: msgspec.json.Decoder[T], data: bytes) -> T:
    """``decoder``'s message, or ``DecodeError``. msgspec raises two other errors for bad input, which no reader
    expects: RecursionError for a document nested deeper than its recursion limit (in an unknown field or a
    free-form one such as ``params``) and UnicodeDecodeError for a string that is not UTF-8; both are refused
    like any other malformed message."""
    try:
        return decoder.decode(data)
    except RecursionError:
        raise DecodeError("JSON nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in a string: {exc}") from None


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


# The op events last decoded, by their bytes: in one process several readers decode the same message (admission's
# fold, cost's estimator, ledger and fold, the cache: a submitted is read five times when ``opsched up`` runs them
# together, and three times in the cost process alone), and decoding an op's spec means validating it
# (``OpSpec.__post_init__``). A message decoded once is given to the others as it is: decoded messages are shared,
# and nobody changes one (a handler builds new events with ``msgspec.structs.replace``). Only op events are kept
# (every reader below takes them; a command is no event), and only those that decoded: a refusal is decoded again.
_EVENTS_SEEN: OrderedDict[bytes, Event] = OrderedDict()
_EVENTS_SEEN_MAX = 2048
_EVENT_TYPES = tuple(EVENTS)


def _event_decoded(decoder: msgspec.json.Decoder, data: bytes):
    seen = _EVENTS_SEEN.get(data)
    if seen is not None:
        return seen
    message = _decoded(decoder, data)
    if isinstance(message, _EVENT_TYPES):
        if len(_EVENTS_SEEN) >= _EVENTS_SEEN_MAX:
            _EVENTS_SEEN.popitem(last=False)  # the oldest (a dict's first key is found by a scan: O(n))
        _EVENTS_SEEN[data] = message
    return message


def decode_event(data: bytes) -> Event:
    return _event_decoded(_event_decoder, data)


def decode_command(data: bytes) -> Command:
    return _decoded(_command_decoder, data)


def decode(data: bytes) -> Event | Command:
    return _event_decoded(_message_decoder, data)


def decode_spec(data: bytes) -> OpSpec:
    return _decoded(_spec_decoder, data)


def type_of(message: msgspec.Struct) -> str:
    return type(message).__struct_config__.tag  # type: ignore[return-value]


def decode_cluster(data: bytes) -> ClusterEvent:
    return _decoded(_cluster_decoder, data)


def decode_config(data: bytes) -> QueuesConfigured | PricesConfigured | QueueStopSet:
    """Anything on the config stream: the queue configuration, the price catalogue or a queue's stop policy in force
    (each reader keeps the kind it applies and ignores the other)."""
    return _decoded(_config_decoder, data)


def decode_query(data: bytes) -> (WhyRequest | WhyAnswer | QueuesRequest | QueuesAnswer | CostRequest | CostAnswer
                                  | SchedulesRequest | SchedulesAnswer):
    return _decoded(_query_decoder, data)


def decode_logs_request(data: bytes) -> LogsRequest:
    return _decoded(_logs_request_decoder, data)


def decode_logs_chunk(data: bytes) -> LogsChunk:
    return _decoded(_logs_chunk_decoder, data)


def decode_ops_stream(data: bytes) -> Event:
    """Anything on the op stream: an op event or a schedule event (``proto.schedules``)."""
    return _event_decoded(_ops_stream_decoder, data)
