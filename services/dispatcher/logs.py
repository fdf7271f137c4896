"""Answers `opsched logs` (``proto.queries.LogsRequest`` on ``subjects.QUERY_LOGS``): what a container of an op
printed, read from the API server (``pods/log``, the kubelet's endpoint behind it) and sent back to the requester's
reply inbox as a bounded stream of ``LogsChunk``s, the last one marked ``end``.

Which pod (``choose_pod``, pure): the op's latest attempt this dispatcher folded (``attempts``), or ``attempt``; its
main pod, or the pod of ``replica`` (``<role>-<index>``: its ``opsched.io/replica`` label or its hostname in the
gang's Service, so a pytorchjob's main pod is ``main`` or ``master-0``); its first container (the op's main one), or
``container``. Each refusal names what is wrong and what there is instead (``proto.reasons.LogsRefusal``; an op
not on the op stream: ``Reason.UNKNOWN_OP``).

Bounds (``proto.queries``): lines go in chunks of at most ``LOGS_CHUNK_LINES`` lines and ``LOGS_CHUNK_BYTES`` bytes (a
longer line is cut); an answer holds at most ``LOGS_ANSWER_CHUNKS`` messages, which nats-server lets the dispatcher's
user send per request (``proto.permissions.MAX_RESPONSES``), and a follow answers for ``LOGS_FOLLOW_S`` at most:
cut short by either, its end says ``more`` and the time of its last line, after which the client asks again. The
lines are always read with their times (the API's ``timestamps``), so that a next request starts after the last
one sent (``after``); they are handed back without them unless asked. At most ``LOG_STREAMS`` logs are read at once
(each blocks a thread of its own while it waits for lines: a daemon thread, which never holds the process's exit);
one more is refused ``logs_busy``."""
from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import msgspec
from kubernetes.client.rest import ApiException

from opsched.proto import codec
from opsched.proto.queries import (
    LOGS_ANSWER_CHUNKS,
    LOGS_CHUNK_BYTES,
    LOGS_CHUNK_LINES,
    LOGS_FOLLOW_S,
    LogsChunk,
    LogsRequest,
)
from opsched.proto.reasons import LogsRefusal, Reason, message
from opsched.proto.subjects import valid_token
from opsched.rules.podspec import LABEL_ATTEMPT, LABEL_OP, LABEL_REPLICA, MAIN_REPLICA, SELECTOR
from opsched.services.dispatcher.attempts import Attempt, Stage
from opsched.services.dispatcher.k8s import Kube, unavailable
from opsched.services.dispatcher.kobjects import Pod

LOG_STREAMS = 8  # logs read at once (threads)
CONNECT_TIMEOUT_S = 10.0
_DONE = object()  # the reading thread's end


class LogsRefused(Exception):
    """A logs request answered with no lines: its reason and message."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason


@dataclass(frozen=True)
class PodChoice:
    namespace: str
    pod: str
    container: str
    attempt: int


def _replica_names(pod: Pod) -> list[str]:
    """What ``--replica`` may call a pod: its replica label, and its hostname in its gang's Service."""
    labels = pod.metadata.labels or {}
    names = [labels.get(LABEL_REPLICA, MAIN_REPLICA)]
    hostname = pod.spec.hostname if pod.spec is not None else None
    return names + ([hostname] if hostname and hostname not in names else [])


def _attempt_of(pod: Pod) -> int | None:
    try:
        return int((pod.metadata.labels or {}).get(LABEL_ATTEMPT, ""))
    except ValueError:
        return None


def choose_pod(request: LogsRequest, latest: Attempt | None, known_op: bool, pods: list[Pod]) -> PodChoice:
    """The pod and container a request reads (``pods``: the op's pods on the API server), or ``LogsRefused``."""
    op = request.op_id
    if latest is None:
        if not known_op:
            raise LogsRefused(Reason.UNKNOWN_OP, f"op {op}: {message(Reason.UNKNOWN_OP)}")
        raise LogsRefused(LogsRefusal.NO_POD_YET, f"op {op} has no pod yet: it has not been admitted "
                                                  f"(`opsched why {op}` says why)")
    number = latest.attempt if request.attempt is None else request.attempt
    if number > latest.attempt:
        raise LogsRefused(LogsRefusal.UNKNOWN_ATTEMPT, f"op {op} has no attempt {number}: its attempts are "
                                                       f"0..{latest.attempt}")
    own = [p for p in pods if _attempt_of(p) == number]
    wanted = request.replica or MAIN_REPLICA
    pod = next((p for p in own if wanted in _replica_names(p)), None)
    if pod is None:
        _refuse_missing(request, latest, number, own)
    assert pod is not None and pod.spec is not None
    if not pod.spec.node_name:  # the API server answers an unbound pod's log with nothing, not a refusal
        raise LogsRefused(LogsRefusal.NOT_STARTED, f"pod {pod.metadata.name} of op {op} is not on a node yet "
                                                   "(kube-scheduler has not bound it)")
    containers = [c.name for c in pod.spec.containers or []]
    container = request.container or (containers[0] if containers else "")
    if container not in containers:
        raise LogsRefused(LogsRefusal.UNKNOWN_CONTAINER, f"pod {pod.metadata.name} of op {op} has no container "
                                                         f"{container!r}; its containers: {', '.join(containers)}")
    return PodChoice(pod.metadata.namespace or "", pod.metadata.name, container, number)


