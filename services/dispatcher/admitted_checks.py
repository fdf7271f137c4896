"""What an ``admitted`` event may ask for (defense in depth): whoever can publish as admission must not get a
pod its queue does not allow. The dispatcher folds the queue configuration itself (``config.queues`` on the
config stream: replayed at start, then followed live) and, before it creates anything, refuses an admitted
attempt whose

- op id is not a valid name (``proto.subjects.valid_token``): refused before it reaches the Kubernetes API
  or a subject (its error event is about op ``-``);
- queue is not in the configuration in force (the latest on the stream; none there: the built-in default, one
  queue ``default`` at ``baseline`` in ``OPSCHED_NAMESPACE``, which is what admission then has in force too);
- namespace, pod security level or allowances (``allowSecretVolumes``, ``serviceAccounts``,
  ``allowServiceAccountToken``, ``priorityClassNames``, ``allowVolumes``, ``imagePullSecrets``: the dispatcher checks
  the pods against what the event carries) are not its queue's (``rules.pod_security.run_policy``, the rule
  admission admits with);
- connections (their declarations: repositories and the Secrets' names) or init image are not what its queue's
  configuration gives the op (``rules.connections.carried_problems``, the rule admission admits with);
- main pod is not named for the attempt (``rules.naming.pod_name``).

A refusal is bad input: the op is ``rejected`` (``forbidden_pod_spec``), the message is dead-lettered with an
``error`` event, and no pod is created. Before refusing, and before allowing on the built-in default, the
dispatcher makes sure it has folded every queue configuration stored when it looked (an admission may follow a
configuration change by milliseconds, and the follow may lag its start)."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from opsched.bus.bus import Bus
from opsched.bus.errors import DependencyUnavailable, InvalidInput
from opsched.proto import codec, subjects
from opsched.proto.config import QueuesConfigured
from opsched.proto.events import OperationAdmitted, OperationRejected
from opsched.proto.queues import QueuesConfig
from opsched.proto.reasons import Refusal
from opsched.rules import connections
from opsched.rules.naming import pod_name
from opsched.rules.pod_security import mismatches, policy_of, run_policy

REFUSED = Refusal.FORBIDDEN_POD_SPEC  # the op's rejection, as for a pod spec its queue forbids
INVALID_OP_ID = Refusal.INVALID_OP_ID
NO_OP = "-"  # the error event of an op id that is no name is about no op (``ErrorRaised``)
CATCH_UP_S = 10.0  # at most this long to fold the configurations stored before refusing on an older one
BUILT_IN = "the built-in default"  # the configuration in force while the stream holds none (admission's too)


class QueuesInForce:
    """The latest queue configuration of the config stream, as the dispatcher has folded it."""

    def __init__(self, default_namespace: str, log: Any) -> None:
        self.default_namespace = default_namespace
        self.log = log
        self.config: QueuesConfig | None = None  # None: none seen on the stream, the built-in default is in force
        self.source = BUILT_IN
        self.seq = 0  # the stream sequence of the last config.queues message folded
        self._moved = asyncio.Condition()
        self.listeners: list[Callable[[], None]] = []  # told of each configuration folded

    async def on_message(self, data: bytes, seq: int) -> None:
        try:
            message = codec.decode_config(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.log.error("bad_config_message", seq=seq, error=str(exc))
            message = None
        async with self._moved:
            if isinstance(message, QueuesConfigured):
                self.config, self.source = message.config, message.source
                self.log.info("queues_in_force", source=message.source, queues=[q.name for q in message.config.queues])
            self.seq = max(self.seq, seq)
            self._moved.notify_all()
        for listener in self.listeners:
            listener()

    def problems(self, event: OperationAdmitted) -> list[str]:
        """Every way ``event`` asks for more than its queue allows under the configuration folded so far."""
        config = self.config or QueuesConfig()
        allowed = run_policy(config, event.queue, self.default_namespace)
        if allowed is None:
            return [f"queue {event.queue!r} is not in the queue configuration in force ({self.source})"]
        namespace, policy = allowed
        out: list[str] = []
        if event.namespace != namespace:
            out.append(f"namespace {event.namespace!r} is not queue {event.queue}'s ({namespace!r})")
        out += mismatches(policy_of(event.queue, event), policy)
        out += connections.carried_problems(event.spec, event.queue, {"connections": event.connections,
                                                                      "init_image": event.init_image}, config)
        expected = pod_name(event.op_id, event.attempt)
        if event.pod_name != expected:
            out.append(f"pod name {event.pod_name!r} is not the attempt's ({expected!r})")
        return out

    async def refusal(self, event: OperationAdmitted, bus: Bus | None, now: datetime) -> InvalidInput | None:
        """Why ``event`` must create nothing, as the bad input it is (with the op's rejection); None: allowed."""
        if not subjects.valid_token(event.op_id):
            return InvalidInput(INVALID_OP_ID, f"admitted: op id {event.op_id[:80]!r} is not a valid name "
                                "(lowercase letters, digits and '-', at most 63)", op_id=NO_OP)
        problems = self.problems(event)
        if (problems or self.config is None) and bus is not None and await self.caught_up(bus):
            problems = self.problems(event)  # judged on every configuration stored when it looked
        if not problems:
            return None
        message = "admitted with what its queue does not allow: " + "; ".join(problems)
        rejected = OperationRejected(op_id=event.op_id, at=now, attempt=event.attempt, reason=REFUSED, message=message)
        return InvalidInput(REFUSED, message, op_id=event.op_id, events=[rejected])

    async def caught_up(self, bus: Bus) -> bool:
        """Wait until every config.queues message stored now is folded; True if that moved anything."""
        try:
            target = await bus.last_stored(subjects.CONFIG_STREAM, subjects.CONFIG_QUEUES)
        except Exception as exc:  # noqa: BLE001 - NATS away: the handler loop waits it out
            raise DependencyUnavailable("nats", f"cannot read the queue configuration's last sequence: {exc!r}") from exc
        before = self.seq
        try:
            async with self._moved:
                await asyncio.wait_for(self._moved.wait_for(lambda: self.seq >= target), CATCH_UP_S)
        except asyncio.TimeoutError:
            raise DependencyUnavailable("nats", f"the queue configuration's follow is at {self.seq}, the stream at "
                                                f"{target}") from None
        return self.seq != before
