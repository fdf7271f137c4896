"""A label or annotation opsched writes on pods, set by the user, is refused naming the key (by the CLI before
anything is sent, by the dispatcher before any pod), never silently dropped (``rules.reserved_keys``)."""
from __future__ import annotations

from opsched import dryrun
from opsched.proto.events import OperationRejected
from opsched.rules import reserved_keys
from opsched.rules.podspec import ANNOTATION_TRACEPARENT, LABEL_OP
from tests.builders import op
from tests.unit.test_dispatch_pod_security import run


def test_each_reserved_key_is_named_and_free_ones_pass():
    spec = op().build()
    spec.environment.labels = {LABEL_OP: "other", "team": "a"}
    spec.environment.annotations = {ANNOTATION_TRACEPARENT: "00-x", "opsched.io/sim-runtime-seconds": "1"}
    assert reserved_keys.problems(spec) == [
        "environment.labels['opsched.io/op-id'] is set by opsched on every pod; remove it",
        "environment.annotations['opsched.io/traceparent'] is set by opsched; remove it"]
    assert reserved_keys.problems(op().build()) == []


def test_the_cli_refuses_it_before_sending():
    spec = op().build()
    spec.environment.annotations = {ANNOTATION_TRACEPARENT: "00-x"}
    problems = dryrun.refusals([spec], [spec], ["x"])
    assert "environment.annotations['opsched.io/traceparent'] is set by opsched; remove it" in problems


async def test_the_dispatcher_refuses_it_and_creates_no_pod():
    builder = op()
    builder_spec = builder.build()
    builder_spec.environment.labels = {LABEL_OP: "someone-else"}

    class Built:
        def build(self):
            return builder_spec
    result, calls = await run(Built())
    assert isinstance(result, OperationRejected) and result.reason == "forbidden_pod_spec"
    assert "environment.labels['opsched.io/op-id']" in result.message and calls == []