def _refuse_missing(request: LogsRequest, latest: Attempt, number: int, own: list[Pod]) -> None:
    op, wanted = request.op_id, request.replica or MAIN_REPLICA
    current = number == latest.attempt
    if own and (request.replica and request.replica != MAIN_REPLICA):
        known = sorted({" (".join(_replica_names(p)) + (")" if len(_replica_names(p)) > 1 else "") for p in own})
        raise LogsRefused(LogsRefusal.UNKNOWN_REPLICA, f"attempt {number} of op {op} has no replica {wanted!r}; "
                                                       f"its pods' replicas: {', '.join(known)}")
    if current and latest.stage <= Stage.DISPATCHED:
        raise LogsRefused(LogsRefusal.NO_POD_YET, f"attempt {number} of op {op} has no {wanted} pod yet: "
                                                  "it is being created")
    raise LogsRefused(LogsRefusal.POD_GONE, f"the {wanted} pod of attempt {number} of op {op} is gone "
                                            "(deleted: its ttl, a stop, a preemption or its gang's release)")


# ---- lines and chunks ----
def parse_stamp(text: str) -> int | None:
    """An RFC 3339 time with up to nanoseconds (``2026-01-02T03:04:05.5Z``) as nanoseconds since the epoch."""
    head, dot, rest = text.partition(".")
    fraction = rest.rstrip("Z") if dot else ""
    try:
        whole = datetime.strptime(head.rstrip("Z"), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    if not fraction.isdigit() and fraction:
        return None
    return int(whole.timestamp()) * 1_000_000_000 + int((fraction + "000000000")[:9])


def split_stamp(line: str) -> tuple[int | None, str, str]:
    """A line as the API gives it with ``timestamps``: (its time in ns, the time's text, the line)."""
    stamp, _, text = line.partition(" ")
    at = parse_stamp(stamp)
    return (at, stamp, text) if at is not None else (None, "", line)


def chunks_of(lines: list[str]) -> list[list[str]]:
    """``lines`` in chunks of at most ``LOGS_CHUNK_LINES`` lines and ``LOGS_CHUNK_BYTES`` bytes (a longer line cut)."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for line in lines:
        encoded = line.encode()
        if len(encoded) > LOGS_CHUNK_BYTES:
            line = encoded[:LOGS_CHUNK_BYTES].decode(errors="ignore")
            encoded = line.encode()
        if current and (len(current) >= LOGS_CHUNK_LINES or size + len(encoded) > LOGS_CHUNK_BYTES):
            out.append(current)
            current, size = [], 0
        current.append(line)
        size += len(encoded)
    return out + ([current] if current else [])


def since_seconds(after: str, now: float) -> int | None:
    """The API's ``sinceSeconds`` that covers every line after ``after`` (a margin for clocks; lines not after it are
    dropped here); None without ``after``."""
    at = parse_stamp(after) if after else None
    return None if at is None else max(1, math.ceil(now - at / 1e9) + 2)


class _Answer:
    """One request's answer: its chunks, counted against the bounds."""

    def __init__(self, request: LogsRequest, respond: Callable[[bytes], Awaitable[None]]) -> None:
        self.request = request
        self.respond = respond
        self.seq = 0
        self.pod, self.container, self.attempt = "", "", 0
        self.last_at = request.after
        self.after_ns = parse_stamp(request.after) if request.after else None

    def chunk(self, **fields: Any) -> LogsChunk:
        return LogsChunk(op_id=self.request.op_id, seq=self.seq, pod=self.pod, container=self.container,
                         attempt=self.attempt, last_at=self.last_at, **fields)

    async def send(self, chunk: LogsChunk) -> None:
        await self.respond(codec.encode(chunk))
        self.seq += 1

    @property
    def full(self) -> bool:
        return self.seq >= LOGS_ANSWER_CHUNKS - 1  # the last message is the end's

    async def lines(self, raw: list[str]) -> bool:
        """Send ``raw`` (lines with their times) in chunks while the answer has room; False when it filled up first
        (``last_at`` is then the last line sent: a next request reads on after it)."""
        kept, stamps = [], []
        for line in raw:
            at, stamp, text = split_stamp(line)
            if at is not None and self.after_ns is not None and at <= self.after_ns:
                continue
            kept.append(f"{stamp} {text}" if self.request.timestamps and stamp else text)
            stamps.append(stamp)
        sent = 0
        for lines in chunks_of(kept):
            if self.full:
                return False
            sent += len(lines)
            self.last_at = next((s for s in reversed(stamps[:sent]) if s), self.last_at)
            await self.send(self.chunk(lines=lines))
        return True


