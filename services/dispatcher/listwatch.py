"""A list+watch loop on a thread (the official client blocks), handing results to the event loop.

Subclasses say what to list and watch (``list_call``, ``watch_kwargs``, ``decoders``) and what an object
means (``observe``). Lists and watch lines are raw JSON (``_preload_content=False``) decoded with msgspec
into ``kobjects`` (only the fields the dispatcher reads), never into the client's models. A watch that the server ends (``timeoutSeconds``) resumes from the last resource version
it saw; the loop re-lists when the API answers 410 Gone, when the connection drops or stays silent past
the client's read timeout (a dead API server) and on any ERROR event, retrying after 1 s on errors, and
stays quiet once stopped (e.g. while the API server shuts down). ``synced`` says whether what it observed
is the API server's current state: listed, and watching since (False before the first list and from a
watch's failure until the next list is through).

Every call has a timeout, so a live loop always makes progress: a list answered or failed, a watch event,
a watch ended, a retry. ``liveness`` says when the thread died (an exception escaped) or made no progress
for ``STUCK_AFTER_S`` (a call hung despite its timeouts): the service's /healthz then answers 503 and
Kubernetes restarts it."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

from kubernetes.client.rest import ApiException

from opsched.services.dispatcher.kobjects import Decoders

WATCH_TIMEOUT_S = 60  # the API server ends every watch after this long; the loop resumes from where it was
CONNECT_TIMEOUT_S = 10.0
# the client gives up on a connection silent for longer than the server would ever keep it open
# (a black-holed or restarted API server): the loop then re-lists
REQUEST_TIMEOUT = (CONNECT_TIMEOUT_S, WATCH_TIMEOUT_S + 15.0)
LIST_TIMEOUT = (CONNECT_TIMEOUT_S, 60.0)
# the longest a live loop goes without progress (a watch silent until the client's read timeout), and a margin
STUCK_AFTER_S = CONNECT_TIMEOUT_S + REQUEST_TIMEOUT[1] + 30.0


class ListWatch:
    name = "list-watch"
    forbidden = ""  # what a 403 means (RBAC): the grant it lacks, logged with each refused list or watch
    decoders: Decoders[Any]  # of the objects it lists and watches

    def __init__(self, log, clock) -> None:
        self.log = log
        self.clock = clock
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._beat: datetime | None = None  # the loop's last sign of progress
        self._died: str | None = None  # what escaped the loop and ended the thread
        self.synced = False  # listed, and watching since

    # -- for subclasses ---------------------------------------------------------------------------
    def list_call(self) -> Callable[..., Any]:
        raise NotImplementedError

    def watch_kwargs(self) -> dict[str, Any]:
        return {}

    def observe(self, kind: str, obj: Any) -> None:
        raise NotImplementedError

    def listed(self, items: list[Any], resource_version: str) -> None:
        """After a list: every object was observed; subclasses may reconcile what vanished."""

    def failed(self, exc: ApiException) -> float:
        """A list or watch the API server refused (not 410 Gone): logged; the seconds before the next list."""
        hint = {"fix": self.forbidden} if exc.status == 403 and self.forbidden else {}
        self.log.warning(f"{self.name}_failed", status=exc.status, error=str(exc.reason), **hint)
        return 1.0

    def resumed(self) -> None:
        """After each watch the server ended (every ``WATCH_TIMEOUT_S``): subclasses may retry what failed."""

    # -- the loop ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._beat = self.clock.now()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def liveness(self) -> str | None:
        """None while the loop is alive (or was never started, or was stopped); else what is wrong with it."""
        if self._thread is None or self._beat is None or self._stop.is_set():
            return None
        if self._died is not None or not self._thread.is_alive():
            return f"the {self.name} thread died: {self._died or 'it exited'}"
        silent = (self.clock.now() - self._beat).total_seconds()
        if silent > STUCK_AFTER_S:
            return f"the {self.name} thread made no progress for {silent:.0f}s (no list, no event, no retry)"
        return None

    def _progress(self) -> None:
        self._beat = self.clock.now()

    def _run(self) -> None:
        try:
            self._list_and_watch()
        except BaseException as exc:  # noqa: BLE001 - the thread ends: ``liveness`` reports it
            self._died = repr(exc)[:300]
            self.log.error(f"{self.name}_died", error=self._died)

    def _list_and_watch(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch(self._list())
            except ApiException as exc:
                if exc.status != 410 and not self._stop.is_set():
                    self._stop.wait(self.failed(exc))
            except Exception as exc:  # noqa: BLE001 - API unreachable: retry
                if not self._stop.is_set():
                    self.log.warning(f"{self.name}_failed", error=repr(exc))
                    self._stop.wait(1.0)
            self._progress()

    def _list(self) -> str:
        response = self.list_call()(**self.watch_kwargs(), _request_timeout=LIST_TIMEOUT, _preload_content=False)
        result = self.decoders.list.decode(response.data)
        self._progress()
        for item in result.items:
            self.observe("MODIFIED", item)
        self.listed(result.items, result.metadata.resource_version)
        self.synced = True
        return result.metadata.resource_version

    def _watch(self, rv: str) -> None:
        """Watch from ``rv`` until stopped; each watch the server ends resumes where it was.
        Raises on ERROR events (410 Gone among them) and on connection errors and read timeouts (the
        caller re-lists); no longer ``synced`` from then on."""
        try:
            while not self._stop.is_set():
                rv = self._watch_once(rv)
                if self._stop.is_set():
                    return
                self.resumed()
                self._progress()
        finally:
            self.synced = False

    def _watch_once(self, rv: str) -> str:
        """One watch from ``rv``, until the server ends it (or the loop is stopped); the last version seen."""
        response = self.list_call()(watch=True, resource_version=rv, timeout_seconds=WATCH_TIMEOUT_S,
                                    _request_timeout=REQUEST_TIMEOUT, _preload_content=False, **self.watch_kwargs())
        try:
            for line in _lines(response):
                if self._stop.is_set():
                    return rv
                event = self.decoders.event.decode(line)
                if event.type == "ERROR":
                    status = self.decoders.status.decode(event.object)
                    raise ApiException(status=status.code, reason=f"{status.reason}: {status.message}")
                obj = self.decoders.object.decode(event.object)
                rv = obj.metadata.resource_version or rv
                if event.type != "BOOKMARK":
                    self.observe(event.type, obj)
                self._progress()
            return rv
        finally:
            response.close()  # read to its end, its connection is back in the pool already

    def run_on_loop(self, coro: Awaitable[Any], what: str) -> bool:
        """Run a coroutine (a publish) on the event loop and wait for it; False if it failed."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(_awaited(coro), self._loop)
        try:
            future.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - not published: the next change or re-list retries
            self.log.warning("publish_failed", what=what, error=f"{type(exc).__name__}: {exc}")  # APIError: repr is bare
            return False
        return True


def _lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed answer (one watch event each), as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        if b"\n" in buffer:
            *lines, buffer = buffer.split(b"\n")
            yield from (line for line in lines if line.strip())
    if buffer.strip():
        yield buffer


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
