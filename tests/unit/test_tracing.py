"""Traces (``bus.tracing``): what turns them on, the W3C context on the wire (read, written, kept),
the handler loop's CONSUMER span whose events carry its context, and with tracing off no header read, none added,
and nothing of OpenTelemetry imported."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from opsched.bus import tracing
from opsched.bus.natsclient import Headers
from opsched.client import Client
from opsched.proto import codec, subjects
from opsched.proto.events import CostEstimated, OperationSubmitted
from opsched.rules.podspec import build_pods
from opsched.services.admission import traces
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.dispatcher import podtrace
from opsched.services.dispatcher.gang import PodView
from opsched.services.dispatcher.k8s import CreateResult
from opsched.services.runtime.service import Service, Subscription
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, cost_estimated, op, submitted, succeeded
from tests.builders.bus import memory_bus
from tests.builders.clock import FakeClock
from tests.unit.test_runtime_service import on, published, received

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID, SPAN_ID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def header_block(headers: Mapping[str, str]) -> Headers:
    """A delivered message's headers as the NATS client gives them: parsed when read."""
    return Headers("".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n")


# ---- what turns tracing on --------------------------------------------------------------------------
@pytest.mark.parametrize("env, exporters", [
    ({}, []),
    ({"OTEL_TRACES_EXPORTER": "none"}, []),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
    ({"OTEL_TRACES_EXPORTER": "OTLP , console"}, ["otlp", "console"]),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, ["otlp"]),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
      "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ["otlp"]),  # the traces' own setting wins, as the SDK reads it
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, []),
], ids=["unset: off", "none: off", "otlp", "otlp and console", "http/protobuf", "the traces protocol wins",
        "the SDK disabled: off"])
def test_the_environment_chooses_the_exporters(env, exporters):
    assert tracing.exporters_of(env) == exporters


@pytest.mark.parametrize("env, named", [
    ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
     "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
], ids=["an exporter opsched does not have", "OTLP over gRPC", "OTLP as JSON"])
def test_a_setting_opsched_cannot_honour_is_refused_naming_the_variable(env, named):
    with pytest.raises(tracing.TracingConfigError, match=named):
        tracing.exporters_of(env)
    with pytest.raises(SystemExit, match=named):
        tracing.configure_or_exit(env)


