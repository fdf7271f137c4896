"""The cache key: stable for what determines a result, different for anything that changes it;
``cache.io`` and ``cache.sections`` narrow it as in Polyaxon (whether an op uses the cache at all:
``test_caching_rule``)."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.spec import Cache, OpSpec
from opsched.services.cache.fingerprint import fingerprint, key_document
from tests.builders import case, case_name, op


def base():
    return op("train").image("pytorch:2").command("python", "train.py").args("--epochs", "3").env("SEED", "1")


def with_(spec: OpSpec, **fields) -> OpSpec:
    """The spec with fields replaced (``cache=Cache(io=[...])``, ``outputs={...}``, ``batch=...``)."""
    return msgspec.structs.replace(spec, **fields)


def cached(spec: OpSpec, **cache) -> OpSpec:
    return with_(spec, cache=Cache(**cache))


def test_the_key_is_a_short_stable_hex_digest():
    first = fingerprint(base().build())
    assert first == fingerprint(base().build())
    assert len(first) == 32 and int(first, 16) >= 0


def test_the_order_of_inputs_and_params_does_not_change_the_key():
    one = base().params(lr=0.1, batch=32, opt={"name": "adam", "beta": 0.9}).inputs(data="s3://a", split="train")
    two = base().params(opt={"beta": 0.9, "name": "adam"}, batch=32, lr=0.1).inputs(split="train", data="s3://a")
    assert fingerprint(one.build()) == fingerprint(two.build())


def test_the_inputs_are_keyed_sorted_by_name():
    doc = key_document(base().inputs(b="2", a="1", c="3").build())
    assert doc["state"]["inputs"] == [["a", "1"], ["b", "2"], ["c", "3"]]


def test_the_order_of_env_vars_does_not_change_the_key():
    one = op().env("A", "1").env("B", "2").build()
    two = op().env("B", "2").env("A", "1").build()
    assert fingerprint(one) == fingerprint(two)


def pytorchjob(worker_command: str = "train.py", workers: int = 2, image: str = "pytorch:2") -> OpSpec:
    spec = base().replicas("worker", workers).build()
    group = spec.replicas[0]
    container = msgspec.structs.replace(group.container, image=image, command=["python", worker_command])
    return with_(spec, run_kind="pytorchjob", replicas=[msgspec.structs.replace(group, container=container)])


@pytest.mark.parametrize("c", [
    case("another command changes the key", other=base().command("python", "eval.py").build()),
    case("other args change the key", other=base().args("--epochs", "4").build()),
    case("another image changes the key", other=base().image("pytorch:3").build()),
    case("another env value changes the key", other=op("train").image("pytorch:2").command("python", "train.py")
         .args("--epochs", "3").env("SEED", "2").build()),
    case("another param value changes the key", other=base().params(lr=0.2).build()),
    case("another input changes the key", other=base().inputs(data="s3://b").build()),
    case("another project changes the key", other=base().project("other").build()),
    case("another run kind changes the key", other=with_(base().build(), run_kind="pytorchjob")),
    case("a declared output value changes the key", other=with_(base().build(), outputs={"model": "s3://m"})),
    case("another working directory changes the key",
         other=with_(base().build(), container=msgspec.structs.replace(base().build().container, working_dir="/w"))),
    case("a mounted volume changes the key", other=base().volume("data", mount_path="/data", emptyDir={}).build()),
], ids=case_name)
def test_the_key_changes_with_what_determines_the_result(c):
    assert fingerprint(c.other) != fingerprint(base().build())


@pytest.mark.parametrize("c", [
    case("more workers change the key", other=pytorchjob(workers=3)),
    case("another worker command changes the key", other=pytorchjob(worker_command="other.py")),
    case("another worker image changes the key", other=pytorchjob(image="pytorch:3")),
    case("another main pod role changes the key (a tfjob's worker 0, not its chief)",
         other=with_(pytorchjob(), run_kind="tfjob", main_role="worker")),
    case("other slots per worker change the key", other=with_(pytorchjob(), slots_per_worker=4)),
], ids=case_name)
def test_the_replica_groups_are_part_of_the_key(c):
    assert fingerprint(c.other) != fingerprint(pytorchjob())
    assert fingerprint(pytorchjob()) == fingerprint(pytorchjob())


@pytest.mark.parametrize("c", [
    case("the name does not change the key", other=op("renamed").image("pytorch:2").command("python", "train.py")
         .args("--epochs", "3").env("SEED", "1").build()),
    case("the queue does not change the key", other=base().queue("gpu-a").build()),
    case("the priority does not change the key", other=base().priority(9).build()),
    case("the timeout does not change the key", other=base().timeout(60).build()),
    case("the resources do not change the key", other=base().gpus(2).cpu("4").build()),
    case("the node selector does not change the key", other=base().node_selector("pool", "a").build()),
    case("the cache ttl does not change the key", other=base().cache(ttl=60, disable=False).build()),
    case("an output without a value does not change the key", other=with_(base().build(), outputs={"model": None})),
    case("the batch does not change the key", other=with_(base().build(), batch="sweep-1")),
    case("the default sections spelled out do not change the key",
         other=cached(base().build(), sections=["init", "connections", "containers"])),
], ids=case_name)
def test_the_key_ignores_what_does_not_change_the_result(c):
    assert fingerprint(c.other) == fingerprint(base().build())


@pytest.mark.parametrize("c", [
    case("an input outside cache.io does not change the key",
         one=base().inputs(data="s3://a", seed="1"), two=base().inputs(data="s3://a", seed="2"),
         io=["data"], same=True),
    case("an input named in cache.io changes the key",
         one=base().inputs(data="s3://a", seed="1"), two=base().inputs(data="s3://b", seed="1"),
         io=["data"], same=False),
    case("a param outside cache.io does not change the key",
         one=base().params(lr=0.1, log_every=10), two=base().params(lr=0.1, log_every=50),
         io=["lr"], same=True),
    case("a param named in cache.io changes the key",
         one=base().params(lr=0.1), two=base().params(lr=0.2), io=["lr"], same=False),
    case("without cache.io every input counts",
         one=base().inputs(data="s3://a", seed="1"), two=base().inputs(data="s3://a", seed="2"),
         io=None, same=False),
], ids=case_name)
def test_cache_io_filters_the_inputs_and_params(c):
    one, two = cached(c.one.build(), io=c.io), cached(c.two.build(), io=c.io)
    assert (fingerprint(one) == fingerprint(two)) is c.same


def test_cache_io_filters_the_outputs_too():
    one = cached(with_(base().build(), outputs={"model": "s3://m", "log": "a"}), io=["model"])
    two = cached(with_(base().build(), outputs={"model": "s3://m", "log": "b"}), io=["model"])
    three = cached(with_(base().build(), outputs={"model": "s3://n", "log": "a"}), io=["model"])
    assert fingerprint(one) == fingerprint(two) != fingerprint(three)


@pytest.mark.parametrize("c", [
    case("without the containers section another command keeps the key",
         sections=["init", "connections"], other=base().command("python", "eval.py"), same=True),
    case("without the containers section other args keep the key",
         sections=["init"], other=base().args("--epochs", "9"), same=True),
    case("without the containers section another image still changes the key",
         sections=["init"], other=base().image("pytorch:3"), same=False),
    case("without the containers section another env value still changes the key",
         sections=[], other=op("train").image("pytorch:2").command("python", "train.py")
         .args("--epochs", "3").env("SEED", "2"), same=False),
    case("with the containers section another command changes the key",
         sections=["containers"], other=base().command("python", "eval.py"), same=False),
], ids=case_name)
def test_cache_sections_choose_whether_command_and_args_count(c):
    one, two = cached(base().build(), sections=c.sections), cached(c.other.build(), sections=c.sections)
    assert (fingerprint(one) == fingerprint(two)) is c.same
