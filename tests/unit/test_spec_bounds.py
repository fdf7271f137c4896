"""The contract refuses every out-of-bounds or invalid value of an op spec, on decode and on construction,
with a message naming the field and the bound (``proto.spec_checks``, the fields' ``msgspec.Meta``)."""
from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import msgspec
import pytest

from opsched.proto import codec
from opsched.proto.events import BudgetExceeded, CostEstimated, CostRecorded, Money
from opsched.proto.limits import MAX_ANNOTATIONS_BYTES, MAX_LABELS
from opsched.proto.resources import QuantityError, parse_quantity
from opsched.proto.spec import OpSpec
from tests.builders import case, case_name, op

GPU = "nvidia.com/gpu"
NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)


def doc() -> dict[str, Any]:
    """A valid spec, as JSON, with one replica group."""
    spec = op("train").gpus(1).cpu("2").memory("4Gi").label("team", "vision").build()
    data = json.loads(codec.encode(spec))
    data["replicas"] = [{"name": "worker", "count": 2, "container": {"image": "w", "resources": {"limits": {GPU: "1"}}}}]
    return data


def at(path: str, value: Any) -> Callable[[dict], None]:
    """A mutation setting ``path`` (dotted; an int is a list index) to ``value``."""
    def mutate(data: dict) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = data
        for key in keys[:-1]:
            target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
        target[keys[-1]] = value
    return mutate


def limit(resource: str, value: Any, where: str = "container") -> Callable[[dict], None]:
    def mutate(data: dict) -> None:
        container = data["container"] if where == "container" else data["replicas"][0]["container"]
        container.setdefault("resources", {}).setdefault("limits", {})[resource] = value
    return mutate


def decoded(mutate: Callable[[dict], None]) -> OpSpec:
    data = doc()
    mutate(data)
    return codec.decode_spec(json.dumps(data).encode().replace(b'"<1e400>"', b"1e400"))  # a number JSON can say


