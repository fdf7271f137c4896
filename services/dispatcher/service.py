"""The dispatcher service.

Consumes ``admitted``, ``stop_requested`` and ``preempt_requested`` (durable
``dispatcher-admitted``): creates the pods of each admitted attempt (``dispatch``: one, or a gang)
and emits ``dispatched`` (or ``rejected``, ``failed``); releases pods on preemption and stop
(``preempt``) and emits ``preempted``, ``stopped``. Its background tasks watch the pods
(``watcher``: ``running``, ``succeeded``, ``failed``, ``timed_out``, ``preempted``) and the nodes
(``nodewatch``: node facts on the cluster stream), repair what those paths missed by comparing the
attempts folded from the op stream (``attempts``) with the pods on the API server (``reconciler``), evict gangs not all Running in time
and create the main pod of a gang whose main pod waits for the others once they run (``preempt.check_gangs``),
expire what outlived its ttl (``expiry``) and stop services idle past their culling timeout (``culling``:
``stopped``, reason ``culled``; the ``touched`` events it folds say when each was last used). The default agent's
dispatcher also watches the cluster's queue resources and sends the configuration they make (``queue_resources``). It answers
`opsched logs` (``logs``: ``subjects.QUERY_LOGS``, a bounded stream of chunks; the default agent's dispatcher). A stop or preemption wins over an
``admitted`` handled later or elsewhere: each attempt's fate is kept in KV (``fates``). It folds the queue
configuration itself (``admitted_checks``) and refuses an ``admitted`` that asks for more than its queue allows
(bad input: ``rejected``, a dead letter and an ``error`` event; no pod). Given its queue
namespaces (``OPSCHED_POD_NAMESPACES``: its RBAC Roles), it watches and lists pods in each of them only. In null mode
(``OPSCHED_DISPATCHER_MODE=null``) there is no cluster: admitted attempts are dispatched at once."""
from __future__ import annotations

import asyncio
import dataclasses

import msgspec

from opsched.bus.bus import Bus
from opsched.proto import codec, subjects
from opsched.proto.cluster import AgentHeartbeat
from opsched.proto.events import (
    Event,
    OperationAdmitted,
    OperationFailed,
    OperationPreempted,
    OperationStopped,
    PreemptRequested,
    StopRequested,
)
from opsched.proto.reasons import Eviction
from opsched.rules.podspec import ANNOTATION_EVICTED, SELECTOR
from opsched.rules.queue_resources import KINDS
from opsched.rules.replica_roles import main_waits
from opsched.services.dispatcher.admitted_checks import QueuesInForce
from opsched.services.dispatcher.attempts import Attempt, Attempts, folded_subjects
from opsched.services.dispatcher.culling import check_culling
from opsched.services.dispatcher.dispatch import dispatch, start_main
from opsched.services.dispatcher.expiry import check_expiry
from opsched.services.dispatcher.fates import Fates
from opsched.services.dispatcher.gang import PodView
from opsched.services.dispatcher.k8s import Kube, load_api_client
from opsched.services.dispatcher.kobjects import Pod
from opsched.services.dispatcher.logs import LogReader
from opsched.services.dispatcher.nodewatch import NodeWatcher
from opsched.services.dispatcher.podstatus import view_of
from opsched.services.dispatcher.preempt import Releaser, check_gangs
from opsched.services.dispatcher.queue_resources import QueueResources
from opsched.services.dispatcher.reconciler import Reconciler
from opsched.services.dispatcher.watcher import PodWatcher
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.service import Consumer, Context, Service, Task
from opsched.services.runtime.settings import Settings

LIST_TIMEOUT_S = 30.0
UNWANTED = Eviction.UNWANTED  # evicted: created for an attempt that a stop or preemption released meanwhile


