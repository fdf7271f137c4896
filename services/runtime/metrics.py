"""Prometheus metrics of the services in a process, served at ``/metrics`` on the health port.

Every figure is read when Prometheus scrapes (a ``prometheus_client`` collector over what the services
already keep): the hot path of a message pays nothing for metrics. Each process has its own registry
(``opsched up`` runs four services in one process, each labelled by ``service``).

Common to every service (``Service.stats`` and its health):

- ``opsched_messages_handled_total{service}``, ``opsched_events_published_total{service}``,
  ``opsched_dead_letters_total{service}``, ``opsched_handler_retries_total{service}``,
  ``opsched_dependency_retries_total{service}``, ``opsched_messages_lost_total{service}``,
  ``opsched_poison_messages_total{service}``;
- ``opsched_error_events_total{service,reason}``: bad input refused (each an ``error`` event and a dead letter);
- ``opsched_consumer_pending_messages{service,durable}``: a consumer's lag, the messages of its stream after
  the last one it fetched (JetStream's ``num_pending`` of that delivery; 0 when a fetch found none);
- ``opsched_service_ready{service}`` (1 when its consumers are bound and it waits for nothing),
  ``opsched_service_waiting{service,dependency}`` (1 while it waits out that dependency),
  ``opsched_service_leading{service}`` for a service one instance leads (1 leader, 0 standby).

A service adds its own (``Service.metric_families``): admission's ops per queue and status
(``services.admission.metrics``)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # the text format Prometheus 2 and 3 both scrape
disable_created_metrics()  # no ``*_created`` series beside each counter and histogram: Kueue's have none either
COUNTERS = {  # Stats field -> (metric name without _total, help)
    "handled": ("opsched_messages_handled", "Messages a handler loop handled and acked"),
    "published": ("opsched_events_published", "Events the handlers returned and the runtime published"),
    "dead_lettered": ("opsched_dead_letters", "Messages dead-lettered (an error event and a copy on the DLQ)"),
    "retried": ("opsched_handler_retries", "Messages given back for a retry after a handler failed"),
    "dependency_retries": ("opsched_dependency_retries", "Tries again of a dependency found unavailable"),
    "lost": ("opsched_messages_lost", "Messages whose last delivery nobody settled (max-deliveries advisories)"),
    "poisoned": ("opsched_poison_messages", "Messages dead-lettered unhandled: their handling died too often"),
    "inbox_garbage": ("opsched_inbox_garbage_dropped",
                      "Messages on a consumer's delivery inbox that were no delivery of it, dropped unhandled"),
}


class ServicesCollector:
    """The metrics of ``services`` (objects with ``name``, ``stats``, ``ready``, ``waits``, ``leadership`` and
    ``metric_families()``), read at each scrape."""

    def __init__(self, services: Sequence[Any]) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        yield from self._counters()
        yield from self._by_label()
        yield from self._health()
        for service in self.services:
            yield from service.metric_families()

    def _counters(self) -> Iterator[Metric]:
        for field, (name, text) in COUNTERS.items():
            family = CounterMetricFamily(name, text, labels=["service"])
            for service in self.services:
                family.add_metric([service.name], getattr(service.stats, field))
            yield family

    def _by_label(self) -> Iterator[Metric]:
        errors = CounterMetricFamily("opsched_error_events", "Bad input refused: an error event and a dead letter",
                                     labels=["service", "reason"])
        for service in self.services:
            for reason, n in sorted(service.stats.dead_letter_reasons.items()):
                errors.add_metric([service.name, reason], n)
        yield errors
        unrecorded = CounterMetricFamily("opsched_refusals_unrecorded", "Bad input refused and acked without an "
                                         "error event nor a dead letter (its sender over its command rate)",
                                         labels=["service", "reason"])
        for service in self.services:
            for reason, n in sorted(service.stats.unrecorded_reasons.items()):
                unrecorded.add_metric([service.name, reason], n)
        yield unrecorded
        yield gauge("opsched_consumer_pending_messages", "Messages of the stream after the last one fetched",
                    ["service", "durable"], [([service.name, durable], float(n)) for service in self.services
                                             for durable, n in sorted(service.stats.pending.items())])

    def _health(self) -> Iterator[Metric]:
        ready = GaugeMetricFamily("opsched_service_ready", "1 when consumers are bound and nothing is waited for",
                                  labels=["service"])
        waiting = GaugeMetricFamily("opsched_service_waiting", "1 while the service waits out a dependency",
                                    labels=["service", "dependency"])
        leading = GaugeMetricFamily("opsched_service_leading", "1 for the leader, 0 for a standby",
                                    labels=["service"])
        for service in self.services:
            waits = service.waits.report() if service.waits else {}
            ready.add_metric([service.name], float(service.ready.is_set() and not waits))
            for dependency in sorted(waits):
                waiting.add_metric([service.name, dependency], 1.0)
            if service.leadership is not None:
                leading.add_metric([service.name], float(service.leadership.state == "leader"))
        yield from (ready, waiting, leading)


class BuildInfo:
    """``opsched_build_info{version,python_version,wire_schemas}`` 1: what runs (the version Kueue's
    ``kueue_build_info`` reports; the wire contract's digest says which messages it speaks)."""

    def __init__(self) -> None:
        import platform

        from opsched.proto.schema_snapshots import digest
        from opsched.rules.version import version

        self.labels = [version() or "unknown", platform.python_version(), digest()]  # once: they cannot change

    def collect(self) -> Iterator[Metric]:
        yield gauge("opsched_build_info", "What runs: the opsched version, its Python and its wire contract's digest",
                    ["version", "python_version", "wire_schemas"], [(self.labels, 1.0)])


def registry_of(services: Sequence[Any]) -> CollectorRegistry:
    """The services' metrics, ``opsched_build_info``, and the client library's own process (CPU, memory, open
    files), platform (Python) and garbage-collector collectors."""
    from prometheus_client import GCCollector, PlatformCollector, ProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServicesCollector(services))  # type: ignore[arg-type]
    registry.register(BuildInfo())  # type: ignore[arg-type]
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The text format Prometheus scrapes (``CONTENT_TYPE``)."""
    return generate_latest(registry)


def gauge(name: str, text: str, labels: list[str], values: Iterable[tuple[list[str], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, text, labels=labels)
    for label_values, value in values:
        family.add_metric(label_values, value)
    return family