def test_off_the_services_the_client_and_the_cli_import_nothing_of_opentelemetry():
    code = ("import sys; from opsched.bus import tracing; from opsched.services.runtime.settings import Settings\n"
            "import opsched.cli, opsched.client\n"
            "for name in ('admission', 'cost', 'cache', 'dispatcher'):\n"
            "    __import__(f'opsched.services.{name}.service', fromlist=['build']).build(Settings(dispatcher_mode='null'))\n"
            "assert tracing.configure({}) is False and tracing.tracer('cost') is None\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


# ---- the context on the wire ------------------------------------------------------------------------
@pytest.mark.parametrize("value, valid", [
    (PARENT, True),
    ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", True),  # not sampled: still a context
    ("00-00000000000000000000000000000000-b7ad6b7169203331-01", False),
    ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", False),
    ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", False),
    ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", False),
    ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", False),
    ("", False),
], ids=["sampled", "not sampled", "a zero trace id", "a zero parent id", "version ff", "uppercase",
        "no flags", "empty"])
def test_a_traceparent_is_valid_only_as_w3c_writes_it(value, valid):
    assert tracing.valid_traceparent(value) is valid


def test_a_messages_context_is_its_traceparent_and_tracestate_and_a_message_without_one_is_not_parsed():
    assert tracing.carrier_of(header_block({"traceparent": PARENT, "tracestate": "k=v"})) == \
        {"traceparent": PARENT, "tracestate": "k=v"}
    assert tracing.carrier_of(header_block({"traceparent": PARENT})) == {"traceparent": PARENT}
    plain = header_block({"Nats-Msg-Id": "op-1.submitted.0", "ce-type": "io.opsched.submitted"})
    assert tracing.carrier_of(plain) is None
    assert plain._parsed is None  # no traceparent in the block: its lines were never parsed


def test_inside_a_span_a_publish_carries_its_context_and_is_noted_on_it(spans):
    tracer = tracing.tracer("test")
    with tracing.span(tracer, "work") as span:
        headers = {"Nats-Msg-Id": "op-1.cost_estimated.0"}
        tracing.inject(headers, "ops.cost_estimated.op-1", "op-1.cost_estimated.0")
    context = span.get_span_context()
    assert headers["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
    [finished] = spans.get_finished_spans()
    assert [(e.name, dict(e.attributes)) for e in finished.events] == [("publish", {
        "messaging.destination.name": "ops.cost_estimated.op-1", "messaging.message.id": "op-1.cost_estimated.0"})]


def test_outside_a_span_a_publish_keeps_the_traceparent_it_was_given(spans):
    headers = {"traceparent": PARENT}
    tracing.inject(headers, "cmd.alice.submit.default", "op-1.submit.0")
    assert headers == {"traceparent": PARENT}


def test_a_span_given_a_parent_continues_its_trace(spans):
    with tracing.span(tracing.tracer("test"), "child", parent={"traceparent": PARENT}, kind="CLIENT"):
        pass
    [child] = spans.get_finished_spans()
    assert (f"{child.context.trace_id:032x}", f"{child.parent.span_id:016x}") == (TRACE_ID, SPAN_ID)
    assert child.kind == SpanKind.CLIENT


# ---- the handler loop -------------------------------------------------------------------------------
class Probe(Service):
    name = "cost"


def probe(bus) -> tuple[Service, Subscription]:
    service = Probe(Settings(max_deliver=3), FakeClock(T0))
    service.bus = bus  # type: ignore[assignment]
    sub = Subscription("test-durable", subjects.OPS_STREAM, [subjects.OPS_ALL], codec.decode)
    service.subscriptions.append(sub)

    @on(sub, OperationSubmitted)
    async def estimate(event, ctx):
        return cost_estimated(event.op_id)
    return service, sub


class Untouchable(Mapping[str, str]):
    """Headers that fail the test when read."""

    def __getitem__(self, key: str) -> str:
        raise AssertionError(f"header {key!r} read with tracing off")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("headers iterated with tracing off")

    def __len__(self) -> int:
        raise AssertionError("headers counted with tracing off")

    def get(self, key, default=None):
        raise AssertionError(f"header {key!r} read with tracing off")


async def test_off_the_handler_loop_reads_no_header_and_its_events_carry_none():
    bus = memory_bus("cost")
    service, sub = probe(bus)
    msg = await received(bus, codec.encode(submitted(op("t").build())))
    untouched = Received_with(msg, Untouchable())
    await service.process(sub, untouched)
    [event] = published(bus.trace)
    assert isinstance(event, CostEstimated) and service.stats.handled == 1
    [stored] = [e[1] for e in bus.trace if e[0] == "publish"]
    assert "traceparent" not in stored.headers and "tracestate" not in stored.headers


async def test_on_a_handled_message_is_a_consumer_span_child_of_its_context_and_its_events_carry_the_span(spans):
    bus = memory_bus("cost")
    service, sub = probe(bus)
    msg = await received(bus, codec.encode(submitted(op("t").build(), op_id="op-7")), subject="ops.submitted.op-7")
    await service.process(sub, Received_with(msg, header_block({"Nats-Msg-Id": "op-7.submitted.0",
                                                                 "traceparent": PARENT, "tracestate": "k=v"})))
    [span] = spans.get_finished_spans()
    assert span.name == "process submitted" and span.kind == SpanKind.CONSUMER
    assert (f"{span.context.trace_id:032x}", f"{span.parent.span_id:016x}") == (TRACE_ID, SPAN_ID)
    assert dict(span.attributes) == {
        "messaging.system": "nats", "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.destination.name": "ops.submitted.op-7", "messaging.consumer.group.name": "test-durable",
        "messaging.message.id": "op-7.submitted.0", "messaging.message.body.size": len(msg.data),
        "opsched.op_id": "op-7", "opsched.attempt": 0, "opsched.message.type": "submitted", "opsched.delivery": 1}
    [stored] = [e[1] for e in bus.trace if e[0] == "publish"]
    assert stored.headers["traceparent"].startswith(f"00-{TRACE_ID}-{span.context.span_id:016x}-")
    assert stored.headers["tracestate"] == "k=v"


async def test_on_a_handler_that_fails_marks_its_span_failed(spans):
    bus = memory_bus("cost")
    service, sub = probe(bus)

    @on(sub, OperationSubmitted)
    async def broken(event, ctx):
        raise RuntimeError("boom")
    msg = await received(bus, codec.encode(submitted(op("t").build())))
    await service.process(sub, msg)
    [span] = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR and "boom" in span.status.description


def Received_with(msg, headers):  # noqa: N802 - reads as the constructor it stands for
    from dataclasses import replace

    return replace(msg, headers=headers)


# ---- the SDK ----------------------------------------------------------------------------------------
async def test_the_sdk_refuses_a_traceparent_that_is_not_one_and_passes_a_callers_on_with_tracing_off():
    bus = memory_bus("client")
    client = Client(bus)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a W3C traceparent"):
        await client.submit(op("t").build(), traceparent="00-abc-def-01")
    assert bus.published == []
    op_id = await client.submit(op("t").build(), traceparent=PARENT)
    [sent] = bus.published
    assert sent.headers["traceparent"] == PARENT and sent.msg_id == subjects.msg_id(op_id, "submit", 0)


# ---- admission keeps an op's context ----------------------------------------------------------------
def test_admission_keeps_an_ops_submitted_context_until_the_op_ends():
    state = AdmissionState()
    event = submitted(op("t").build(), op_id="op-1")
    state.apply(event, 1)
    traces.remember(state.ops, event, header_block({"traceparent": PARENT}))
    assert state.ops["op-1"].history.trace == {"traceparent": PARENT}
    ended = succeeded("op-1")
    state.apply(ended, 2)
    traces.remember(state.ops, ended, header_block({}))
    assert state.ops["op-1"].history.trace is None


def test_admissions_decision_span_is_none_while_tracing_is_off():
    state = AdmissionState()
    state.apply(submitted(op("t").build(), op_id="op-1"), 1)
    with traces.deciding(None, succeeded("op-1"), state.ops["op-1"], 0, 1) as span:
        assert span is None


# ---- the dispatcher: the pod carries the context of the span that created it ------------------------
class Kube:
    def __init__(self) -> None:
        self.created: list[dict] = []

    async def create_pod(self, body: dict) -> CreateResult:
        self.created.append(body)
        return CreateResult(created=True)


def pod(name: str = "op-a-0") -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "labels": {"opsched.io/op-id": "a", "opsched.io/attempt": "2"},
                         "annotations": {}}}