class LogReader:
    """Answers logs requests from ``kube``: ``attempts(op_id)`` is the op's latest attempt this dispatcher folded,
    ``known(op_id)`` whether the op is on the op stream at all."""

    def __init__(self, kube: Kube, attempts: Callable[[str], Attempt | None],
                 known: Callable[[str], Awaitable[bool]], log: Any) -> None:
        self.kube = kube
        self.attempts = attempts
        self.known = known
        self.log = log
        self.reading = 0

    async def answer(self, data: bytes, respond: Callable[[bytes], Awaitable[None]]) -> None:
        """Answer one request (``respond`` sends one message to its reply subject)."""
        try:
            request = codec.decode_logs_request(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            await respond(codec.encode(LogsChunk(op_id="", end=True, reason=LogsRefusal.INVALID_LOGS_REQUEST,
                                                 message=f"logs request refused: {exc}")))
            return
        answer = _Answer(request, respond)
        try:
            more = await self._answer(request, answer)
        except LogsRefused as refused:
            await answer.send(answer.chunk(end=True, reason=refused.reason, message=str(refused)))
            return
        await answer.send(answer.chunk(end=True, more=more))

    async def _answer(self, request: LogsRequest, answer: _Answer) -> bool:
        if not valid_token(request.op_id):
            raise LogsRefused(LogsRefusal.INVALID_LOGS_REQUEST, f"op id {request.op_id!r} is not an op id")
        if request.after and parse_stamp(request.after) is None:
            raise LogsRefused(LogsRefusal.INVALID_LOGS_REQUEST, f"after: not an RFC 3339 time: {request.after!r}")
        if self.reading >= LOG_STREAMS:
            raise LogsRefused(LogsRefusal.LOGS_BUSY, f"the dispatcher reads {LOG_STREAMS} logs already; ask again")
        self.reading += 1
        try:
            choice = await self._choose(request)
            answer.pod, answer.container, answer.attempt = choice.pod, choice.container, choice.attempt
            return await self._stream(choice, request, answer)
        finally:
            self.reading -= 1

    async def _choose(self, request: LogsRequest) -> PodChoice:
        latest = self.attempts(request.op_id)
        known = latest is not None or await self.known(request.op_id)
        pods = await self._pods(request.op_id) if latest is not None else []
        return choose_pod(request, latest, known, pods)

    async def _pods(self, op_id: str) -> list[Pod]:
        try:
            return await self.kube.list_pods(f"{SELECTOR},{LABEL_OP}={op_id}")
        except Exception as exc:  # noqa: BLE001 - any failure of the API server is the answer's refusal
            raise LogsRefused(LogsRefusal.KUBERNETES_UNAVAILABLE, f"the Kubernetes API did not answer: {exc}") from exc

    async def _stream(self, choice: PodChoice, request: LogsRequest, answer: _Answer) -> bool:
        """Send the lines as they are read; True when cut short by the bounds (the answer says ``more``)."""
        loop = asyncio.get_running_loop()
        handoff: asyncio.Queue[Any] = asyncio.Queue(maxsize=4)
        stop = threading.Event()
        held: dict[str, Any] = {}  # the API's answer, once the thread has it (shut down from here to end a follow)
        reading = _in_thread(loop, self._read, choice, request, handoff, loop, stop, held)
        deadline = loop.time() + LOGS_FOLLOW_S
        cut = False
        try:
            while True:
                try:
                    item = await asyncio.wait_for(handoff.get(), timeout=max(0.0, deadline - loop.time()))
                except asyncio.TimeoutError:
                    cut = True
                    break
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise _refusal(item, choice) from item
                if not await answer.lines(item) or answer.full or loop.time() >= deadline:
                    cut = True
                    break
        finally:
            stop.set()
            _shut(held.get("response"))
            self._drain(handoff)
            await asyncio.wait([reading], timeout=5.0)
        return cut

    @staticmethod
    def _drain(handoff: asyncio.Queue[Any]) -> None:
        while not handoff.empty():
            handoff.get_nowait()

    def _read(self, choice: PodChoice, request: LogsRequest, handoff: asyncio.Queue[Any],
              loop: asyncio.AbstractEventLoop, stop: threading.Event, held: dict[str, Any]) -> None:
        """In a thread of its own: the API's answer, line by line, handed to the loop; ends with ``_DONE`` (or the
        exception that ended it)."""
        hand = _Hand(handoff, loop, stop)
        try:
            response = self.kube.core.read_namespaced_pod_log(
                choice.pod, choice.namespace, container=choice.container, follow=request.follow,
                tail_lines=request.tail if not request.after else None, timestamps=True,
                since_seconds=since_seconds(request.after, time.time()), _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT_S, LOGS_FOLLOW_S + 30.0))
        except Exception as exc:  # noqa: BLE001 - handed to the loop, which refuses with it
            hand(exc)
            return
        held["response"] = response
        if stop.is_set():
            _shut(response)
        try:
            _pump(response, hand, stop)
        except Exception as exc:  # noqa: BLE001 - the connection closed under it (a stop) or failing: the loop decides
            if not stop.is_set():
                hand(exc)
        finally:
            response.release_conn()


