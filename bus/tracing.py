"""Traces (OpenTelemetry): one op's path, submit → cost / cache → admission's decision → dispatcher → pod, as one
trace, when an exporter is configured. Off by default.

Configured by OpenTelemetry's own environment variables, read once at a process's start (``configure``):
``OTEL_TRACES_EXPORTER`` = ``otlp`` (OTLP over HTTP/protobuf to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``, the SDK's default ``http://localhost:4318``), ``console``, or both
(``otlp,console``); unset or ``none``: off (``OTEL_SDK_DISABLED=true`` too). ``OTEL_SERVICE_NAME`` names every
service of the process (default ``opsched-<service>``); the sampler (``OTEL_TRACES_SAMPLER``) and the batching
(``OTEL_BSP_*``) are the SDK's. Any other exporter or protocol is refused with a message naming the variable.

Off, nothing of OpenTelemetry is imported, no header is read and none is added: ``ON`` is False and ``tracer``
answers None, which is all that the handler loop and ``Bus.publish`` look at.

The context travels as the W3C headers ``traceparent`` and ``tracestate`` (the CloudEvents distributed-tracing
extension in binary mode): ``inject`` adds the current span's to a message published inside it (and notes the
publish on the span); ``consuming`` opens a handler's CONSUMER span as the child of its message's context."""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opsched.proto import codec

TRACEPARENT, TRACESTATE = "traceparent", "tracestate"
EXPORTERS = ("otlp", "console")
_W3C = re.compile(r"[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")

ON = False  # set by ``install``: read on every publish, so a plain module flag
_providers: dict[str, Any] = {}  # service -> its TracerProvider (its own ``service.name``)
_tracers: dict[str, Any] = {}  # service -> its tracer
_processors: list[Callable[[], list[Any]]] = []  # makes the span processors of a new provider
_otel: dict[str, Any] = {}  # what ``install`` imported: the API, the propagator, the span kinds


class TracingConfigError(ValueError):
    """The environment asks for tracing opsched cannot do (the message names the variable)."""


def exporters_of(env: Mapping[str, str]) -> list[str]:
    """The exporters the environment asks for (none: tracing off)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    names = [n for n in names if n != "none"]
    for name in names:
        if name not in EXPORTERS:
            raise TracingConfigError(f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']!r}: opsched exports spans "
                                     "with 'otlp' (OTLP over HTTP) or 'console' ('none' or unset: no traces)")
    protocol_var = next((v for v in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
                         if env.get(v, "").strip()), None)
    if "otlp" in names and protocol_var and env[protocol_var].strip() != "http/protobuf":
        raise TracingConfigError(f"{protocol_var}={env[protocol_var]!r}: opsched's OTLP exporter speaks "
                                 "'http/protobuf' only")
    return names


def configure(env: Mapping[str, str] = os.environ) -> bool:
    """At a process's start (a service, ``opsched up``, the CLI): tracing on if the environment asks for it."""
    if ON:
        return True
    names = exporters_of(env)
    if names:
        install(lambda: [_batched(name) for name in names])
    return bool(names)


def configure_or_exit(env: Mapping[str, str] = os.environ) -> bool:
    """``configure``; a setting opsched cannot honour ends the process with the message naming it."""
    try:
        return configure(env)
    except TracingConfigError as exc:
        raise SystemExit(f"opsched: {exc}") from None


def _batched(exporter: str) -> Any:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if exporter == "console":
        return BatchSpanProcessor(ConsoleSpanExporter())
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return BatchSpanProcessor(OTLPSpanExporter())


def install(processors: Callable[[], list[Any]]) -> None:
    """Tracing on: each service's spans go to the span processors ``processors()`` makes for it (``configure``'s
    batch exporters; a test's in-memory exporter)."""
    global ON
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _otel.update(trace=trace, propagator=TraceContextTextMapPropagator(), kinds=trace.SpanKind)
    _processors[:] = [processors]
    _providers.clear()
    _tracers.clear()
    ON = True


