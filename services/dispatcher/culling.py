"""Culling: a service nobody used for its ``termination.culling.timeout`` is stopped (Polyaxon's culling).

Idle time is measured from the attempt's start (its first ``running``) or its last ``touched`` (``opsched touch ID``,
which admission accepts only for a running service), whichever is later, on the injected clock; both come from the
op stream the dispatcher folds (``attempts``), so a restarted dispatcher measures the same. A culled attempt is
released as a stop is (its pods annotated ``opsched.io/stopped``, then deleted with the stop grace period, its
Service with them) and the dispatcher publishes ``stopped`` with reason ``culled`` (``proto.reasons.Ending``): a
normal end, not a failure (hooks with trigger ``stopped`` or ``done`` run). ``culled`` is a pure decision;
``check_culling`` runs it every few seconds beside the expiry checks (``expiry``).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from opsched.proto.events import OperationStopped
from opsched.proto.reasons import Ending
from opsched.rules.podspec import ANNOTATION_STOPPED
from opsched.services.dispatcher.attempts import Attempt, Stage
from opsched.services.runtime.clock import Clock

CHECK_INTERVAL_S = 5.0


def idle_since(attempt: Attempt) -> datetime | None:
    """When the attempt was last used: its last touch, else its start; None before it runs."""
    if attempt.running_at is None:
        return None
    return max(attempt.running_at, attempt.touched_at or attempt.running_at)


def culled(attempt: Attempt, now: datetime) -> OperationStopped | None:
    """The ``stopped`` of a running service idle for its culling timeout by ``now``; None otherwise."""
    admitted = attempt.admitted
    culling = admitted.spec.termination.culling if admitted is not None else None
    since = idle_since(attempt)
    if attempt.stage != Stage.RUNNING or culling is None or since is None:
        return None
    if since + timedelta(seconds=culling.timeout) > now:
        return None
    idle = (now - since).total_seconds()
    return OperationStopped(op_id=attempt.op_id, at=now, attempt=attempt.attempt, reason=Ending.CULLED,
                            message=f"idle for {idle:.0f}s, past its termination.culling.timeout of "
                                    f"{culling.timeout}s (nobody ran `opsched touch {attempt.op_id}`)")


async def cull(attempt: Attempt, event: OperationStopped, releaser: Any,
               publish: Callable[[OperationStopped], Awaitable[Any]]) -> None:
    """Release the attempt's pods as a stop does, then publish its ``stopped`` (the pods annotated first: the
    watcher never takes their deletion for a failure)."""
    admitted = attempt.admitted
    assert admitted is not None
    names = await releaser.attempt_pods(admitted.namespace, attempt.op_id, attempt.attempt, admitted.pod_name)
    await releaser.release(admitted.namespace, names, {ANNOTATION_STOPPED: "true"}, releaser.settings.stop_grace_s,
                           admitted.pod_name)
    await publish(event)


async def check_culling(attempts: Callable[[], list[Attempt]], releaser: Any,
                        publish: Callable[[OperationStopped], Awaitable[Any]], clock: Clock, stop: asyncio.Event,
                        log: Any) -> None:
    """Every few seconds: stop the running services idle past their culling timeout."""
    while not stop.is_set():
        for attempt in attempts():
            event = culled(attempt, clock.now())
            if event is None:
                continue
            try:
                await cull(attempt, event, releaser, publish)
                log.info("service_culled", op_id=attempt.op_id, attempt=attempt.attempt, message=event.message)
            except Exception as exc:  # noqa: BLE001 - API or bus trouble: the next check retries
                log.warning("culling_failed", op_id=attempt.op_id, error=repr(exc))
        waits = [asyncio.ensure_future(clock.sleep(CHECK_INTERVAL_S)), asyncio.ensure_future(stop.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
