"""Hostile submits from issue 14, published raw on the bus (past the SDK's own check): each is refused by the
contract on decode, with an error event naming the field, a dead letter and the op rejected with the reason;
admission keeps serving. And the CLI refuses such a file before publishing anything (exit 2, the field named)."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from opsched.proto import codec, subjects
from opsched.proto.commands import SubmitOperation
from opsched.proto.events import ErrorRaised, OperationAdmitted, OperationRejected, OperationSubmitted
from tests.builders import op

GPU = "nvidia.com/gpu"


def _gpus(value):
    return lambda d: d["spec"]["container"]["resources"].__setitem__("limits", {GPU: value})


def _worker(count):
    return lambda d: d["spec"].__setitem__("replicas", [{"name": "worker", "count": count,
                                                         "container": {"image": "w"}}])


HOSTILE = {  # op id -> (mutation of a valid submit, what the refusal names)
    "replicas-3m": (_worker(3_000_000), "replicas[0].count: 3000000 is above the limit of 1000"),
    "gpu-minus-one": (_gpus("-1"), "limits['nvidia.com/gpu']: '-1' is negative"),
    "gpu-two": (_gpus("two"), "limits['nvidia.com/gpu']: 'two' is not a Kubernetes quantity"),
    "gpu-1e999999999": (_gpus("1e999999999"), "limits['nvidia.com/gpu']: '1e999999999' is above the limit"),
    "gpu-1e400": (_gpus("1e400"), "limits['nvidia.com/gpu']: '1e400' is above the limit"),
    "gpu-half": (_gpus("0.5"), "limits['nvidia.com/gpu']: '0.5' is not a whole number of devices"),
    "cpu-minus-five": (lambda d: d["spec"]["container"]["resources"].__setitem__("limits", {"cpu": "-5"}),
                       "limits['cpu']: '-5' is negative"),
    "replicas-negative": (_worker(-3), "replicas[0].count: -3 is below 1"),
    "label-invalid": (lambda d: d["spec"].setdefault("environment", {}).__setitem__("labels", {"team": "a b!"}),
                      "environment.labels['team']: value 'a b!'"),
    "name-invalid": (lambda d: d["spec"].__setitem__("name", "train me/now"), "name: 'train me/now'"),
}


def _payload(op_id: str, mutate) -> bytes:
    data = json.loads(codec.encode(SubmitOperation(op_id=op_id, spec=op("hostile").gpus(1).build())))
    mutate(data)
    return json.dumps(data).encode()


async def _dead_lettered(bus, count: int) -> dict[str, bytes]:
    """The dead letters of admission by the op id their payload names."""
    sub = await bus.durable(f"test-{uuid.uuid4().hex[:12]}", subjects.DLQ_STREAM, [subjects.dead_letter("admission")],
                            max_deliver=1)
    try:
        msgs = await sub.fetch(count, timeout=5)
    finally:
        await sub.unsubscribe()
    return {json.loads(m.data)["opId"]: m.data for m in msgs}


async def test_each_hostile_submit_is_refused_naming_the_field_and_its_op_ends_rejected(stack_factory, bus, client, events):
    await stack_factory(dispatcher_mode="null")
    payloads = {op_id: _payload(op_id, mutate) for op_id, (mutate, _) in HOSTILE.items()}
    for op_id, payload in payloads.items():
        await bus.publish_raw(subjects.submit(None), payload, {"Nats-Msg-Id": f"hostile-{op_id}"})
    after = await client.submit(op("after-hostile").build())
    for op_id, (_, says) in HOSTILE.items():
        error = await events.expect(ErrorRaised, op_id)
        assert error.service == "admission" and error.reason == "malformed_message" and says in error.message
        rejected = await events.expect(OperationRejected, op_id)
        assert rejected.reason == "invalid_spec" and says in rejected.message
        assert not events.of(op_id, OperationSubmitted)
    assert await _dead_lettered(bus, len(HOSTILE) + 1) == payloads
    await events.expect(OperationAdmitted, after)  # admission kept serving
    answer = await client.why("gpu-two")
    assert answer.found and answer.status == "rejected"


async def test_a_refused_submit_redelivered_or_repeated_for_a_known_op_rejects_nothing_twice(
        stack_factory, bus, client, events):
    await stack_factory(names=("admission",))
    known = await client.submit(op("known").build())
    await events.expect(OperationSubmitted, known)
    await bus.publish_raw(subjects.submit(None), _payload(known, _gpus("two")), {"Nats-Msg-Id": "hostile-known"})
    await events.expect(ErrorRaised, known)
    after = await client.submit(op("after").build())
    await events.expect(OperationSubmitted, after)
    assert not events.of(known, OperationRejected)  # its submit was judged: the malformed repeat changes nothing


@pytest.mark.parametrize("worker, field, says", [
    ("replicas: 3000000\n    container: {image: w}", "run.worker.replicas", "above the limit of 1000 pods per op"),
    ("container: {image: w, resources: {limits: {nvidia.com/gpu: '1e400'}}}", "run.worker.container.resources.limits.nvidia.com/gpu",
     "'1e400' is above the limit"),
], ids=["replicas", "gpus"])
def test_the_cli_refuses_a_hostile_file_before_publishing_naming_the_field(tmp_path: Path, worker, field, says):
    path = tmp_path / "hostile.yaml"
    path.write_text("version: 1.1\nkind: component\nname: hostile\nrun:\n  kind: pytorchjob\n  master:\n"
                    f"    container: {{image: python:3.11}}\n  worker:\n    {worker}\n")
    # no NATS at all: a file refused at the edge never reaches the bus
    cli = [sys.executable, "-m", "opsched.cli", "--nats", "nats://127.0.0.1:1", "submit", str(path)]
    result = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert field in result.stderr and says in result.stderr, result.stderr
