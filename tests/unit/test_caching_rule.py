"""Whether an op uses the cache (``rules.caching``, Polyaxon's defaults): the one rule by which the cache looks an
op up and admission waits for the cache's answer."""
from __future__ import annotations

import msgspec
import pytest

from opsched.rules.caching import caching_enabled, uses_cache
from tests.builders import case, case_name, op, submitted


@pytest.mark.parametrize("c", [
    case("an independent op does not use the cache by default", disable=None, batch=None, clone=False,
         enabled=False),
    case("an op inside a batch uses the cache by default", disable=None, batch="sweep-1", clone=False,
         enabled=True),
    case("disable false turns the cache on for an independent op", disable=False, batch=None, clone=False,
         enabled=True),
    case("disable true wins inside a batch", disable=True, batch="sweep-1", clone=False, enabled=False),
    case("disable true keeps an independent op off the cache", disable=True, batch=None, clone=False,
         enabled=False),
    case("a restart or copy does not use the cache by default, even from a batch", disable=None,
         batch="sweep-1", clone=True, enabled=False),
    case("disable false turns the cache on for a clone", disable=False, batch=None, clone=True, enabled=True),
], ids=case_name)
def test_when_an_op_uses_the_cache(c):
    spec = msgspec.structs.replace(op().cache(disable=c.disable).build(), batch=c.batch)
    assert caching_enabled(spec, clone=c.clone) is c.enabled


def test_the_cache_is_off_by_default_for_a_plain_op():
    assert caching_enabled(op().build()) is False


@pytest.mark.parametrize("c", [
    case("an independent op", batch=None, disable=None, relation=None, uses=False),
    case("an op of a batch", batch="sweep-1", disable=None, relation=None, uses=True),
    case("a restart of an op of a batch is a clone", batch="sweep-1", disable=None, relation="restart", uses=False),
    case("a copy is a clone", batch="sweep-1", disable=None, relation="copy", uses=False),
    case("a clone with disable false", batch=None, disable=False, relation="copy", uses=True),
], ids=case_name)
def test_a_submitted_op_uses_the_cache_by_its_spec_and_whether_it_is_a_clone(c):
    event = submitted(msgspec.structs.replace(op().cache(disable=c.disable).build(), batch=c.batch), op_id="b")
    if c.relation:
        event.original_op_id, event.relation = "a", c.relation
    assert uses_cache(event) is c.uses
