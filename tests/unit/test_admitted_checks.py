"""The dispatcher checks what it is told (issue 28): an ``admitted`` is judged against the queue configuration
the dispatcher folded itself, with the rule admission admits with (``rules.pod_security.run_policy``). An op
asking for another queue's namespace, a level or secret volumes its queue does not have, an unknown queue, a pod
not named for the attempt, or an op id that is no name is refused as bad input (the op rejected
``forbidden_pod_spec``, no pod). Before any configuration is seen, the built-in default is in force (as in
admission): queue ``default`` at ``baseline`` in the default namespace."""
from __future__ import annotations

import asyncio

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.proto import codec, subjects
from opsched.proto.config import QueuesConfigured
from opsched.proto.events import OperationAdmitted, OperationRejected
from opsched.rules.queues_file import parse_queues
from opsched.services.admission import cycle
from opsched.services.admission.model.queues import compile_book
from opsched.services.dispatcher.admitted_checks import QueuesInForce
from opsched.services.dispatcher.service import Dispatcher
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, case, case_name, fold, op, queued
from tests.builders.clock import FakeClock

QUEUES = """
queues:
  - name: default
  - name: ml
    namespace: ml
    podSecurity: restricted
  - name: infra
    podSecurity: privileged
    allowSecretVolumes: true
  - name: train
    serviceAccounts: [trainer]
    allowServiceAccountToken: true
    priorityClassNames: [high]
    allowVolumes: [persistentVolumeClaim]
    imagePullSecrets: [regcred]
"""
TRAIN = dict(service_accounts=["trainer"], allow_service_account_token=True, priority_class_names=["high"],
             allow_volumes=["persistentVolumeClaim"], image_pull_secrets=["regcred"])


def configured(text: str = QUEUES, source: str = "test") -> bytes:
    return codec.encode(QueuesConfigured(config=parse_queues(text), at=T0, source=source))


async def in_force(text: str | None = QUEUES) -> QueuesInForce:
    queues = QueuesInForce("opsched", oplog.get("test"))
    if text is not None:
        await queues.on_message(configured(text), 1)
    return queues


def event(queue: str = "default", op_id: str = "a", **fields):
    built = admitted(op("x").build(), op_id=op_id or "a", queue=queue)
    return msgspec.structs.replace(built, op_id=op_id, **fields)  # "" as written


@pytest.mark.parametrize("c", [
    case("an op of the default queue in the default namespace at baseline is allowed", event=event(), refused=[]),
    case("an op of a queue with its own namespace and level is allowed there",
         event=event("ml", namespace="ml", pod_security="restricted"), refused=[]),
    case("a privileged queue's op with secret volumes is allowed",
         event=event("infra", pod_security="privileged", allow_secret_volumes=True), refused=[]),
    case("a privileged level its queue does not have is refused", event=event(pod_security="privileged"),
         refused=["pod security level 'privileged' is not queue default's ('baseline')"]),
    case("a level less restrictive than its queue's is refused", event=event("ml", namespace="ml"),
         refused=["pod security level 'baseline' is not queue ml's ('restricted')"]),
    case("another namespace is refused", event=event(namespace="default"),
         refused=["namespace 'default' is not queue default's ('opsched')"]),
    case("the default namespace for a queue with its own is refused", event=event("ml", pod_security="restricted"),
         refused=["namespace 'opsched' is not queue ml's ('ml')"]),
    case("a system namespace is refused", event=event(namespace="kube-system", pod_security="privileged"),
         refused=["namespace 'kube-system' is not queue default's ('opsched')",
                  "pod security level 'privileged' is not queue default's ('baseline')"]),
    case("secret volumes its queue does not allow are refused", event=event(allow_secret_volumes=True),
         refused=["allowSecretVolumes true is not queue default's (false)"]),
    case("an op carrying its queue's allow-lists is allowed", event=event("train", **TRAIN), refused=[]),
    case("a service account its queue does not list is refused", event=event(service_accounts=["admin"]),
         refused=['serviceAccounts ["admin"] is not queue default\'s ([])']),
    case("a token its queue does not allow is refused", event=event(allow_service_account_token=True),
         refused=["allowServiceAccountToken true is not queue default's (false)"]),
    case("allow-lists other than its queue's are refused",
         event=event("train", **{**TRAIN, "priority_class_names": ["high", "urgent"], "allow_volumes": ["nfs"],
                                 "image_pull_secrets": []}),
         refused=['priorityClassNames ["high", "urgent"] is not queue train\'s (["high"])',
                  'allowVolumes ["nfs"] is not queue train\'s (["persistentVolumeClaim"])',
                  'imagePullSecrets [] is not queue train\'s (["regcred"])']),
    case("an unknown queue is refused", event=event("nope"),
         refused=["queue 'nope' is not in the queue configuration in force (test)"]),
    case("a main pod not named for the attempt is refused", event=event(pod_name="kube-apiserver"),
         refused=["pod name 'kube-apiserver' is not the attempt's ('op-a-0')"]),
], ids=case_name)
async def test_an_admitted_is_checked_against_its_queue_in_the_configuration_in_force(c):
    queues = await in_force()
    assert queues.problems(c.event) == c.refused
    refusal = await queues.refusal(c.event, None, T0)
    if not c.refused:
        assert refusal is None
        return
    assert refusal is not None and refusal.reason == "forbidden_pod_spec" and refusal.op_id == c.event.op_id
    [rejected] = refusal.events
    assert isinstance(rejected, OperationRejected) and rejected.reason == "forbidden_pod_spec"
    assert (rejected.op_id, rejected.attempt) == (c.event.op_id, c.event.attempt)
    assert rejected.message == "admitted with what its queue does not allow: " + "; ".join(c.refused)