class _Hand:
    """Hands an item from the reading thread to the loop (waiting while the loop is behind), until ``stop``."""

    def __init__(self, handoff: asyncio.Queue[Any], loop: asyncio.AbstractEventLoop, stop: threading.Event) -> None:
        self.handoff, self.loop, self.stop = handoff, loop, stop

    def __call__(self, item: Any) -> bool:
        future = asyncio.run_coroutine_threadsafe(self.handoff.put(item), self.loop)
        while not self.stop.is_set():
            try:
                future.result(0.5)
                return True
            except FutureTimeout:
                continue
        future.cancel()
        return False


def _pump(response: Any, hand: _Hand, stop: threading.Event) -> None:
    """The answer's complete lines, as they come (a read gives what arrived: a follow's line as it is printed)."""
    pending = b""
    for data in response.stream(LOGS_CHUNK_BYTES, decode_content=True):
        pending += data
        *complete, pending = pending.split(b"\n")
        if complete and not hand([line.decode(errors="replace") for line in complete]):
            return
        if stop.is_set():
            return
    if pending:
        hand([pending.decode(errors="replace")])
    hand(_DONE)


def _in_thread(loop: asyncio.AbstractEventLoop, target: Callable[..., None], *args: Any) -> asyncio.Future[None]:
    """``target(*args)`` in a daemon thread of its own; the future is done when it returns."""
    done: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not done.done():
            done.set_result(None)

    def run() -> None:
        try:
            target(*args)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(settle)
    threading.Thread(target=run, name="logs", daemon=True).start()
    return done


def _shut(response: Any) -> None:
    """End a follow's connection from another thread: the read blocked on it returns (urllib3's ``shutdown``)."""
    if response is not None:
        try:
            response.shutdown()
        except Exception:  # noqa: BLE001, S110 - already closed: nothing left to end
            pass


def _refusal(exc: BaseException, choice: PodChoice) -> LogsRefused:
    """What reading a pod's log failing means for the requester."""
    if isinstance(exc, ApiException) and unavailable(exc) is None:
        text = _api_message(exc)
        if exc.status == 404:
            return LogsRefused(LogsRefusal.POD_GONE, f"pod {choice.pod} is gone: {text}")
        if "waiting to start" in text or "ContainerCreating" in text:
            return LogsRefused(LogsRefusal.NOT_STARTED, f"pod {choice.pod}: {text}")
        return LogsRefused(LogsRefusal.INVALID_LOGS_REQUEST, f"pod {choice.pod}: {text}")
    return LogsRefused(LogsRefusal.KUBERNETES_UNAVAILABLE, f"reading pod {choice.pod}'s log failed: {exc}")


def _api_message(exc: ApiException) -> str:
    try:
        return str(msgspec.json.decode(exc.body or b"{}").get("message") or exc.reason)
    except (msgspec.DecodeError, AttributeError):
        return str(exc.body or exc.reason)