REFUSED = [
    # quantities: every container's limits and requests
    case("two GPUs spelled out", m=limit(GPU, "two"), says="container.resources.limits['nvidia.com/gpu']: 'two' is "
                                                          "not a Kubernetes quantity"),
    case("a negative GPU count", m=limit(GPU, "-1"), says="limits['nvidia.com/gpu']: '-1' is negative"),
    case("a GPU count past any decimal context", m=limit(GPU, "1e999999999"), says="above the limit"),
    case("1e400 GPUs (infinity as a float)", m=limit(GPU, "1e400"), says="above the limit"),
    case("half a GPU", m=limit(GPU, "0.5"), says="'0.5' is not a whole number of devices"),
    case("a GPU in milli units", m=limit(GPU, "500m"), says="not a whole number of devices"),
    case("more GPUs than any pod may have", m=limit(GPU, "2000"), says="above the limit of 1024 devices per pod"),
    case("a negative cpu", m=limit("cpu", "-5"), says="limits['cpu']: '-5' is negative"),
    case("infinite memory", m=limit("memory", "Infinity"), says="not a Kubernetes quantity"),
    case("memory past MAX_QUANTITY", m=limit("memory", "9Ei"), says="above the limit"),
    case("an underscore in a number", m=limit("cpu", "1_000"), says="not a Kubernetes quantity"),
    case("a request that is not a quantity", m=at("container.resources.requests", {"cpu": "lots"}),
         says="container.resources.requests['cpu']"),
    case("a replica's GPUs", m=limit(GPU, "-1", where="replica"),
         says="replicas[0].container.resources.limits['nvidia.com/gpu']"),
    case("shared GPU memory not in whole GiB", m=limit("aliyun.com/gpu-mem", "512Mi"), says="whole number of GiB"),
    case("a resource name that is not one", m=limit("nvidia com/gpu!", "1"), says="not a resource name"),
    # replicas
    case("3,000,000 replicas", m=at("replicas.0.count", 3_000_000),
         says="replicas[0].count: 3000000 is above the limit of 1000 pods per op"),
    case("a negative replica count", m=at("replicas.0.count", -2), says="replicas[0].count: -2 is below 1"),
    case("no replicas in a group", m=at("replicas.0.count", 0), says="replicas[0].count: 0 is below 1"),
    case("too many pods in all", m=lambda d: d["replicas"].extend(
        [{"name": f"g{i}", "count": 500, "container": {"image": "w"}} for i in range(2)]),
         says="replicas: 1003 pods in all"),
    case("too many replica groups", m=lambda d: d["replicas"].extend(
        [{"name": f"g{i}", "count": 1, "container": {"image": "w"}} for i in range(8)]), says="$.replicas"),
    case("two groups of one name", m=lambda d: d["replicas"].append(dict(d["replicas"][0], count=1)),
         says="replicas[1].name: 'worker' names two replica groups"),
    case("a group name with an underscore", m=at("replicas.0.name", "work_er"), says="replicas[0].name"),
    case("a group name too long for its pods' labels", m=at("replicas.0.name", "w" * 60), says="longer than 58"),
    # names
    case("an op name with invalid DNS characters", m=at("name", "train me!"), says="name: 'train me!' may contain only"),
    case("an empty op name", m=at("name", ""), says="name: '' must be 1 to 63"),
    case("a long op name", m=at("name", "x" * 64), says="must be 1 to 63"),
    case("a project with a slash", m=at("project", "a/b"), says="project: 'a/b'"),
    case("a queue with capitals", m=at("queue", "GPU"), says="queue: 'GPU' is not a queue name"),
    case("a queue under two agents", m=at("queue", "a/b/c"), says="queue: 'a/b/c'"),
    case("a container name with capitals", m=at("container.name", "Main"), says="container.name: 'Main' is not a DNS"),
    case("a priority class that is not a DNS label", m=at("priorityClass", "High_"), says="priorityClass"),
    case("a pod priority class name with spaces", m=at("environment.priorityClassName", "a b"),
         says="environment.priorityClassName"),
    # labels and annotations
    case("a label value with invalid characters", m=at("environment.labels", {"team": "vision team!"}),
         says="environment.labels['team']: value 'vision team!'"),
    case("a label key with invalid characters", m=at("environment.labels", {"te am": "x"}),
         says="environment.labels['te am']: key 'te am'"),
    case("a label value too long", m=at("environment.labels", {"team": "v" * 64}), says="longer than 63"),
    case("a label key prefix that is not a subdomain", m=at("environment.labels", {"Example.com/a": "x"}),
         says="its prefix must be a DNS subdomain"),
    case("too many labels", m=at("environment.labels", {f"l{i}": "x" for i in range(MAX_LABELS + 1)}),
         says=f"is above the limit of {MAX_LABELS}"),
    case("an annotation key with a space", m=at("environment.annotations", {"a b": "x"}),
         says="environment.annotations['a b']"),
    case("annotations too big", m=at("environment.annotations", {"a": "x" * MAX_ANNOTATIONS_BYTES}),
         says="bytes of keys and values"),
    case("a node selector value with a space", m=at("environment.nodeSelector", {"pool": "a b"}),
         says="environment.nodeSelector['pool']"),
    # plain numbers and lengths (msgspec.Meta, on decode)
    case("a raw priority past the bound", m=at("priority", 2**63 - 1), says="$.priority"),
    case("a negative max retries", m=at("termination.maxRetries", -1), says="$.termination.maxRetries"),
    case("too many retries", m=at("termination.maxRetries", 101), says="<= 100"),
    case("a zero timeout", m=at("termination.timeout", 0), says="$.termination.timeout"),
    case("a ttl over a year", m=at("termination.ttl", 10**9), says="$.termination.ttl"),
    case("a negative cache ttl", m=at("cache.ttl", -1), says="$.cache.ttl"),
    case("a batch concurrency of 0", m=at("batchConcurrency", 0), says="$.batchConcurrency"),
    case("a negative iteration", m=at("iteration", -1), says="$.iteration"),
    case("too many env entries", m=at("container.env", [{"name": f"E{i}"} for i in range(1001)]),
         says="$.container.env"),
    case("too many args", m=at("container.args", ["x"] * 1001), says="$.container.args"),
    case("too many tags", m=at("tags", ["t"] * 101), says="$.tags"),
    case("too many tolerations", m=at("environment.tolerations", [{}] * 1001), says="$.environment.tolerations"),
    # money
    case("a negative cost", m=at("cost", -1.0), says="cost: -1.0 must be a finite number from 0"),
    case("a cost past the bound", m=at("cost", 1e13), says="cost"),
    case("an infinite cost", m=at("cost", "<1e400>"), says="$.cost"),
]


@pytest.mark.parametrize("c", REFUSED, ids=case_name)
def test_the_contract_refuses_on_decode_naming_the_field(c):
    with pytest.raises(msgspec.ValidationError) as refused:
        decoded(c.m)
    assert c.says in str(refused.value)


