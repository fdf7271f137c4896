"""The dispatcher's Prometheus metrics (``services.runtime.metrics``), counted as pods are created:

- ``opsched_pod_create_duration_seconds{result}``: one pod's create call(s), ``created`` or ``exists`` (a 409
  for this very pod: a redelivery or a replica got there first), as kube-scheduler users read
  ``apiserver_request_duration_seconds`` for their own calls;
- ``opsched_pod_create_errors_total{code}``: creates that failed, by the API server's status (``403``,
  ``422``, ...) or ``unavailable`` (no answer, 5xx, 429: retried later)."""
from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Histogram

from opsched.bus.errors import DependencyUnavailable

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def error_code(exc: BaseException) -> str:
    if isinstance(exc, DependencyUnavailable):
        return "unavailable"
    status = getattr(exc, "status", None)
    return str(status) if isinstance(status, int) and status else exc.__class__.__name__


class PodMeasures:
    def __init__(self) -> None:
        self.created = Histogram("opsched_pod_create_duration_seconds", "Creating one pod on the API server",
                                 ["result"], buckets=BUCKETS, registry=None)
        self.errors = Counter("opsched_pod_create_errors", "Pod creates that failed, by status", ["code"],
                              registry=None)

    def done(self, seconds: float, created: bool) -> None:
        self.created.labels("created" if created else "exists").observe(seconds)

    def failed(self, exc: BaseException) -> None:
        self.errors.labels(error_code(exc)).inc()

    def families(self) -> list[Any]:
        return [*self.created.collect(), *self.errors.collect()]
