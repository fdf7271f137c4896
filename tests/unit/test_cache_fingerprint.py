"""The cache fingerprint: stable for what determines a result, different for anything that changes it."""
from __future__ import annotations

import pytest

from services.cache.fingerprint import caching_enabled, fingerprint
from tests.builders import case, case_name, op


def base():
    return op("train").image("pytorch:2").command("python", "train.py").args("--epochs", "3").env("SEED", "1")


def test_the_fingerprint_is_a_short_stable_hex_digest():
    first = fingerprint(base().build())
    assert first == fingerprint(base().build())
    assert len(first) == 32 and int(first, 16) >= 0


def test_the_order_of_params_and_inputs_does_not_matter():
    one = base().params(lr=0.1, batch=32, opt={"name": "adam", "beta": 0.9}).inputs(data="s3://a", split="train")
    two = base().params(opt={"beta": 0.9, "name": "adam"}, batch=32, lr=0.1).inputs(split="train", data="s3://a")
    assert fingerprint(one.build()) == fingerprint(two.build())


def test_the_order_of_env_vars_does_not_matter():
    one = op().env("A", "1").env("B", "2").build()
    two = op().env("B", "2").env("A", "1").build()
    assert fingerprint(one) == fingerprint(two)


@pytest.mark.parametrize("c", [
    case("another command", other=base().command("python", "eval.py")),
    case("other args", other=base().args("--epochs", "4")),
    case("another image", other=base().image("pytorch:3")),
    case("another env value", other=op("train").image("pytorch:2").command("python", "train.py")
         .args("--epochs", "3").env("SEED", "2")),
    case("another param value", other=base().params(lr=0.2)),
    case("another input", other=base().inputs(data="s3://b")),
    case("another project", other=base().project("other")),
], ids=case_name)
def test_the_fingerprint_changes_with_what_determines_the_result(c):
    assert fingerprint(c.other.build()) != fingerprint(base().build())


@pytest.mark.parametrize("c", [
    case("the name", other=op("renamed").image("pytorch:2").command("python", "train.py")
         .args("--epochs", "3").env("SEED", "1")),
    case("the queue", other=base().queue("gpu-a")),
    case("the priority", other=base().priority(9)),
    case("the timeout", other=base().timeout(60)),
], ids=case_name)
def test_the_fingerprint_ignores_scheduling_fields(c):
    assert fingerprint(c.other.build()) == fingerprint(base().build())


@pytest.mark.parametrize("c", [
    case("an independent op is not cached by default", disable=None, in_batch=False, enabled=False),
    case("an op inside a batch is cached by default", disable=None, in_batch=True, enabled=True),
    case("disable false turns caching on for an independent op", disable=False, in_batch=False, enabled=True),
    case("disable true wins inside a batch", disable=True, in_batch=True, enabled=False),
    case("disable true keeps an independent op uncached", disable=True, in_batch=False, enabled=False),
], ids=case_name)
def test_caching_enabled(c):
    assert caching_enabled(op().cache(disable=c.disable).build(), in_batch=c.in_batch) is c.enabled


def test_caching_is_off_by_default_without_arguments():
    assert caching_enabled(op().build()) is False
