"""The metrics collector reads what the services keep at a scrape (``services.runtime.metrics``)."""
from __future__ import annotations

import asyncio
import platform
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from opsched.services.runtime import metrics
from opsched.services.runtime.service import Stats
from opsched.services.runtime.stalls import Stalls
from tests.builders.clock import FakeClock


def fake(name: str, *, ready=True, waits=None, leading=None, stats=None):
    event = asyncio.Event()
    if ready:
        event.set()
    return SimpleNamespace(name=name, stats=stats or Stats(), ready=event,
                           waits=SimpleNamespace(report=lambda: waits or {}), stalls=Stalls(), clock=FakeClock(),
                           leadership=None if leading is None else SimpleNamespace(state=leading),
                           metric_families=lambda: [])


def samples(services) -> dict:
    text = metrics.exposition(metrics.registry_of(services)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_each_counter_of_stats_is_a_counter_per_service():
    got = samples([fake("cost", stats=Stats(handled=7, dead_lettered=2, lost=1)), fake("cache")])
    assert got[("opsched_messages_handled_total", (("service", "cost"),))] == 7
    assert got[("opsched_dead_letters_total", (("service", "cost"),))] == 2
    assert got[("opsched_messages_lost_total", (("service", "cost"),))] == 1
    assert got[("opsched_messages_handled_total", (("service", "cache"),))] == 0
    assert {name for name, _ in got if name.startswith("opsched_") and name.endswith("_total")} == \
        {f"{n}_total" for n, _ in metrics.COUNTERS.values()}


def test_a_service_waiting_out_a_dependency_is_not_ready_and_names_it():
    got = samples([fake("dispatcher", waits={"kubernetes": {"since": "..."}}), fake("admission", leading="standby")])
    assert got[("opsched_service_ready", (("service", "dispatcher"),))] == 0
    assert got[("opsched_service_waiting", (("dependency", "kubernetes"), ("service", "dispatcher")))] == 1
    assert got[("opsched_service_ready", (("service", "admission"),))] == 1
    assert got[("opsched_service_leading", (("service", "admission"),))] == 0
    assert ("opsched_service_leading", (("service", "dispatcher"),)) not in got


def test_error_events_by_reason_and_each_consumers_lag():
    from collections import Counter

    stats = Stats(dead_letter_reasons=Counter({"malformed_message": 2, "unknown_queue": 1}),
                  pending={"admission-submit": 40, "admission-stop": 0})
    got = samples([fake("admission", stats=stats), fake("cost")])
    assert got[("opsched_error_events_total", (("reason", "malformed_message"), ("service", "admission")))] == 2
    assert got[("opsched_error_events_total", (("reason", "unknown_queue"), ("service", "admission")))] == 1
    assert got[("opsched_consumer_pending_messages", (("durable", "admission-submit"), ("service", "admission")))] == 40
    assert got[("opsched_consumer_pending_messages", (("durable", "admission-stop"), ("service", "admission")))] == 0
    assert not [key for key in got if key[0] == "opsched_consumer_pending_messages" and ("service", "cost") in key[1]]


def test_refusals_acked_unrecorded_are_counted_by_reason_never_by_requester():
    from collections import Counter

    stats = Stats(unrecorded_reasons=Counter({"malformed_message": 5, "rate_limited": 1}))
    got = samples([fake("admission", stats=stats)])
    assert got[("opsched_refusals_unrecorded_total", (("reason", "malformed_message"), ("service", "admission")))] == 5
    assert got[("opsched_refusals_unrecorded_total", (("reason", "rate_limited"), ("service", "admission")))] == 1
    assert all(dict(labels).keys() <= {"service", "reason"} for name, labels in got
               if name == "opsched_refusals_unrecorded_total")


def test_every_registry_says_what_runs_and_has_the_client_librarys_process_and_platform_collectors():
    from opsched.proto.schema_snapshots import digest
    from opsched.rules.version import version

    got = samples([fake("cost")])
    (info,) = [labels for name, labels in got if name == "opsched_build_info"]
    assert dict(info) == {"version": version() or "unknown", "python_version": platform.python_version(),
                          "wire_schemas": digest()} and got["opsched_build_info", info] == 1
    assert got[("process_resident_memory_bytes", ())] > 0 and ("process_cpu_seconds_total", ()) in got
    assert any(name == "python_info" for name, _ in got)
    assert any(name == "python_gc_collections_total" for name, _ in got)