class Dispatcher(Service):
    name = "dispatcher"
    ops = Consumer(subjects.DISPATCHER_ADMITTED, subjects.OPS_STREAM, subjects.dispatcher_filters(""))

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        super().__init__(settings, clock)
        agent = settings.agent  # a named agent's dispatcher consumes only what admission routes to it
        self.subscriptions = [dataclasses.replace(s, durable=subjects.dispatcher_durable(agent),
                                                  filters=subjects.dispatcher_filters(agent))
                              for s in self.subscriptions]
        self.kube = None if settings.dispatcher_mode == "null" else Kube(
            load_api_client(settings.kubeconfig, _connections(settings)), settings.kube_request_timeout_s,
            settings.queue_namespaces(), settings.kube_concurrency)
        self.releaser: Releaser | None = None
        self.watchers: list[PodWatcher] = []  # one per queue namespace, or one of every namespace
        self.node_watcher: NodeWatcher | None = None
        self.attempts = Attempts()  # which attempts should have pods (routed to its agent)
        self.fates: Fates | None = None  # what every replica decided per attempt (opened by ``start``)
        self.queues = QueuesInForce(settings.namespace, self.log)  # what an admitted op may run with
        self.logs: LogReader | None = None  # answers `opsched logs` (the default agent's dispatcher, with a cluster)
        self.queue_resources: QueueResources | None = None  # the cluster's queue resources (the default agent's)
        if self.kube is not None and not agent and settings.queue_resources == "watch":
            self.queue_resources = QueueResources(self.kube, self.queues, self.clock, self.log,
                                                  settings.queue_status_interval_s)
        if self.kube is not None:
            self.releaser = Releaser(self.kube, settings, self.log)
            if not agent:
                self.logs = LogReader(self.kube, self.attempts.get, self._known, self.log)
            self.watchers = [PodWatcher(self.kube.core, self._publish, self.clock, self.log, free=self.releaser.free,
                                        namespace=ns, unwind=self.releaser.delete_rendezvous)
                             for ns in self.kube.namespaces or (None,)]

    def tasks(self) -> list[Task]:
        if self.kube is None:
            return []  # null mode: no cluster to watch
        beat = [self.heartbeat] if self.settings.agent else []
        resources = [self.watch_queue_resources] if self.queue_resources is not None else []
        return [self.watch_pods, self.watch_nodes, self.run_gang_checks, self.run_expiry_checks, self.run_culling_checks,
                self.reconcile, *beat, *resources]

    async def start(self, bus: Bus) -> None:
        """The queue configuration in force (replayed, then followed live); the bucket of fates; the op stream,
        replayed into the table of attempts, then followed live (not in null mode)."""
        await bus.replay(subjects.CONFIG_STREAM, subjects.CONFIG_QUEUES, self.queues.on_message)
        self.fates = Fates(await bus.ensure_cache_bucket(subjects.ATTEMPT_FATE_BUCKET,
                                                         max_age_s=self.settings.attempt_fate_max_age_s))
        if self.kube is not None:
            await bus.replay(subjects.OPS_STREAM, folded_subjects(self.settings.agent), self.fold)  # what it folds
            self.log.info("attempts_rebuilt", ops=len(self.attempts.latest))
        if self.logs is not None:
            await bus.serve_stream(subjects.QUERY_LOGS, self.logs.answer, group=self.name)

    async def _known(self, op_id: str) -> bool:
        """Whether the op stream holds an event of ``op_id`` (an op this dispatcher folded no attempt of)."""
        assert self.bus is not None
        return await self.bus.last_stored(subjects.OPS_STREAM, subjects.events_for(op_id)) > 0

    async def fold(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_ops_stream(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # bad messages are dead-lettered where they are consumed
        if subjects.valid_token(event.op_id):  # an op id that is no name is refused where it is consumed
            self.attempts.apply(event)

    @ops.handles(OperationAdmitted)
    async def on_admitted(self, event: OperationAdmitted, ctx: Context) -> Event | None:
        if not self.attempts.wanted((event.op_id, event.attempt)):
            ctx.log.info("admitted_not_dispatched", attempt=event.attempt, why="stopped, preempted or ended since")
            return None  # a stop or preemption handled while this waited for redelivery wins
        refusal = await self.queues.refusal(event, self.bus, ctx.clock.now())
        if refusal is not None:
            raise refusal  # bad input: the op rejected, the message dead-lettered; nothing created
        return await self._dispatch(event, ctx)

    async def _dispatch(self, event: OperationAdmitted, ctx: Context) -> Event | None:
        """Create the attempt's pods, then read its fate: released by a stop or preemption (here or on another
        replica, before the creates or while they ran), release them again and report nothing."""
        assert self.fates is not None
        result = await dispatch(event, ctx, self.kube, self.releaser)
        if not await self.fates.released(event.op_id, event.attempt):
            return result
        ctx.log.info("admitted_not_dispatched", attempt=event.attempt, why="released by a stop or preemption")
        if self.releaser is not None:  # pods a try before this one created (the API failing half-way)
            names = await self.releaser.attempt_pods(event.namespace, event.op_id, event.attempt, event.pod_name)
            await self.releaser.release(event.namespace, names, {ANNOTATION_EVICTED: UNWANTED},
                                        self.settings.stop_grace_s)
        return None

    @ops.handles(PreemptRequested)
    async def on_preempt(self, event: PreemptRequested, ctx: Context) -> Event | None:
        await self._release_fate(event, ctx)  # first: an admitted handled from now on creates nothing
        watcher = next((w for w in self.watchers if w.follows(event.namespace)), None)
        if self.releaser is None or watcher is None:  # null mode, or not its namespace: no pods to wait for
            return OperationPreempted(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                                      preemptor=event.preemptor, reason=event.reason, message=event.message)
        watcher.expect_preemption(event)  # before the deletes: a re-list that finds no pod reports it
        preempted = await self.releaser.preempt(event, ctx.clock.now())
        if preempted is not None:
            watcher.preemption_reported((event.op_id, event.attempt))
        return preempted

    @ops.handles(StopRequested)
    async def on_stop(self, event: StopRequested, ctx: Context) -> Event:
        await self._release_fate(event, ctx)  # first: an admitted handled from now on creates nothing
        if self.releaser is not None:
            return await self.releaser.stop(event, ctx.clock.now())
        return OperationStopped(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt, reason=event.reason)

    async def _release_fate(self, event: StopRequested | PreemptRequested, ctx: Context) -> None:
        assert self.fates is not None
        await self.fates.release(event.op_id, event.attempt, ctx.clock.now(), codec.type_of(event))

    # ---- the background tasks (not in null mode) ----
    async def heartbeat(self, bus: Bus, stop: asyncio.Event) -> None:
        """A named agent's dispatcher says it is alive, every ``agent_heartbeat_s`` (``AgentHeartbeat``)."""
        agent = self.settings.agent
        while not stop.is_set():
            now = self.clock.now()
            try:
                await bus.publish(AgentHeartbeat(agent=agent, at=now), subject=subjects.agent_heartbeat(agent),
                                  msg_id=f"agent.{agent}.{now.timestamp():.3f}")
            except Exception as exc:  # noqa: BLE001 - NATS away: the next beat tries again (admission waits)
                self.log.warning("heartbeat_failed", error=repr(exc))
            try:
                await asyncio.wait_for(stop.wait(), timeout=self.settings.agent_heartbeat_s)
            except asyncio.TimeoutError:
                pass

    async def watch_pods(self, bus: Bus, stop: asyncio.Event) -> None:
        for watcher in self.watchers:
            await watcher.seed(bus)  # the preemptions asked for and not yet reported
            watcher.start()
        await stop.wait()
        for watcher in self.watchers:
            watcher.stop()

    async def watch_nodes(self, bus: Bus, stop: asyncio.Event) -> None:
        assert self.kube is not None
        watcher = self.node_watcher = NodeWatcher(self.kube.core, bus.publish, self.clock, self.log,
                                                  self.settings.agent)
        await watcher.seed(bus)  # node facts for admission's flavors
        watcher.start()
        await stop.wait()
        watcher.stop()

    async def watch_queue_resources(self, bus: Bus, stop: asyncio.Event) -> None:
        assert self.queue_resources is not None
        await self.queue_resources.run(bus, stop)

    def liveness(self) -> dict[str, str]:
        """Stuck handler loops and the watch threads dead or stuck, by name (/healthz answers 503 then:
        Kubernetes restarts us)."""
        watches = (*self.watchers, self.node_watcher)
        resources = self.queue_resources.liveness() if self.queue_resources is not None else {}
        return super().liveness() | resources | {
            w.name: why for w in watches if w is not None and (why := w.liveness()) is not None}

    def metric_families(self) -> list:
        """Its pod creates' latency and errors (``services.dispatcher.metrics``); none in null mode."""
        return self.kube.measures.families() if self.kube is not None else []

    async def run_gang_checks(self, bus: Bus, stop: asyncio.Event) -> None:
        assert self.releaser is not None
        await check_gangs(self._gangs, self.releaser, bus.publish, self.clock, stop, self._start_main)

    async def _start_main(self, views: list[PodView]) -> None:
        """Create the main pod of a live attempt whose main pod waits for its other pods (they all run now:
        ``gang.main_due``), unless a stop or preemption released it; a refusal fails the attempt."""
        assert self.kube is not None and self.releaser is not None and self.fates is not None
        op_id, number = views[0].key
        attempt = self.attempts.get(op_id)
        if attempt is None or attempt.attempt != number or not attempt.stage.live or attempt.admitted is None:
            return
        if not main_waits(attempt.admitted.spec) or await self.fates.released(op_id, number):
            return
        ctx = Context(self.name, self.clock, self.settings, self.log.bind(op_id=op_id))
        refusal = await start_main(self.kube, self.releaser, attempt.admitted, ctx)
        if refusal is not None:
            await self._publish(OperationFailed(op_id=op_id, at=self.clock.now(), attempt=number,
                                                pod_name=attempt.admitted.pod_name, reason=refusal.reason,
                                                message=refusal.message))

    def _gangs(self) -> list[list[PodView]]:
        return [gang for watcher in self.watchers for gang in watcher.gangs()]

    async def run_expiry_checks(self, bus: Bus, stop: asyncio.Event) -> None:
        assert self.kube is not None and self.releaser is not None
        await check_expiry(self._pod_objects, self.releaser, bus.publish, self.clock, stop, self.log)

    async def run_culling_checks(self, bus: Bus, stop: asyncio.Event) -> None:
        assert self.releaser is not None
        await check_culling(self.attempts.snapshot, self.releaser, bus.publish, self.clock, stop, self.log)

    async def reconcile(self, bus: Bus, stop: asyncio.Event) -> None:
        assert self.kube is not None and self.releaser is not None
        reconciler = Reconciler(self.attempts, self._list_pods, self._redispatch, self.releaser.free, bus.publish,
                                self.clock, self.settings, self.log)
        await reconciler.run(stop)

    async def _list_pods(self) -> list[PodView]:
        return [view for view in map(view_of, await self._pod_objects()) if view is not None]

    async def _pod_objects(self) -> list[Pod]:
        """opsched's pods as the API server holds them: the pod watchers' while every one is synced, else a list."""
        assert self.kube is not None
        held = [watcher.pod_objects() for watcher in self.watchers]
        if self.watchers and all(pods is not None for pods in held):
            return [pod for pods in held for pod in pods or ()]
        return await self.kube.list_pods(SELECTOR, timeout_s=LIST_TIMEOUT_S)

    async def _redispatch(self, attempt: Attempt) -> Event | None:
        assert attempt.admitted is not None
        ctx = Context(self.name, self.clock, self.settings, self.log.bind(op_id=attempt.op_id))
        refusal = await self.queues.refusal(attempt.admitted, self.bus, self.clock.now())
        if refusal is not None:  # its admitted handler refuses it (and ends the op)
            ctx.log.warning("not_redispatched", attempt=attempt.attempt, why=refusal.message)
            return None
        return await self._dispatch(attempt.admitted, ctx)

    async def _publish(self, event: Event, headers: dict[str, str] | None = None) -> None:
        assert self.bus is not None
        await self.bus.publish(event, headers=headers)


def _connections(settings: Settings) -> int:
    """One per call in flight, and one per watch (a pod watch per queue namespace, the node watch, one per kind of
    queue resource): fewer,
    and every call beyond them opens a new TLS connection and drops it after."""
    resources = len(KINDS) if settings.queue_resources == "watch" and not settings.agent else 0
    return settings.kube_concurrency + len(settings.queue_namespaces() or (None,)) + 1 + resources


def build(settings: Settings, clock: Clock | None = None) -> Dispatcher:
    return Dispatcher(settings, clock)
