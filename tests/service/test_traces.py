"""Traces (``bus.tracing``): with an exporter configured, one op's spans across the client, admission,
cost, cache and the dispatcher share one trace id, each hop the child of the one whose message it handled; with
tracing off the services add no ``traceparent`` to anything they publish."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from opsched.bus import tracing
from opsched.proto import subjects
from opsched.proto.events import OperationAdmitted, OperationDispatched, OperationOnHold
from tests.builders import op
from tests.builders.identities import ADMIN, HARNESS
from tests.otlp import OtlpReceiver
from tests.waiting import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# (the consumer, else the service; span name): every hop of an op submitted, estimated, looked up, admitted, dispatched
HOPS = [("client", "send submit"), (subjects.ADMISSION_COMMANDS, "process submit"),
        (subjects.COST_ESTIMATOR, "process submitted"), (subjects.CACHE_LOOKUP, "process submitted"),
        ("admission", "decide admitted"), (subjects.DISPATCHER_ADMITTED, "process admitted")]


def hops_of(exporter: InMemorySpanExporter, op_id: str) -> dict[tuple[str, str], ReadableSpan]:
    """The op's finished spans by (the consumer that handled the message, else the service; name)."""
    found = {}
    for span in exporter.get_finished_spans():
        attributes = span.attributes or {}
        if attributes.get("opsched.op_id") == op_id:
            service = str(span.resource.attributes["service.name"]).removeprefix("opsched-")
            found[(str(attributes.get("messaging.consumer.group.name", service)), span.name)] = span
    return found


async def test_one_ops_spans_across_the_services_are_one_trace_each_hop_the_child_of_the_last(
        spans, stack_factory, client):
    await stack_factory(dispatcher_mode="null")
    op_id = await client.submit(op("traced").build())

    async def all_hops() -> dict | None:
        found = hops_of(spans, op_id)
        return found if all(hop in found for hop in HOPS) else None
    found = await eventually(all_hops, f"the spans of {HOPS}", timeout=30)

    submit, admission, cost, cache, decision, dispatch = (found[hop] for hop in HOPS)
    assert {found[hop].context.trace_id for hop in HOPS} == {submit.context.trace_id}
    assert submit.parent is None and submit.kind == SpanKind.PRODUCER
    assert admission.parent.span_id == submit.context.span_id
    assert cost.parent.span_id == admission.context.span_id  # their submitted carries admission's span
    assert cache.parent.span_id == admission.context.span_id
    assert decision.parent.span_id == admission.context.span_id  # kept with the op from its submitted
    assert dispatch.parent.span_id == decision.context.span_id  # the admitted carries the decision's span
    assert {admission.kind, cost.kind, cache.kind, dispatch.kind} == {SpanKind.CONSUMER}
    assert decision.kind == SpanKind.INTERNAL and decision.attributes["opsched.decision"] == "admitted"
    assert dispatch.attributes["messaging.system"] == "nats"
    assert dispatch.attributes["messaging.destination.name"] == subjects.event("admitted", op_id)
    assert dispatch.attributes["messaging.consumer.group.name"] == subjects.DISPATCHER_ADMITTED
    assert dispatch.attributes["messaging.message.id"] == subjects.msg_id(op_id, "admitted", 0)
    publishes = [e.attributes["messaging.destination.name"] for e in cost.events if e.name == "publish"]
    assert publishes == [subjects.event("cost_estimated", op_id)]


async def test_a_caller_traceparent_makes_the_op_part_of_the_callers_trace(spans, stack_factory, client):
    await stack_factory(names=("admission", "cost", "cache"))
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    op_id = await client.submit(op("continued").build(), traceparent=caller)

    async def decided() -> dict | None:
        found = hops_of(spans, op_id)
        return found if ("admission", "decide admitted") in found else None
    found = await eventually(decided, "the admission decision's span", timeout=30)
    assert {f"{s.context.trace_id:032x}" for s in found.values()} == {"4bf92f3577b34da6a3ce929d0e0e4736"}
    submit = found[("client", "send submit")]
    assert f"{submit.parent.span_id:016x}" == "00f067aa0ba902b7"


