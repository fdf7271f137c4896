"""Prometheus metrics (``services.runtime.metrics``): a scrape of ``/metrics`` on the health port while a real
stack runs ops shows each service's counters and admission's ops per queue and status move."""
from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from opsched.services.runtime import metrics
from opsched.services.runtime.health import HealthServer
from opsched.services.runtime.runner import report
from tests.builders import op
from tests.service.test_liveness import start
from tests.waiting import eventually


async def scrape(port: int) -> tuple[str, dict[tuple[str, tuple], float]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.split()[1] == b"200"
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(body.decode()) for s in family.samples}
    return head.decode(), samples


async def test_a_scrape_shows_the_counters_and_the_ops_per_queue_move_as_ops_run(stack_factory, tmp_path, client):
    stack = await start(stack_factory, tmp_path)
    registry = metrics.registry_of(stack.services)
    server = HealthServer(lambda: report(stack.services, [True] * len(stack.services)),
                          metrics=lambda: metrics.exposition(registry))
    port = await server.start()
    try:
        async def leading() -> tuple[str, dict] | None:  # the stack is up; admission leads once it took the lease
            head, now = await scrape(port)
            return (head, now) if now.get(("opsched_service_leading", (("service", "admission"),))) == 1 else None
        head, before = await eventually(leading, "admission leading in /metrics")
        assert "Content-Type: text/plain; version=0.0.4" in head
        assert before[("opsched_ops", (("queue", "default"), ("status", "pending")))] == 0
        assert before[("opsched_service_ready", (("service", "admission"),))] == 1
        assert before[("opsched_service_leading", (("service", "admission"),))] == 1
        handled = ("opsched_messages_handled_total", (("service", "dispatcher"),))
        assert before[handled] == 0
        ids = [await client.submit(op(f"m{i}").build()) for i in range(3)]

        async def moved() -> dict | None:
            _, now = await scrape(port)
            dispatched = now.get(("opsched_ops", (("queue", "default"), ("status", "dispatched"))), 0)
            return now if dispatched == len(ids) and now[handled] >= len(ids) else None
        after = await eventually(moved, "3 ops dispatched in /metrics", timeout=30)
        assert after[("opsched_events_published_total", (("service", "cost"),))] >= len(ids)
        assert after[("opsched_messages_handled_total", (("service", "admission"),))] >= len(ids)
        assert after[("opsched_dead_letters_total", (("service", "admission"),))] == 0
        assert after[("opsched_admission_decisions_total", (("result", "admitted"),))] == len(ids)
        assert after[("opsched_admission_wait_time_seconds_count", (("queue", "default"),))] == len(ids)
        assert after[("opsched_admitted_workloads_total", (("queue", "default"),))] == len(ids)
        assert after[("opsched_admission_attempts_total", (("result", "success"),))] >= 1
        assert after[("opsched_ops_submitted_total", (("queue", "default"),))] == len(ids)
        lags = {dict(labels)["service"] for name, labels in after if name == "opsched_consumer_pending_messages"}
        assert {"admission", "cost", "cache", "dispatcher"} <= lags
        assert ("opsched_burn_rate_per_hour", (("currency", "USD"),)) in after
    finally:
        await server.stop()
