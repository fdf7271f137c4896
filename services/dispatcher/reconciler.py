"""Level-triggered repair, as Kubernetes controllers do: on start and every ``reconcile_interval_s``,
compare the attempts that should have pods (``attempts``: the op stream folded) with opsched's pods on
the API server, and repair what the event-driven paths missed (an API server that was down, a watch
that hung, a dispatcher that was not running):

- an attempt admitted ``reconcile_grace_s`` ago and still not dispatched is dispatched again: its
  missing pods are created through the admitted handler's own path (409: it exists) and ``dispatched``
  (or ``rejected``/``failed``) is published;
- a pod whose attempt's status the watch missed is read again and the event published as the watcher
  would (``gang.assess``; ``Nats-Msg-Id`` makes a duplicate of the watcher's a no-op);
- an attempt dispatched or running whose pods are all gone, two rounds in a row (so a fold that lags
  the event which ended the attempt is never mistaken for it), is reported ``failed`` with reason
  ``PodDeleted``: the conclusion the watcher reaches for a pod deleted by someone else, whether or not
  anyone watched; the op's ``maxRetries`` decides whether it runs again;
- a pod still running whose attempt is not live (ended, or superseded by a later attempt; or unknown
  for longer than the grace: a fold lagging the pod's creation is not an orphan) is released: annotated
  ``opsched.io/evicted: orphaned``, then deleted, so the watcher never takes it for a failure. Finished
  pods are left to ``termination.ttl``; pods of an attempt being stopped or preempted to that handler.

``decide`` is pure (the table, the pods, the time → actions); ``Reconciler`` lists, decides and acts. The
pods come from the pod watchers' own state while their watches are synced (listed, and watching since:
they hold every pod they saw), else from a list of the API server (never listed yet, re-listing after an
error); a watch that hangs silently is no longer synced once the client's read timeout ends it."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from opsched.proto import codec
from opsched.proto.events import Event, OperationFailed
from opsched.proto.reasons import Eviction
from opsched.rules.podspec import ANNOTATION_EVICTED
from opsched.services.dispatcher.attempts import Attempt, Attempts, Stage
from opsched.services.dispatcher.gang import DELETED_REASON, AttemptKey, PodView, assess, main_of
from opsched.services.dispatcher.preempt import _pause

ORPHANED = Eviction.ORPHANED  # evicted: a pod no live attempt owns
VANISHED_MESSAGE = "the attempt's pods were deleted while opsched was not watching"


@dataclass(frozen=True)
class Dispatch:
    attempt: Attempt


@dataclass(frozen=True)
class Report:
    event: Event


@dataclass(frozen=True)
class Release:
    pods: tuple[PodView, ...]
    why: str


Action = Dispatch | Report | Release


@dataclass(frozen=True)
class Plan:
    actions: list[Action]
    vanishing: frozenset[AttemptKey] = field(default_factory=frozenset)  # to report if still gone next round


def decide(table: Mapping[str, Attempt], pods: list[PodView], now: datetime, grace_s: float,
           vanishing: frozenset[AttemptKey] = frozenset()) -> Plan:
    """What to repair. ``table``: op id -> latest attempt, taken *before* ``pods`` were listed;
    ``vanishing``: the attempts found without pods in the previous round."""
    grace = timedelta(seconds=grace_s)
    by_attempt: dict[AttemptKey, list[PodView]] = {}
    for view in pods:
        by_attempt.setdefault(view.key, []).append(view)
    actions: list[Action] = []
    gone: set[AttemptKey] = set()  # dispatched or running, and no pod listed
    for attempt in table.values():
        if not attempt.stage.live or attempt.admitted is None:
            continue
        if attempt.stage == Stage.ADMITTED:
            if attempt.admitted.at + grace <= now:
                actions.append(Dispatch(attempt))
            else:
                continue  # its handler is at work
        views = by_attempt.get(attempt.key, [])
        if views:
            actions += _status(attempt, views, now)
        elif attempt.stage >= Stage.DISPATCHED:
            if attempt.key in vanishing:
                actions.append(Report(_vanished(attempt, now)))
            else:
                gone.add(attempt.key)
    return Plan(actions + _releases(table, by_attempt, now, grace), frozenset(gone))


def _releases(table: Mapping[str, Attempt], by_attempt: dict[AttemptKey, list[PodView]], now: datetime,
              grace: timedelta) -> list[Action]:
    """The pods still running of attempts that are no longer live (``_orphaned``): to release."""
    actions: list[Action] = []
    for key, views in by_attempt.items():
        why = _orphaned(table.get(key[0]), key, views, now, grace)
        running = tuple(v for v in views if not v.deleting and v.phase not in ("Succeeded", "Failed"))
        if why and running:
            actions.append(Release(running, why))
    return actions


def _status(attempt: Attempt, views: list[PodView], now: datetime) -> list[Action]:
    reported = attempt.stage.reported
    event = assess(views, reported, now)
    if event is None or codec.type_of(event) == reported:
        return []
    return [Report(event)]


def _vanished(attempt: Attempt, now: datetime) -> OperationFailed:
    assert attempt.admitted is not None
    return OperationFailed(op_id=attempt.op_id, at=now, attempt=attempt.attempt, pod_name=attempt.admitted.pod_name,
                           reason=DELETED_REASON, message=VANISHED_MESSAGE)


def _orphaned(latest: Attempt | None, key: AttemptKey, views: list[PodView], now: datetime,
              grace: timedelta) -> str | None:
    """Why the pods of ``key`` have no live attempt, or None (live, being released, or too young to tell)."""
    if latest is not None and latest.attempt > key[1]:
        return f"attempt {key[1]} superseded by attempt {latest.attempt}"
    if latest is not None and latest.attempt == key[1]:
        return "its attempt ended" if latest.stage == Stage.ENDED else None
    main = main_of(views) or views[0]
    if main.created is not None and main.created + grace <= now:
        return "no such attempt on the op stream"
    return None


# ---- acting on the plan ----------------------------------------------------------------------------

ListPods = Callable[[], Awaitable[list[PodView]]]  # opsched's pods on the API server
Redispatch = Callable[[Attempt], Awaitable[Event | None]]  # the admitted handler's path
Publish = Callable[[Event], Awaitable[Any]]
Free = Callable[[list[PodView], dict[str, str]], Awaitable[Any]]


class Reconciler:
    def __init__(self, attempts: Attempts, list_pods: ListPods, redispatch: Redispatch, free: Free,
                 publish: Publish, clock: Any, settings: Any, log: Any) -> None:
        self.attempts, self.list_pods, self.redispatch, self.free = attempts, list_pods, redispatch, free
        self.publish, self.clock, self.settings, self.log = publish, clock, settings, log
        self.vanishing: frozenset[AttemptKey] = frozenset()
        self.rounds = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile now, then every ``reconcile_interval_s`` (the injected clock) until ``stop``."""
        while not stop.is_set():
            try:
                await self.reconcile()
            except Exception as exc:  # noqa: BLE001 - API or bus unavailable: the next round retries
                self.log.warning("reconcile_failed", error=repr(exc))
            await _pause(self.clock, stop, self.settings.reconcile_interval_s)

    async def reconcile(self) -> list[Action]:
        """One round: snapshot the table, list the pods, decide, act. Returns what it did."""
        table = {a.op_id: a for a in self.attempts.snapshot()}
        pods = await self.list_pods()
        plan = decide(table, pods, self.clock.now(), self.settings.reconcile_grace_s, self.vanishing)
        self.vanishing = plan.vanishing
        for action in plan.actions:
            try:
                await self._act(action)
            except Exception as exc:  # noqa: BLE001 - the next round retries
                self.log.warning("reconcile_action_failed", action=_describe(action), error=repr(exc))
        self.rounds += 1
        if plan.actions:
            self.log.info("reconciled", actions=[_describe(a) for a in plan.actions], pods=len(pods))
        return plan.actions

    async def _act(self, action: Action) -> None:
        if isinstance(action, Dispatch):
            if self.attempts.wanted(action.attempt.key):  # a stop or preemption since the snapshot wins
                event = await self.redispatch(action.attempt)
                if event is not None:
                    await self.publish(event)
        elif isinstance(action, Report):
            await self.publish(action.event)
        else:
            await self.free(list(action.pods), {ANNOTATION_EVICTED: ORPHANED})


def _describe(action: Action) -> str:
    if isinstance(action, Dispatch):
        return f"dispatch {action.attempt.op_id}/{action.attempt.attempt}"
    if isinstance(action, Report):
        e = action.event
        return f"report {codec.type_of(e)} {e.op_id}/{e.attempt}"
    return f"release {','.join(v.name for v in action.pods)} ({action.why})"