@pytest.mark.parametrize("op_id", ["../../etc", "A", "a.b", "a b", "-a", "x" * 64, ""])
async def test_an_op_id_that_is_no_name_is_refused_about_no_op_and_with_no_event_on_its_subjects(op_id):
    refusal = await (await in_force()).refusal(event(op_id=op_id), None, T0)
    assert refusal is not None and refusal.reason == "invalid_op_id"
    assert refusal.op_id == "-" and refusal.events == []  # ops.<type>.<id> would not be a subject
    assert "is not a valid name" in refusal.message


async def test_before_any_queue_configuration_the_built_in_default_is_in_force():
    queues = await in_force(None)
    assert queues.problems(event()) == []
    assert queues.problems(event(pod_security="privileged")) == [
        "pod security level 'privileged' is not queue default's ('baseline')"]
    assert queues.problems(event("infra", pod_security="privileged", allow_secret_volumes=True)) == [
        "queue 'infra' is not in the queue configuration in force (the built-in default)"]


async def test_on_the_built_in_default_an_admitted_is_allowed_only_once_the_stream_holds_no_other():
    queues = await in_force(None)
    bus = LaggingBus(queues, configured("queues:\n  - name: default\n    podSecurity: restricted\n", "file"), 3)
    refusal = await queues.refusal(event(), bus, T0)  # type: ignore[arg-type]
    assert refusal is not None and "pod security level 'baseline' is not queue default's ('restricted')" in \
        refusal.message


async def test_a_later_configuration_is_in_force_once_folded():
    queues = await in_force()
    await queues.on_message(configured("queues:\n  - name: default\n    podSecurity: privileged\n", "later"), 2)
    assert queues.problems(event(pod_security="privileged")) == []
    assert queues.problems(event("ml", namespace="ml", pod_security="restricted")) == [
        "queue 'ml' is not in the queue configuration in force (later)"]


class LaggingBus:
    """A bus whose config stream holds a message the follow has not delivered yet."""

    def __init__(self, queues: QueuesInForce, late: bytes, seq: int) -> None:
        self.queues, self.late, self.seq, self.asked = queues, late, seq, []

    async def last_stored(self, stream: str, subject: str) -> int:
        self.asked.append((stream, subject))
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.queues.on_message(self.late, self.seq)))
        return self.seq


async def test_before_refusing_the_dispatcher_folds_every_configuration_already_stored():
    queues = await in_force()
    bus = LaggingBus(queues, configured(QUEUES + "  - name: new\n", "with-new"), 5)
    assert await queues.refusal(event("new"), bus, T0) is None  # type: ignore[arg-type]
    assert bus.asked == [(subjects.CONFIG_STREAM, subjects.CONFIG_QUEUES)] and queues.seq == 5


async def test_the_dispatcher_s_handler_raises_the_refusal_as_bad_input():
    dispatcher = Dispatcher(Settings(dispatcher_mode="null"))
    await dispatcher.queues.on_message(configured(), 1)
    ctx = Context("dispatcher", FakeClock(T0), dispatcher.settings, oplog.get("dispatcher"))
    with pytest.raises(InvalidInput) as raised:
        await dispatcher.on_admitted(event(namespace="default", pod_security="privileged"), ctx)
    assert raised.value.reason == "forbidden_pod_spec" and isinstance(raised.value.events[0], OperationRejected)
    with pytest.raises(InvalidInput) as raised:
        await dispatcher.on_admitted(event(op_id="../../etc"), ctx)
    assert (raised.value.reason, raised.value.op_id, raised.value.events) == ("invalid_op_id", "-", [])


async def test_what_admission_admits_passes_the_dispatcher_s_checks():
    queues = await in_force()
    state = fold(*(queued(op(name).build(), op_id=name, queue=name) for name in ("default", "ml", "infra")))
    decided = [e for e in cycle.decide(state, compile_book(parse_queues(QUEUES)), T0, "opsched")
               if isinstance(e, OperationAdmitted)]
    assert sorted(e.op_id for e in decided) == ["default", "infra", "ml"]
    assert {e.op_id: queues.problems(e) for e in decided} == {"default": [], "infra": [], "ml": []}


async def test_the_reconciler_never_redispatches_what_the_handler_refuses():
    from opsched.services.dispatcher.attempts import Attempt, Stage

    dispatcher = Dispatcher(Settings(dispatcher_mode="null"))
    await dispatcher.queues.on_message(configured(), 1)
    forged = event(namespace="kube-system", pod_security="privileged")
    assert await dispatcher._redispatch(Attempt(forged.op_id, 0, Stage.ADMITTED, forged)) is None
