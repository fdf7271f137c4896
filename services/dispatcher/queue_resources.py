"""The queue configuration from the cluster's queue resources (``rules.queue_resources``: OpsQueue, OpsCohort,
OpsFlavor, OpsPriorityClass, OpsAgent, OpsBudget and the OpsConfig ``opsched``, group ``opsched.io``).

The default agent's dispatcher (the only service that talks to Kubernetes) watches each kind (a list+watch thread
each, ``KindWatch``). Once every kind is listed (or its CRD is not installed: then it looks again every
``ABSENT_RETRY_S``), each change is reconciled (``QueueResources.reconcile``):

- no resource at all: nothing is sent — the file and `opsched queues --apply` configure the queues; if the
  configuration in force was the resources' (they were all deleted), it is handed back (``SetQueues.handback``);
- resources that make a valid configuration: it is sent as `opsched queues --apply` sends one (``SetQueues``, from
  the dispatcher's user: admission marks it ``resources#<sha>`` and refuses other users' while it is in force), unless
  it is in force already; its request id is the content's digest and the config stream's position, so replicas that
  see the same send it once and a configuration that comes back (A, B, A) is sent again;
- an invalid one: nothing is sent, the last valid configuration stays in force.

Each resource's status says so (merge patches of its status subresource, only when they change): the condition
``Applied`` (True once the configuration in force holds its generation; False with reason ``Invalid`` and the
problems by their path under ``spec``, ``Blocked`` when another resource is invalid, ``Pending`` until admission
puts it in force, ``Ignored`` for an OpsConfig not named ``opsched``), ``observedGeneration``, and for an OpsQueue
its pending and admitted ops, stop policy and quota usage, asked of admission (``QUERY_QUEUES``) every
``queue_status_interval_s``."""
from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from kubernetes.client import CustomObjectsApi
from kubernetes.client.rest import ApiException

from opsched.bus.addressing import config_digest
from opsched.bus.bus import Bus
from opsched.proto import subjects
from opsched.proto.config import SetQueues, from_resources, resources_source
from opsched.proto.queries import QueuesAnswer, QueuesRequest, QueueStatus
from opsched.rules.queue_resources import (
    APPLIED,
    BY_KIND,
    GROUP,
    KINDS,
    SETTINGS_NAME,
    VERSION,
    Assembly,
    Kind,
    Resource,
    assemble,
)
from opsched.services.dispatcher.admitted_checks import QueuesInForce
from opsched.services.dispatcher.k8s import Kube
from opsched.services.dispatcher.kobjects import CUSTOM_OBJECTS, CustomObject
from opsched.services.dispatcher.listwatch import ListWatch
from opsched.services.runtime.clock import Clock

ABSENT_RETRY_S = 30.0  # a kind whose CRD is not installed is looked for again this often
MADE_KEPT = 8  # configurations whose resources' generations are remembered (the one in force is one of the last)
SETTLE_S = 0.2  # changes that come together (kubectl apply -f of many resources) are reconciled once
FORBIDDEN = "get, list and watch of the opsched.io resources: the ClusterRole opsched-dispatcher-queues (deploy/base/20-rbac.yaml)"


class KindWatch(ListWatch):
    """The resources of one kind, as the API server holds them (list+watch on a thread)."""

    decoders = CUSTOM_OBJECTS
    forbidden = FORBIDDEN

    def __init__(self, api: CustomObjectsApi, kind: Kind, changed: Callable[[], None], log: Any, clock: Clock) -> None:
        super().__init__(log, clock)
        self.api, self.kind, self._changed = api, kind, changed
        self.name = f"{kind.plural}_watch"
        self.absent = False  # its CRD is not installed (the API server answers 404)
        self._objects: dict[str, CustomObject] = {}
        self._lock = threading.Lock()

    def list_call(self) -> Callable[..., Any]:
        return functools.partial(self.api.list_cluster_custom_object, GROUP, VERSION, self.kind.plural)

    def observe(self, kind: str, obj: CustomObject) -> None:
        with self._lock:
            if kind == "DELETED":
                self._objects.pop(obj.metadata.name, None)
            else:
                self._objects[obj.metadata.name] = obj
        self._notify()

    def listed(self, items: list[Any], resource_version: str) -> None:
        with self._lock:
            self._objects = {obj.metadata.name: obj for obj in items}
            self.absent = False
        self._notify()

    def failed(self, exc: ApiException) -> float:
        if exc.status != 404:
            return super().failed(exc)
        if not self.absent:
            self.log.info("queue_resources_not_installed", crd=f"{self.kind.plural}.{GROUP}", retry_s=ABSENT_RETRY_S)
        with self._lock:
            self.absent, self._objects = True, {}
        self._notify()
        return ABSENT_RETRY_S

    @property
    def known(self) -> bool:
        """Whether what it holds is the API server's (listed and watching, or the kind is not installed)."""
        return self.synced or self.absent

    def objects(self) -> list[CustomObject]:
        with self._lock:
            return list(self._objects.values())

    def _notify(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._changed)


