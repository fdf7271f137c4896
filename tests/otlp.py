"""A loopback OTLP/HTTP receiver for tests: what services in their own processes export (``OTEL_TRACES_EXPORTER=otlp``,
``OTEL_EXPORTER_OTLP_ENDPOINT`` = ``receiver.endpoint``) arrives as ``ExportTraceServiceRequest`` protobufs on
``POST /v1/traces``; each span is kept as a ``Received`` (ids in hex, the resource's ``service.name``)."""
from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: str  # "CONSUMER", "PRODUCER", "CLIENT", "INTERNAL", ...
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    attributes: dict[str, Any]


def _value(any_value: Any) -> Any:
    field = any_value.WhichOneof("value")
    return getattr(any_value, field) if field else None


def decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest.FromString(body)
    out = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(ReceivedSpan(
                    service=str(resource.get("service.name", "")), name=span.name,
                    kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"), trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(), parent_id=span.parent_span_id.hex(),
                    attributes={a.key: _value(a.value) for a in span.attributes}))
    return out


class OtlpReceiver:
    """``with OtlpReceiver() as receiver:`` serves on 127.0.0.1 (a free port) until the block ends."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                ok = self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf"
                if ok:
                    receiver._add(decode(body))
                answer = ExportTraceServiceResponse().SerializeToString() if ok else b""
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _add(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.spans.extend(spans)
            self.requests += 1

    def of_trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def __enter__(self) -> "OtlpReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