def shutdown() -> None:
    """Export what is buffered, then tracing off."""
    global ON
    ON = False
    for provider in _providers.values():
        provider.shutdown()
    _providers.clear()
    _tracers.clear()


def tracer(service: str) -> Any | None:
    """``service``'s tracer; None while tracing is off."""
    if not ON:
        return None
    found = _tracers.get(service)
    if found is None:
        provider = _providers[service] = _provider(service)
        found = _tracers[service] = provider.get_tracer("opsched")
    return found


def _provider(service: str) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    attributes = {"service.namespace": "opsched"} | ({} if named else {"service.name": f"opsched-{service}"})
    provider = TracerProvider(resource=Resource.create(attributes))
    for processor in _processors[0]():
        provider.add_span_processor(processor)
    return provider


# ---- the context on the wire ------------------------------------------------------------------------
def valid_traceparent(value: str) -> bool:
    """A W3C traceparent: version-traceid-parentid-flags, lowercase hex, ids not all zeros, version not ff."""
    return bool(_W3C.fullmatch(value)) and not value.startswith("ff")


def carrier_of(headers: Mapping[str, str]) -> dict[str, str] | None:
    """A message's trace context (its ``traceparent`` and ``tracestate``), kept to continue its trace later."""
    parent = headers.get(TRACEPARENT)
    if not parent:
        return None
    state = headers.get(TRACESTATE)
    return {TRACEPARENT: parent, TRACESTATE: state} if state else {TRACEPARENT: parent}


def inject(headers: dict[str, str], subject: str, msg_id: str) -> None:
    """Put the current span's context on a message's headers and note the publish on the span (outside a span:
    nothing; a ``traceparent`` the caller gave stays)."""
    span = _otel["trace"].get_current_span()
    if not span.get_span_context().is_valid:
        return
    _otel["propagator"].inject(headers)
    if span.is_recording():
        span.add_event("publish", {"messaging.destination.name": subject, "messaging.message.id": msg_id})


def current() -> dict[str, str]:
    """The current span's context as headers (empty outside a span)."""
    carrier: dict[str, str] = {}
    if ON:
        _otel["propagator"].inject(carrier)
    return carrier


def failed(description: str) -> None:
    """Mark the current span failed (a handler retried or dead-lettered its message); nothing while off."""
    if ON:
        from opentelemetry.trace import Status, StatusCode

        _otel["trace"].get_current_span().set_status(Status(StatusCode.ERROR, description[:500]))


# ---- spans -------------------------------------------------------------------------------------------
def span(tracer: Any, name: str, *, kind: str = "INTERNAL", parent: Mapping[str, str] | None = None,
         attributes: Mapping[str, Any] | None = None, start_time: int | None = None) -> Any:
    """A span (a context manager that makes it current) of ``kind`` (a ``SpanKind`` name), the child of ``parent``
    (a carrier: headers) if given, else of the current span."""
    context = _otel["propagator"].extract(parent) if parent else None
    attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
    return tracer.start_as_current_span(name, context=context, kind=_otel["kinds"][kind], attributes=attrs,
                                        start_time=start_time)


@contextmanager
def consuming(tracer: Any, msg: Any, message: Any) -> Iterator[Any]:
    """A handler's span for one delivered message (``received.Received``): CONSUMER, the child of the context
    its headers carry, with the messaging attributes (``messaging.system`` nats, the subject, the consumer)."""
    headers = msg.headers
    attributes = {
        "messaging.system": "nats", "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.destination.name": msg.subject, "messaging.consumer.group.name": msg.durable or None,
        "messaging.message.id": headers.get("Nats-Msg-Id"), "messaging.message.body.size": len(msg.data),
        "opsched.op_id": getattr(message, "op_id", None), "opsched.attempt": getattr(message, "attempt", None),
        "opsched.message.type": codec.type_of(message), "opsched.delivery": msg.num_delivered,
    }
    with span(tracer, f"process {codec.type_of(message)}", kind="CONSUMER", parent=carrier_of(headers),
              attributes=attributes) as current_span:
        yield current_span