async def test_on_a_pod_is_created_in_a_client_span_whose_context_it_carries(spans):
    kube = Kube()
    with tracing.span(tracing.tracer("dispatcher"), "process admitted", parent={"traceparent": PARENT}):
        await podtrace.create_pod(kube, pod(), "dispatcher")  # type: ignore[arg-type]
    create = next(s for s in spans.get_finished_spans() if s.name == "create pod")
    annotation = kube.created[0]["metadata"]["annotations"]["opsched.io/traceparent"]
    assert annotation.startswith(f"00-{TRACE_ID}-{create.context.span_id:016x}-")
    assert create.kind == SpanKind.CLIENT and create.attributes["opsched.pod.created"] is True
    assert create.attributes["k8s.pod.name"] == "op-a-0" and create.attributes["opsched.op_id"] == "a"
    assert create.attributes["opsched.attempt"] == 2
    view = PodView(name="op-a-0", namespace="ns", op_id="a", attempt=0,
                   annotations={"opsched.io/traceparent": annotation})
    assert podtrace.headers_of([view]) == {"traceparent": annotation}  # what the watch's events carry on


async def test_off_a_pod_gets_no_traceparent_and_its_events_none():
    kube = Kube()
    await podtrace.create_pod(kube, pod(), "dispatcher")  # type: ignore[arg-type]
    assert kube.created[0]["metadata"]["annotations"] == {}
    view = PodView(name="op-a-0", namespace="ns", op_id="a", attempt=0,
                   annotations={"opsched.io/traceparent": PARENT})
    assert podtrace.headers_of([view]) is None


def test_a_users_traceparent_annotation_is_dropped_from_the_pod_the_dispatchers_is_reserved():
    spec = op().build()
    spec.environment.annotations = {"opsched.io/traceparent": PARENT, "team": "vision"}
    [built] = build_pods(admitted(spec))
    assert built["metadata"]["annotations"].get("opsched.io/traceparent") is None
    assert built["metadata"]["annotations"]["team"] == "vision"