ACCEPTED = [
    case("the valid spec itself", m=lambda d: None),
    case("quantities in every unit", m=at("container.resources.limits", {"cpu": "500m", "memory": "1.5Gi",
                                                                         "ephemeral-storage": "1e3M", GPU: "8"})),
    case("whole GiB of shared GPU memory", m=limit("aliyun.com/gpu-mem", "8Gi")),
    case("the most pods an op may have", m=at("replicas.0.count", 999)),
    case("an agent/queue and a templated queue", m=at("queue", "agent/gpu-a")),
    case("a templated queue", m=at("queue", "{{ params.queue }}")),
    case("a templated node selector value", m=at("environment.nodeSelector", {"pool": "{{ params.pool }}"})),
    case("Polyaxon names with capitals and underscores", m=at("name", "Train_ResNet-50")),
    case("a prefixed label key and an empty value", m=at("environment.labels", {"example.com/team": ""})),
    case("any annotation value", m=at("environment.annotations", {"example.com/note": "any text: ok!"})),
    case("the bounds themselves", m=lambda d: d.update(priority=-1_000_000_000, cost=0.0, iteration=0,
                                                        termination={"maxRetries": 100, "timeout": 1, "ttl": 0})),
]


@pytest.mark.parametrize("c", ACCEPTED, ids=case_name)
def test_the_contract_accepts_valid_values(c):
    spec = decoded(c.m)
    assert codec.decode_spec(codec.encode(spec)) == spec


@pytest.mark.parametrize("c", [
    case("half a GPU", builder=lambda: op().gpus("0.5"), says="container.resources.limits['nvidia.com/gpu']"),
    case("GPUs spelled out", builder=lambda: op().gpus("two"), says="not a Kubernetes quantity"),
    case("3,000,000 replicas", builder=lambda: op().replicas("worker", 3_000_000), says="replicas[0].count"),
    case("a negative replica count", builder=lambda: op().replicas("worker", -1), says="replicas[0].count: -1"),
    case("an invalid label", builder=lambda: op().label("team", "a b"), says="environment.labels['team']"),
    case("an op name with a space", builder=lambda: op("a b"), says="name: 'a b'"),
    case("a negative cost", builder=lambda: op().cost(-10.0), says="cost: -10.0"),
    case("a NaN cost", builder=lambda: op().cost(float("nan")), says="cost: nan"),
], ids=case_name)
def test_the_contract_refuses_on_construction_too(c):
    with pytest.raises(ValueError) as refused:
        c.builder().build()
    assert c.says in str(refused.value)


@pytest.mark.parametrize("value", ["1e999999999", "1e400", "-1", "two", "inf", "NaN", "1_0", "", "9Ei"])
def test_a_quantity_outside_kubernetes_grammar_or_the_bound_is_a_quantity_error(value):
    with pytest.raises(QuantityError):
        parse_quantity(value)


@pytest.mark.parametrize("make", [
    lambda x: Money(amount=x),
    lambda x: CostEstimated(op_id="a", at=NOW, estimate=Money(amount=1.0), basis="default", duration_s=x),
    lambda x: CostEstimated(op_id="a", at=NOW, estimate=Money(amount=1.0), basis="default", duration_s=1.0,
                            breakdown={GPU: x}),
    lambda x: CostRecorded(op_id="a", at=NOW, amount=x, seconds=1.0, queue="q"),
    lambda x: CostRecorded(op_id="a", at=NOW, amount=1.0, seconds=1.0, queue="q", gpu_hours=x),
    lambda x: BudgetExceeded(op_id="a", at=NOW, scope="queue", name="q", window="day", limit=1.0, spent=x,
                             unit="USD", window_start=NOW, resets_at=NOW),
], ids=["money", "estimate duration", "estimate breakdown", "recorded amount", "recorded gpu hours", "budget spent"])
@pytest.mark.parametrize("amount", [-10_000.0, float("inf"), float("nan"), 1e13])
def test_money_on_the_wire_is_finite_and_non_negative(make, amount):
    with pytest.raises(ValueError, match="must be a finite number from 0"):
        make(amount)
    make(0.0)


def test_a_negative_cost_recorded_on_the_wire_is_refused_on_decode():
    good = CostRecorded(op_id="a", at=NOW, amount=1.0, seconds=36000.0, queue="q")
    data = codec.encode(good).replace(b'"amount":1.0', b'"amount":-10000.0')
    with pytest.raises(msgspec.ValidationError, match="amount: -10000.0"):
        codec.decode_event(data)