async def test_an_admission_started_after_the_submit_finds_the_ops_context_in_the_stream(
        spans, stack_factory, client, events):
    first = await stack_factory(names=("admission", "cost", "cache"))
    op_id = await client.submit(msgspec.structs.replace(op("held").build(), is_approved=False))
    await events.expect(OperationOnHold, op_id)
    await first.close()
    await stack_factory(names=("admission",))  # a new instance: what it knows, it replayed
    await client.approve(op_id)
    await events.expect(OperationAdmitted, op_id)

    async def decided() -> dict | None:
        found = hops_of(spans, op_id)
        return found if ("admission", "decide admitted") in found else None
    found = await eventually(decided, "the admission decision's span", timeout=30)
    submit = found[(subjects.ADMISSION_COMMANDS, "process submit")]
    assert found[("admission", "decide admitted")].parent.span_id == submit.context.span_id


async def test_with_tracing_off_the_services_add_no_traceparent(stack_factory, bus, client, events):
    assert not tracing.ON
    await stack_factory(dispatcher_mode="null")
    op_id = await client.submit(op("untraced").build())
    await events.expect(OperationDispatched, op_id, timeout=30)
    last = await bus.last_seq(subjects.OPS_STREAM)
    stored = [await bus.stored(subjects.OPS_STREAM, seq) for seq in range(1, last + 1)]
    headers = [m.headers for m in stored if m is not None]
    assert len(headers) >= 4  # submitted, cost_estimated, admitted, dispatched (caching off: no cache answer)
    assert all("Nats-Msg-Id" in h for h in headers)
    assert [h for h in headers if tracing.TRACEPARENT in h or tracing.TRACESTATE in h] == []


def run_cli(nats_server, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """The CLI as admin, over TLS."""
    return subprocess.run([sys.executable, "-m", "opsched.cli", *argv], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **nats_server.env(ADMIN), **env})


async def test_the_cli_submit_is_a_producer_span_exported_over_otlp_continuing_a_traceparent_from_its_env(
        nats_server, tmp_path):
    insider = await nats_server.connect(name="test", identity=HARNESS)
    await insider.ensure_streams()  # as the services do: a client cannot create them
    await insider.close()
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with OtlpReceiver() as receiver:
        result = await asyncio.to_thread(run_cli, nats_server, "submit", str(EXAMPLES / "train-1gpu.yaml"),
                                         "--id", "cli-traced", OTEL_TRACES_EXPORTER="otlp", TRACEPARENT=caller,
                                         OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        assert result.returncode == 0, result.stderr
        [span] = receiver.of_trace("4bf92f3577b34da6a3ce929d0e0e4736")  # exported before the CLI exited
    assert (span.name, span.kind, span.parent_id, span.service) == (
        "send submit", "PRODUCER", "00f067aa0ba902b7", "opsched-client")
    assert span.attributes["opsched.op_id"] == "cli-traced"
    bus = await nats_server.connect(name="test", identity=HARNESS)
    try:
        stored = await bus.stored(subjects.CMD_STREAM, await bus.last_seq(subjects.CMD_STREAM))
    finally:
        await bus.close()
    assert stored is not None
    assert stored.headers["traceparent"].startswith(f"00-4bf92f3577b34da6a3ce929d0e0e4736-{span.span_id}-")


@pytest.mark.parametrize("env, named, code", [
    ({"TRACEPARENT": "00-xyz-01"}, "TRACEPARENT", 2),
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER", 1),
], ids=["a traceparent that is not one", "an exporter opsched does not have"])
async def test_the_cli_refuses_tracing_settings_it_cannot_honour_before_it_sends_anything(
        nats_server, env, named, code):
    result = await asyncio.to_thread(run_cli, nats_server, "submit", str(EXAMPLES / "train-1gpu.yaml"), **env)
    assert result.returncode == code and named in result.stderr
    bus = await nats_server.connect(name="test", identity=HARNESS)
    try:
        await bus.ensure_streams()
        assert await bus.last_seq(subjects.CMD_STREAM) == 0
    finally:
        await bus.close()
