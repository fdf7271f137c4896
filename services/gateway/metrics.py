"""The gateway's metrics: requests by route and status (``opsched_gateway_requests_total``)."""
from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client.core import CounterMetricFamily


class Requests:
    def __init__(self) -> None:
        self.counts: Counter[tuple[str, int]] = Counter()

    def count(self, route: str, status: int) -> None:
        self.counts[(route, status)] += 1

    def families(self) -> list[Any]:
        family = CounterMetricFamily("opsched_gateway_requests", "HTTP requests by route and status",
                                     labels=["route", "status"])
        for (route, status), n in sorted(self.counts.items()):
            family.add_metric([route, str(status)], n)
        return [family]
