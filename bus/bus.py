"""The NATS connection: streams, durable consumers, publishing with Nats-Msg-Id, replay.

With ``connecting`` (opening the connection), ``requesting`` and ``kvcalls`` (its requests) and
``services.runtime.service``, the only modules that import ``nats``.
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from typing import Any, NamedTuple

import msgspec
import nats
import nats.errors
import nats.js.errors
import structlog
from nats.js import api
from nats.js.errors import NotFoundError

from opsched.bus import tracing
from opsched.bus.addressing import Fence, cloudevent_headers, default_msg_id, subject_for
from opsched.bus.connecting import CaFile, open_connection
from opsched.bus.credentials import Credentials
from opsched.bus.errors import DependencyUnavailable, Fenced
from opsched.bus.kvcalls import KVCalls
from opsched.bus.rebuilding import replaying
from opsched.bus.received import Received
from opsched.bus.refusals import Refusals
from opsched.bus.requesting import PubAck, Requester
from opsched.bus.sizes import check_size
from opsched.proto import codec, subjects

DUPLICATE_WINDOW_S = 120.0
FOLLOW_HEARTBEAT_S = 1.0  # an ordered consumer whose node died is recreated after two missed heartbeats
PUBLISH_TIMEOUT_S = 1.0  # one attempt: a publish sent to a node that just died is not answered
KV_TIMEOUT_S = 2.0  # one KV call
PUBLISH_PATIENCE_S = 20.0  # a stream without a leader (a node died: election ~5-9 s) is waited out this long
# no leader answers (yet): the same publish again is safe, its Nats-Msg-Id makes a stored repeat a no-op
_LEADERLESS = (nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError, nats.js.errors.ServiceUnavailableError)
NATS = "nats"
WRONG_LAST_SEQUENCE = 10071  # JetStream's error code for a publish whose expected last sequence moved on
# ... and a clustered stream's while another publish expecting a last sequence of the same subject is in
# process: the fence may still hold (``Bus.publish`` looks before it calls it refused)
WRONG_LAST_SEQUENCE_IN_FLIGHT = 10164
# a clustered stream refuses a message whose Nats-Msg-Id another publish has in process (two replicas report the
# same fact at once): the same publish a moment later is acked as a duplicate, or stored if that one failed
DUPLICATE_IN_PROCESS = 10158
_FENCE_CODES = (WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_IN_FLIGHT)
# a stream refused to store a message (err_code 10077, status 503: nats-py raises ServiceUnavailableError, which
# reads like a leaderless stream); at one of its limits, the description says which: ``StreamFull``
STORE_FAILED = 10077
_AT_LIMIT = ("maximum bytes exceeded", "maximum messages exceeded", "maximum messages per subject exceeded")
# What a stream does at its limits (``services.runtime.settings.Settings.stream_limits``): the command stream
# refuses new commands (per subject, the backlog cap per identity, and at its byte limit) rather than drop other
# users' queued ones; the op stream is the source of truth replayed on start: it refuses new events, never drops old
# ones (readiness says so, ``services.runtime.stalls``); the latest-fact streams refuse new subjects (a known one is
# still replaced: at its per-subject limit the server removes its older message first); the dead letters alone drop
# their oldest.
DISCARD: dict[str, api.DiscardPolicy] = {
    subjects.CMD_STREAM: api.DiscardPolicy.NEW, subjects.OPS_STREAM: api.DiscardPolicy.NEW,
    subjects.DLQ_STREAM: api.DiscardPolicy.OLD, subjects.CLUSTER_STREAM: api.DiscardPolicy.NEW,
    subjects.CONFIG_STREAM: api.DiscardPolicy.NEW,
}
DISCARD_NEW_PER_SUBJECT = {subjects.CMD_STREAM}  # a subject at its per-subject cap refuses, rather than rolls


class StreamLimits(NamedTuple):
    """What a stream keeps at most: messages this old (0: any age), this many bytes (-1: any), and, given,
    this many messages per subject (the stream's own default otherwise)."""

    max_age_s: float
    max_bytes: int
    per_subject: int | None = None


class StreamFull(Exception):
    """A stream refused a publish at one of its limits (bytes, messages, or messages of that subject): not an
    outage (the same publish is refused until space is freed), not the message's fault."""

    def __init__(self, subject: str, description: str, stream: str | None = None) -> None:
        stream = stream or subjects.stream_of(subject) or "a stream"
        per_subject = "per subject" in description
        if stream == subjects.CMD_STREAM and per_subject:
            text = (f"the scheduler refused the command on {subject}: {description}: as many of your commands of "
                    "this verb as it queues (OPSCHED_CMD_BACKLOG_PER_SUBJECT) are still waiting for it; send again "
                    "once it has taken some")
        else:
            text = (f"{stream} is full: it refused the message on {subject}: {description} (its limits: "
                    f"docs/retention.md)")
        super().__init__(text)
        self.stream, self.subject, self.description, self.per_subject = stream, subject, description, per_subject


def stream_full(exc: BaseException, subject: str, stream: str | None = None) -> StreamFull | None:
    """``exc`` as a ``StreamFull`` (a publish to ``subject`` refused at a stream's limit), else None."""
    if isinstance(exc, StreamFull):
        return exc
    if isinstance(exc, nats.js.errors.APIError) and getattr(exc, "err_code", None) == STORE_FAILED:
        description = (getattr(exc, "description", None) or "").lower()
        if any(limit in description for limit in _AT_LIMIT):
            return StreamFull(subject, description, stream)
    return None
# NATS or JetStream cannot take the call now (disconnected, reconnecting, no ack in time, no leader):
# an outage, retried for as long as it lasts; never the message's fault.
NATS_UNAVAILABLE: tuple[type[Exception], ...] = (
    nats.errors.TimeoutError, nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError,
    nats.errors.NoServersError, nats.errors.OutboundBufferLimitError, nats.errors.StaleConnectionError,
    nats.errors.FlushTimeoutError, nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError, asyncio.TimeoutError,
)


def as_unavailable(exc: BaseException) -> DependencyUnavailable | None:
    """``exc`` as a dependency outage (its own, or NATS'), or None: any other error."""
    if isinstance(exc, DependencyUnavailable):
        return exc
    if isinstance(exc, NATS_UNAVAILABLE):
        return DependencyUnavailable(NATS, repr(exc))
    return None


def no_stream(exc: BaseException) -> bool:
    """No stream answered the publish: none stores its subject (yet), or none has a leader."""
    return isinstance(exc, nats.js.errors.NoStreamResponseError)


def refused_by_fence(exc: BaseException) -> bool:
    return isinstance(exc, nats.js.errors.BadRequestError) and exc.err_code in _FENCE_CODES


def in_process_elsewhere(exc: BaseException) -> bool:
    """The stream has a publish with the same Nats-Msg-Id in process (a clustered stream's 409)."""
    return isinstance(exc, nats.js.errors.APIError) and getattr(exc, "err_code", None) == DUPLICATE_IN_PROCESS


async def patiently(call: Callable[[], Awaitable[Any]], nc: nats.NATS) -> Any:
    """``call()``; while no leader answers (a node of the cluster died and the replicas elect another), or
    the same message is in process from another publisher, call again, for up to ``PUBLISH_PATIENCE_S``.
    Only for calls that are safe to repeat: a publish with a Nats-Msg-Id, a KV read, a KV compare-and-set
    (a repeat of one that did apply is refused)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PUBLISH_PATIENCE_S
    pause = 0.1
    while True:
        try:
            return await call()
        except Exception as exc:
            if not isinstance(exc, _LEADERLESS) and not in_process_elsewhere(exc):
                raise
            if nc.is_closed or loop.time() + pause > deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


class PatientKV:
    """A JetStream KV bucket whose reads and writes wait out an election, as ``Bus.publish`` does; a write the
    bucket refused at its byte limit is ``StreamFull`` at once (not a leaderless bucket)."""

    def __init__(self, kv: Any, nc: nats.NATS, bucket: str = "") -> None:
        self._kv = kv
        self._nc = nc
        self._bucket = bucket

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._kv, name)
        if name not in ("get", "put", "create", "update"):
            return call

        async def once(*args: Any, **kwargs: Any) -> Any:
            try:
                return await call(*args, **kwargs)
            except nats.js.errors.APIError as exc:
                key = str(args[0]) if args else ""
                full = stream_full(exc, subjects.kv_key(self._bucket, key), subjects.kv_stream(self._bucket))
                if full is None:
                    raise
                raise full from exc
        return lambda *args, **kwargs: patiently(lambda: once(*args, **kwargs), self._nc)


def stream_sequence(msg: Any) -> int:
    """A delivered JetStream message's stream sequence, read from its ack subject without nats-py's metadata
    objects (2.6 → 0.2 µs: every replayed message): ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>...``
    (9 tokens); another layout (a domain's) goes through nats-py's parser."""
    tokens = (msg.reply or "").split(".")
    if len(tokens) == 9 and tokens[0] == "$JS":
        return int(tokens[5])
    return msg.metadata.sequence.stream


class _NamedEphemerals(nats.js.JetStreamManager):
    """Creates every consumer by a form that names it in the subject: a nameless one (an ordered follower, each
    time nats-py re-creates it) gets a fresh name. The older form, ``$JS.API.CONSUMER.CREATE.<stream>`` with the
    name in the body, would update any consumer of that name, another service's durable included; the services'
    permissions allow only the named forms (``subjects.JS_SERVICE``), where the others' durables are denied by
    name (issue 28)."""

    async def add_consumer(self, stream: str, config: api.ConsumerConfig | None = None,
                           timeout: float | None = None, **params: Any) -> api.ConsumerInfo:
        config = (config or api.ConsumerConfig()).evolve(**params)
        if not config.name and not config.durable_name:
            config = config.evolve(name=uuid.uuid4().hex)
        return await super().add_consumer(stream, config, timeout)


class JetStream(_NamedEphemerals, nats.js.JetStreamContext):
    """nats-py's JetStream context, its consumers created as ``_NamedEphemerals`` does (its subscriptions too)."""

    @property
    def _jsm(self) -> nats.js.JetStreamManager:
        return _NamedEphemerals(conn=self._nc, prefix=self._prefix, timeout=self._timeout)


def jetstream(nc: nats.NATS, **opts: Any) -> JetStream:
    return JetStream(nc, **opts)


def _limits_of(config: api.StreamConfig) -> tuple:
    return (round(config.max_age or 0.0, 3), config.max_bytes if config.max_bytes is not None else -1,
            config.max_msgs_per_subject or -1, config.discard or api.DiscardPolicy.OLD,
            bool(config.discard_new_per_subject))


def _per_subject_discard(config: api.StreamConfig) -> None:
    """A capped subject of the command stream refuses (the server allows it only with a cap)."""
    capped = config.name in DISCARD_NEW_PER_SUBJECT and (config.max_msgs_per_subject or -1) > 0
    config.discard_new_per_subject = capped


class Bus:
    def __init__(self, nc: nats.NATS, name: str, replicas: int = 1, user: str = subjects.ANONYMOUS) -> None:
        self.nc = nc
        self.js = jetstream(nc)
        self.name = name
        self.user = user  # the NATS user: the commands it publishes go on cmd.<user>.
        self.refusals = Refusals()  # what the server refused this user (set by ``connect``)
        self.replicas = replicas  # of the streams and buckets this bus creates
        self.bucket_bytes: dict[str, int] = {}  # the most bytes of each bucket it creates (a service's settings)
        self.requester = Requester(nc)  # JetStream publishes with less Python than nats-py's own
        self._closing = {"now": False}

    @classmethod
    async def connect(cls, url: str, name: str, *, connect_timeout: float = 5.0,
                      max_reconnect_attempts: int = -1, replicas: int = 1,
                      credentials: Credentials | None = None, tls_ca_file: CaFile = None) -> "Bus":
        """Connect to any of the servers in ``url`` (comma-separated), as ``credentials``' user, over TLS verified
        with ``tls_ca_file`` if given; when the one in use dies, reconnect to another, forever (services) or a
        few times (clients)."""
        credentials = credentials or Credentials()
        closing, refusals = {"now": False}, Refusals()
        nc = await open_connection(url, name, closing, connect_timeout=connect_timeout,
                                   max_reconnect_attempts=max_reconnect_attempts, tls_ca_file=tls_ca_file,
                                   auth=credentials.connect_options(), refusals=refusals,
                                   inbox_prefix=subjects.inbox_prefix(credentials.user))
        bus = cls(nc, name, replicas, credentials.user)
        bus._closing, bus.refusals = closing, refusals
        return bus

    connected = property(lambda self: self.nc.is_connected)
    closed = property(lambda self: self.nc.is_closed)  # it gave up reconnecting (or was closed): for good

    async def ensure_streams(self, limits: dict[str, StreamLimits] | None = None, *, align: bool = True) -> None:
        """Create the streams (file storage, ``self.replicas`` replicas, direct gets: how clients read) if missing;
        with ``align`` (admission: the one service allowed to update a stream) align their subjects and direct gets
        if they drifted; raise their replicas to ``self.replicas``, never lower them (one that does not know the
        cluster's setting must not shrink it). ``limits`` (stream -> ``StreamLimits``; services pass their
        settings') are applied to new and (aligning) existing streams, with what each does at them (``DISCARD``);
        aligning, the existing buckets are given ``bucket_bytes``."""
        for name, (subj, per_subject) in subjects.STREAMS.items():
            wanted = (limits or {}).get(name)
            config = self._stream_config(name, subj, per_subject, wanted)
            # each call waited out like a publish (``patiently``): a stream without a leader, or an API request
            # timed out on a loaded server, is asked again rather than failing the service's start
            try:
                info = await patiently(lambda: self.js.stream_info(name), self.nc)
            except NotFoundError:
                try:
                    await patiently(lambda: self.js.add_stream(config), self.nc)
                except nats.js.errors.BadRequestError:
                    pass  # another replica created it first (or a first try that timed out did)
                continue
            if align and self._drifted(config, info.config, wanted):
                await patiently(lambda: self.js.update_stream(config), self.nc)
        if align:
            await self._align_buckets()

    def _stream_config(self, name: str, subj: list[str], per_subject: int,
                       wanted: StreamLimits | None) -> api.StreamConfig:
        """The configuration stream ``name`` is created with (``wanted``: its limits from the settings)."""
        config = api.StreamConfig(
            name=name, subjects=subj, storage=api.StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S, retention=api.RetentionPolicy.LIMITS,
            max_msgs_per_subject=per_subject, num_replicas=self.replicas, allow_direct=True,
            discard=DISCARD[name],
        )
        if wanted is not None:
            config.max_age, config.max_bytes = wanted.max_age_s, wanted.max_bytes
            if wanted.per_subject is not None:
                config.max_msgs_per_subject = wanted.per_subject
        _per_subject_discard(config)
        return config

    def _drifted(self, config: api.StreamConfig, existing: api.StreamConfig, wanted: StreamLimits | None) -> bool:
        """``config`` aligned with the ``existing`` stream's (replicas never lowered; without ``wanted`` limits,
        its own kept): whether the stream must be updated to it."""
        config.num_replicas = max(self.replicas, existing.num_replicas or 1)
        if wanted is None:
            config.max_age, config.max_bytes = existing.max_age, existing.max_bytes
            if config.name in DISCARD_NEW_PER_SUBJECT:  # its cap is a setting: kept as it is
                config.max_msgs_per_subject = existing.max_msgs_per_subject
                _per_subject_discard(config)
        return (sorted(existing.subjects or []) != sorted(config.subjects or [])
                or config.num_replicas != (existing.num_replicas or 1) or not existing.allow_direct
                or _limits_of(existing) != _limits_of(config))

    async def _align_buckets(self) -> None:
        """Give the existing buckets the byte limits of ``bucket_bytes`` (one made before they had any)."""
        for bucket, max_bytes in self.bucket_bytes.items():
            try:
                info = await self.js.stream_info(subjects.kv_stream(bucket))
            except NotFoundError:
                continue  # its service creates it, bounded
            if (info.config.max_bytes or -1) != max_bytes:
                info.config.max_bytes = max_bytes
                await self.js.update_stream(info.config)

    async def ensure_cache_bucket(self, bucket: str, *, max_age_s: float | None = None):
        """The bucket (created with ``self.replicas`` replicas if missing; its keys kept ``max_age_s`` if
        given, else forever), its calls patient (``PatientKV``). Reads are direct gets (any replica answers, and
        the answer is a message, not JSON with base64 headers): a bucket made without them is given them."""
        js = jetstream(self.nc, timeout=KV_TIMEOUT_S)
        try:
            kv = await js.key_value(bucket)
        except (NotFoundError, nats.js.errors.BucketNotFoundError):
            kv = await js.create_key_value(api.KeyValueConfig(
                bucket=bucket, storage=api.StorageType.FILE, replicas=self.replicas, ttl=max_age_s, direct=True,
                max_bytes=self.bucket_bytes.get(bucket)))  # at the limit new keys are refused (discard new)
        if not getattr(kv, "_direct", True):
            info = await js.stream_info(subjects.kv_stream(bucket))
            info.config.allow_direct = True
            await js.update_stream(info.config)
            kv = await js.key_value(bucket)
        return PatientKV(KVCalls(kv, self.requester, KV_TIMEOUT_S), self.nc, bucket)

    async def purge(self, stream: str, subject: str, *, before_seq: int | None = None, keep: int | None = None) -> None:
        """Remove ``subject``'s messages from ``stream`` (only those before ``before_seq``, or all but the last
        ``keep``, if given)."""
        await self.js.purge_stream(stream, subject=subject, seq=before_seq, keep=keep)

    async def consumed_up_to(self, stream: str, durables: Collection[str]) -> int:
        """The stream sequence up to which every one of ``durables`` (the services' own: ``proto.permissions.
        durables_of``) has acked what it was given (the stream's last sequence when all are caught up): what may be
        removed without a service missing it. Any other consumer (a stray durable, a reader's) holds nothing back:
        it cannot pin the purges at 0."""
        last = (await self.js.stream_info(stream)).state.last_seq
        done = last
        for durable in durables:
            try:
                consumer = await self.js.consumer_info(stream, durable)
            except NotFoundError:
                continue  # no such durable on this stream
            done = min(done, await self._consumed_by(stream, consumer, last))
        return done

    async def _consumed_by(self, stream: str, consumer: api.ConsumerInfo, last: int) -> int:
        """Up to which sequence one durable has consumed: its ack floor, and past it every message it will never be
        given (another subject), up to the first one of its subjects after the floor (none: ``last``). The messages
        are asked of the stream's leader: not the consumer's own count of what is left (``num_pending``), which a
        consumer leader on a node still catching up (one restarted after a kill) gives as 0 for commands it has not
        yet seen — a purge then removed them, undelivered."""
        floor = consumer.ack_floor.stream_seq if consumer.ack_floor else 0
        config = consumer.config
        filters = list(config.filter_subjects or []) or [config.filter_subject or ">"]
        upto = last
        for subject in filters:
            try:
                found = await self.js.get_msg(stream, seq=floor + 1, subject=subject, next=True)
                upto = min(upto, (found.seq or floor + 1) - 1)
            except NotFoundError:
                continue  # nothing of that subject after the floor
        return max(floor, upto)

    async def publish(self, message: msgspec.Struct, *, msg_id: str | None = None, subject: str | None = None,
                      headers: dict[str, str] | None = None, fence: Fence | None = None) -> PubAck:
        """Publish with its Nats-Msg-Id (a repeat is stored once); with ``fence``, only while the fence holds
        (else ``Fenced``, and nothing is stored)."""
        mid = msg_id or default_msg_id(message)
        subj = subject or subject_for(message, self.user)
        hdrs = {"Nats-Msg-Id": mid, **cloudevent_headers(message, mid, self.name), **(headers or {}),
                **(fence.headers_for(subj) if fence else {})}
        if tracing.ON:  # the current span's context (``tracing``): off, nothing
            tracing.inject(hdrs, subj, mid)
        deadline = asyncio.get_running_loop().time() + PUBLISH_PATIENCE_S
        while True:
            try:
                return await self.publish_raw(subj, codec.encode(message), hdrs)
            except Exception as exc:
                if fence is None or not refused_by_fence(exc):
                    raise
                if (getattr(exc, "err_code", None) != WRONG_LAST_SEQUENCE_IN_FLIGHT
                        or asyncio.get_running_loop().time() > deadline or not await self.fence_holds(fence)):
                    raise Fenced(f"{subj}: another instance claimed {fence.subject} after sequence {fence.seq}") \
                        from exc
            await asyncio.sleep(0.05)  # the fence holds: another fenced publish was in process, try again

    async def publish_raw(self, subject: str, data: bytes, headers: dict[str, str]) -> PubAck:
        """Publish and wait for the stream's ack. While the stream has no leader (a node of the cluster
        died and its replicas elect another) publish again, for up to ``PUBLISH_PATIENCE_S``: a handler
        keeps its message meanwhile, rather than nak it to a consumer leader that may be gone too. A message
        over the server's max payload (headers counted) is refused first: ``MessageTooLarge``, nothing sent; one
        the server refused this user (its permissions) is not tried again: ``NotPermitted``; one a stream refused
        at its limits: ``StreamFull``."""
        check_size(subject, data, headers, self.nc.max_payload)

        async def once() -> PubAck:
            self.refusals.check(self.user, subject)
            try:
                return await self.requester.publish(subject, data, headers, PUBLISH_TIMEOUT_S)
            except nats.js.errors.APIError as exc:  # a stream at its limit: not a leaderless one, no second try
                full = stream_full(exc, subject)
                if full is None:
                    raise
                raise full from exc
        return await patiently(once, self.nc)

    async def durable(self, durable: str, stream: str, filters: list[str], *,
                      max_deliver: int, ack_wait: float = 30.0):
        """Create (or align) a durable pull consumer and bind to it. Replicas share it."""
        config = api.ConsumerConfig(
            durable_name=durable, ack_policy=api.AckPolicy.EXPLICIT, ack_wait=ack_wait,
            max_deliver=max_deliver, deliver_policy=api.DeliverPolicy.ALL,
            filter_subjects=filters if len(filters) > 1 else None,
            filter_subject=filters[0] if len(filters) == 1 else None,
            max_ack_pending=10_000,
        )
        await self.js.add_consumer(stream, config)
        return await self.js.pull_subscribe_bind(durable=durable, stream=stream)

    async def last_seq(self, stream: str) -> int:
        return (await self.js.stream_info(stream)).state.last_seq

    async def follow(self, stream: str, subject: str | Sequence[str], on_message: Callable[..., Awaitable[None]],
                     *, headers: bool = False):
        """Deliver every message of ``subject`` (or of any of several: only those, in stream order) from the start
        of ``stream``, then live, in order: ``on_message(data, seq)``, with ``headers``
        ``on_message(data, seq, headers)`` (parsed when read)."""
        filters = [subject] if isinstance(subject, str) else list(subject)

        async def cb(msg) -> None:
            await on_message(msg.data, stream_sequence(msg))

        async def cb_headers(msg) -> None:
            await on_message(msg.data, stream_sequence(msg), msg.headers or {})
        config = api.ConsumerConfig(filter_subjects=filters) if len(filters) > 1 else None
        return await self.js.subscribe(filters[0] if config is None else "", stream=stream, ordered_consumer=True,
                                       cb=cb_headers if headers else cb, config=config,
                                       deliver_policy=api.DeliverPolicy.ALL, idle_heartbeat=FOLLOW_HEARTBEAT_S)

    async def fence_holds(self, fence: Fence) -> bool:
        """The fence's claim is still the last message of its subject."""
        stream = subjects.stream_of(fence.subject)
        return stream is not None and await self.last_stored(stream, fence.subject) == fence.seq

    async def last_stored(self, stream: str, subject: str) -> int:
        """The sequence of ``subject``'s last message still in ``stream`` (0: none; not ``last_seq``: purges)."""
        try:
            return (await self.js.get_last_msg(stream, subject)).seq or 0
        except NotFoundError:
            return 0

    async def last_message(self, stream: str, subject: str) -> Received | None:
        """``subject``'s last message still in ``stream`` (None: none), unsettled: one request, where
        ``last_stored`` then ``stored`` are two."""
        try:
            raw = await patiently(lambda: self.js.get_last_msg(stream, subject), self.nc)
        except NotFoundError:
            return None
        return Received(raw.subject or "", raw.data or b"", dict(raw.headers or {}), raw.seq or 0, 0, None)

    async def replay(self, stream: str, subject: str | Sequence[str], on_message: Callable[..., Awaitable[None]],
                     *, headers: bool = False):
        """``follow`` a subject (or several, with ``headers`` or not); return once every message of it stored at the
        start has been delivered (the subscription then stays live). A message ``on_message`` fails on counts as
        consumed all the same."""
        filters = [subject] if isinstance(subject, str) else list(subject)
        target = max([await self.last_stored(stream, f) for f in filters])
        caught_up = asyncio.Event()

        async def deliver(data: bytes, seq: int, hdrs: Any = None) -> None:
            try:
                await (on_message(data, seq) if hdrs is None else on_message(data, seq, hdrs))
            except Exception as exc:  # noqa: BLE001 - one bad message must not stop the replay
                structlog.get_logger().error("replay_message_failed", stream=stream, seq=seq, error=f"{exc!r}")
            if seq >= target:
                caught_up.set()

        if target == 0:
            caught_up.set()
        with replaying():  # no cyclic collection while the state is built (``rebuilding``)
            sub = await self.follow(stream, subject, deliver, headers=headers)
            await caught_up.wait()
        return sub

    async def serve(self, subject: str, answer: Callable[[bytes], Awaitable[bytes]], group: str):
        """Answer requests on a core subject (request/reply; replicas share ``group``)."""
        async def cb(msg) -> None:
            if msg.reply:
                await msg.respond(await answer(msg.data))
        return await self.nc.subscribe(subject, queue=group, cb=cb)

    async def serve_stream(self, subject: str, answer: Callable[[bytes, Callable[[bytes], Awaitable[None]]],
                                                        Coroutine[Any, Any, None]], group: str):
        """Answer requests on a core subject with several messages each (``answer(data, respond)`` calls ``respond``
        once per message), each request in a task of its own so that a long answer holds no other back; replicas
        share ``group``. The server bounds how many answers a request may get (``allow_responses``)."""
        answering: set[asyncio.Task] = set()  # held until done (a task nobody holds may be collected)

        async def cb(msg) -> None:
            if not msg.reply:
                return
            reply = msg.reply

            async def respond(data: bytes) -> None:
                await self.nc.publish(reply, data)

            task: asyncio.Task = asyncio.create_task(answer(msg.data, respond))
            answering.add(task)
            task.add_done_callback(answering.discard)
        return await self.nc.subscribe(subject, queue=group, cb=cb)

    async def listen(self, subject: str, on_message: Callable[[bytes], Awaitable[None]], group: str):
        """Core NATS messages on ``subject`` (not stored: e.g. JetStream's advisories), each to one member of
        ``group``; subscribed at the server when this returns."""
        async def cb(msg) -> None:
            await on_message(msg.data)
        sub = await self.nc.subscribe(subject, queue=group, cb=cb)
        await self.nc.flush(timeout=int(KV_TIMEOUT_S))
        return sub

    async def stored(self, stream: str, seq: int) -> Received | None:
        """The message at ``seq`` in ``stream`` (None: no longer stored), unsettled: nobody holds it."""
        try:
            raw = await patiently(lambda: self.js.get_msg(stream, seq), self.nc)
        except NotFoundError:
            return None
        return Received(raw.subject or "", raw.data or b"", dict(raw.headers or {}), seq, 0, None)

    async def request(self, subject: str, message: msgspec.Struct, timeout: float = 5.0) -> bytes:
        check_size(subject, data := codec.encode(message), None, self.nc.max_payload)
        reply = await self.nc.request(subject, data, timeout=timeout)
        return reply.data

    async def read_all(self, stream: str, subject: str, *, batch: int = 500) -> list[bytes]:
        """Every message of ``subject`` now in ``stream``, in order (for clients that build a view)."""
        sub = await self.js.pull_subscribe(subject, stream=stream, config=api.ConsumerConfig(
            ack_policy=api.AckPolicy.NONE, deliver_policy=api.DeliverPolicy.ALL, filter_subject=subject,
            inactive_threshold=30.0, num_replicas=1, mem_storage=True))  # a view: nothing to keep on other nodes
        out: list[bytes] = []
        try:
            pending = (await sub.consumer_info()).num_pending or 0
            while pending > 0:
                msgs = await sub.fetch(min(batch, pending), timeout=5.0)
                out.extend(m.data for m in msgs)
                pending = msgs[-1].metadata.num_pending or 0
        finally:
            await sub.unsubscribe()
        return out

    async def close(self) -> None:
        """Flush what was published, then close. Handler loops finish their message in hand first."""
        if self.nc.is_closed:  # already
            return
        self._closing["now"] = True
        try:
            if self.nc.is_connected:
                await self.nc.flush(timeout=2)
        except Exception:  # noqa: BLE001 - best effort on shutdown
            pass
        await self.nc.close()