class QueueResources:
    """Sends the configuration the resources make, and writes their statuses."""

    def __init__(self, kube: Kube, queues: QueuesInForce, clock: Clock, log: Any, status_interval_s: float) -> None:
        self.kube, self.queues, self.clock, self.log = kube, queues, clock, log
        self.status_interval_s = status_interval_s
        self.api = CustomObjectsApi(kube.api_client)
        self.watches = [KindWatch(self.api, kind, self.poke, log, clock) for kind in KINDS]
        self._poked = asyncio.Event()
        self.counts: dict[str, QueueStatus] = {}  # admission's, per queue: what an OpsQueue's status shows
        self._sent = ""  # the request id last sent (sent again only by its Nats-Msg-Id's grace: once)
        # the generation of each resource that made each configuration sent lately, by its source (resources#<sha>)
        self.made: dict[str, dict[tuple[str, str], int]] = {}

    def poke(self) -> None:
        self._poked.set()

    def liveness(self) -> dict[str, str]:
        return {w.name: why for w in self.watches if (why := w.liveness()) is not None}

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        self.queues.listeners.append(self.poke)  # the configuration in force moved: statuses may follow
        for watch in self.watches:
            watch.start()
        loop = asyncio.get_running_loop()
        next_counts = loop.time()
        try:
            while not stop.is_set():
                timeout = max(0.0, next_counts - loop.time())
                waiter = asyncio.ensure_future(self._poked.wait())
                stopper = asyncio.ensure_future(stop.wait())
                await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                stopper.cancel()
                if stop.is_set():
                    break
                if self._poked.is_set():
                    await asyncio.sleep(SETTLE_S)  # the rest of a kubectl apply of many resources
                    self._poked.clear()
                if loop.time() >= next_counts:
                    next_counts = loop.time() + self.status_interval_s
                    await self._ask_counts(bus)
                if all(w.known for w in self.watches):
                    try:
                        await self.reconcile(bus)
                    except Exception as exc:  # noqa: BLE001 - the API server or NATS away: the next change retries
                        self.log.warning("queue_resources_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self.queues.listeners.remove(self.poke)
            for watch in self.watches:
                watch.stop()

    def _resources(self) -> tuple[list[Resource], dict[tuple[str, str], CustomObject]]:
        objects = {(w.kind.kind, obj.metadata.name): obj for w in self.watches for obj in w.objects()}
        resources = [Resource(kind, name, obj.spec or {}, obj.metadata.generation or 0)
                     for (kind, name), obj in objects.items()]
        return resources, objects

    async def reconcile(self, bus: Bus) -> None:
        resources, objects = self._resources()
        if not resources:
            if from_resources(self.queues.source) and self.queues.config is not None:
                await self._send(bus, SetQueues(config=self.queues.config, requested_by="dispatcher", handback=True,
                                                request_id=f"handback-{self.queues.seq}"))
            return
        assembly = assemble(resources)
        digest = config_digest(assembly.config) if assembly.config is not None else ""
        in_force = assembly.config is not None and self.queues.source == resources_source(digest)
        if assembly.config is not None:  # which generations make it: what is in force once it is
            self.made[resources_source(digest)] = {r.key: r.generation for r in resources}
            while len(self.made) > MADE_KEPT:
                self.made.pop(next(iter(self.made)))
        held = self.made.get(self.queues.source, {})  # the generations of the configuration in force
        if assembly.config is not None and not in_force:
            await self._send(bus, SetQueues(config=assembly.config, requested_by="dispatcher",
                                            request_id=f"{digest}-{self.queues.seq}"))
        for key, obj in sorted(objects.items()):
            counts = self.counts.get(key[1]) if key[0] == "OpsQueue" else None
            status = status_of(key, obj, assembly, in_force, self.queues.source, counts, held.get(key))
            if _differs(status, obj.status or {}):
                await self._patch(key, obj, _stamped(status, obj.status or {}, self.clock.now()))

    async def _send(self, bus: Bus, cmd: SetQueues) -> None:
        if cmd.request_id == self._sent:
            return
        await bus.publish(cmd)  # its msg id is its request id: replicas that see the same send it once
        self._sent = cmd.request_id
        self.log.info("queue_resources_sent", request_id=cmd.request_id, handback=cmd.handback,
                      queues=[q.name for q in cmd.config.queues])

    async def _patch(self, key: tuple[str, str], obj: CustomObject, status: dict[str, Any]) -> None:
        plural = BY_KIND[key[0]].plural
        body = {"status": status}
        try:
            await self.kube.call(self.api.patch_cluster_custom_object_status, GROUP, VERSION, plural, key[1], body,
                                 _content_type="application/merge-patch+json")
        except ApiException as exc:
            if exc.status != 404:  # deleted meanwhile: nothing to say
                self.log.warning("queue_resource_status_failed", kind=key[0], name=key[1], status=exc.status,
                                 error=str(exc.reason), **({"fix": FORBIDDEN} if exc.status == 403 else {}))

    async def _ask_counts(self, bus: Bus) -> None:
        """Admission's counts per queue (pending, admitted, usage), for the OpsQueues' statuses."""
        if not any(w.kind.kind == "OpsQueue" and w.objects() for w in self.watches):
            return
        try:
            data = await bus.request(subjects.QUERY_QUEUES, QueuesRequest(), timeout=5.0)
            answer = msgspec.json.decode(data, type=QueuesAnswer)
        except Exception as exc:  # noqa: BLE001 - admission away: the statuses keep their last counts
            self.log.info("queue_counts_unavailable", error=f"{type(exc).__name__}: {exc}")
            return
        self.counts = {q.name: q for q in answer.queues}


def status_of(key: tuple[str, str], obj: CustomObject, assembly: Assembly, in_force: bool, source: str,
              counts: QueueStatus | None, applied: int | None = None) -> dict[str, Any]:
    """What a resource's status should say (its condition without a transition time: ``_stamped`` adds it).
    ``applied``: the generation of it that the configuration in force was made of, as this dispatcher assembled it
    (None: not assembled since it started; its status then says)."""
    generation = obj.metadata.generation or 0
    current = _condition(obj.status or {})
    if key in assembly.ignored:
        condition = _cond("False", "Ignored", f"only the OpsConfig named {SETTINGS_NAME!r} is read")
    elif key in assembly.problems:
        condition = _cond("False", "Invalid", "; ".join(assembly.problems[key])
                          + " (the last valid queue configuration stays in force)")
    elif assembly.config is None:
        if applied == generation:  # unchanged, and still in force: the configuration did not move
            condition = _cond("True", "Applied", f"in force ({source})")
        elif current.get("status") == "True" and current.get("observedGeneration") == generation:
            condition = current  # so its status says (written before a restart of this dispatcher)
        else:
            culprits = [f"{kind}/{name}" for kind, name in sorted(assembly.problems)] or assembly.general
            condition = _cond("False", "Blocked", "not applied: the queue configuration the resources make is "
                              f"invalid ({', '.join(culprits)})")
    elif in_force:
        condition = _cond("True", "Applied", f"in force ({source})")
    else:
        condition = _cond("False", "Pending", "sent to admission; not in force yet")
    condition = {k: v for k, v in condition.items() if k != "lastTransitionTime"} | {"observedGeneration": generation}
    status: dict[str, Any] = {"observedGeneration": generation, "conditions": [condition]}
    if counts is not None:
        status |= {"pending": counts.pending, "admitted": counts.running, "stopPolicy": counts.stop_policy,
                   "usage": [{"resource": u.resource, "flavor": u.flavor, "used": u.used, "nominal": u.nominal,
                              "borrowed": u.borrowed} for u in counts.usage]}
    return status


def _cond(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": APPLIED, "status": status, "reason": reason, "message": message}


def _condition(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == APPLIED), {})


def _differs(wanted: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether the status must be written: what it says, times aside (each condition's transition time)."""
    def bare(status: dict[str, Any]) -> dict[str, Any]:
        conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []]
        return {k: v for k, v in status.items() if k != "conditions"} | {"conditions": conditions}
    return bare(wanted) != bare(current)


def _stamped(status: dict[str, Any], current: dict[str, Any], now: datetime) -> dict[str, Any]:
    """``status`` with its condition's transition time: the current one while its status stays, else now."""
    before = _condition(current)
    conditions = []
    for condition in status["conditions"]:
        same = before.get("status") == condition["status"] and before.get("lastTransitionTime")
        stamp = before["lastTransitionTime"] if same else now.strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions.append(condition | {"lastTransitionTime": stamp})
    return status | {"conditions": conditions}
