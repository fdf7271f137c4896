"""Run one or more services in this process: one bus connection each, SIGTERM drains, health and metrics
endpoint."""
from __future__ import annotations

import argparse
import asyncio
import functools
import signal
from collections.abc import Awaitable, Callable, Sequence

from opsched.bus import logging as oplog
from opsched.bus import tracing
from opsched.bus.bus import Bus
from opsched.bus.connecting import server_urls
from opsched.bus.credentials import of_settings
from opsched.services.runtime import eventloop, metrics
from opsched.services.runtime.health import HealthServer
from opsched.services.runtime.service import Service
from opsched.services.runtime.settings import Settings

Connect = Callable[[str, str], Awaitable[Bus]]  # (url, connection name) -> a connected bus


async def serve(services: Sequence[Service], settings: Settings, stop: asyncio.Event | None = None,
                connect: Connect | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or ``stop``), then drain: finish in-hand messages and close.
    ``connect`` opens each service's bus connection (default ``Bus.connect``; tests pass an in-memory one)."""
    stop = stop or asyncio.Event()
    _install_signals(stop)
    connect = connect or functools.partial(Bus.connect, replicas=settings.stream_replicas,
                                           credentials=of_settings(settings),
                                           tls_ca_file=settings.nats_ca_file)
    buses = [await connect(settings.nats_url, f"opsched-{s.name}") for s in services]
    health = None
    try:
        if settings.health_port is not None:
            registry = metrics.registry_of(services)
            health = HealthServer(lambda: _report(services, buses), settings.health_port, settings.health_host,
                                  metrics=lambda: metrics.exposition(registry))
            port = await health.start()  # a port taken: the buses are closed below, the error goes to the caller
            oplog.get("runtime").info("health_listening", port=port)
        await asyncio.gather(*(s.run(b, stop) for s, b in zip(services, buses)))
    finally:
        if health:
            await health.stop()
        for bus in buses:
            await bus.close()


def _install_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread: the caller owns ``stop``


def _report(services: Sequence[Service], buses: Sequence[Bus]) -> dict:
    return report(services, [b.connected for b in buses], [b.closed for b in buses])


def report(services: Sequence[Service], connected: Sequence[bool], closed: Sequence[bool] = ()) -> dict:
    """What /healthz and /readyz answer: connected (to NATS now), ``nats_closed`` (a connection that gave up
    reconnecting: only a restart helps), ready (consumers bound), ``waiting_for``: per
    service, each dependency it cannot reach now (since when, the last error, failures so far),
    ``not_alive``: per service, what of it is dead or stuck (``Service.liveness``: a stuck handler loop, a
    dead watch thread, ...), ``not_progressing``: per service, what keeps it from progressing although alive (a
    publish the server refused, a cycle that keeps failing: ``stalls``), and the ``role`` of a service that one instance leads (``leader`` or
    ``standby``: a standby is ready too)."""
    liveness = {s.name: s.liveness() for s in services}
    return {
        "connected": all(connected),
        "nats_closed": any(closed),
        "ready": all(s.ready.is_set() for s in services),
        "waiting_for": {s.name: s.waits.report() for s in services if s.waits},
        "not_alive": {name: problems for name, problems in liveness.items() if problems},
        "not_progressing": {s.name: stalled for s in services if (stalled := s.stalls.report(s.clock.now()))},
        "services": {s.name: vars(s.stats) for s in services},
        "role": {s.name: s.leadership.state for s in services if s.leadership is not None},
    }


def main(service_class: Callable[[Settings], Service], argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m opsched.services.<name>``: ``main(Admission)`` serves one instance. It takes no
    arguments (its settings are its environment): ``--help`` lists them; anything else is refused, never ignored."""
    arguments(getattr(service_class, "name", "service")).parse_args(argv)
    settings = Settings()
    try:
        server_urls(settings.nats_url)  # a URL opsched cannot connect with (ws://): named, before anything starts
    except ValueError as exc:
        raise SystemExit(f"NATS_URL: {exc}") from None
    oplog.configure(settings.log_format, settings.log_level)
    tracing.configure_or_exit()  # before the service is built: it takes its tracer then (None: off)
    try:
        eventloop.run(serve([service_class(settings)], settings), settings.event_loop)
    finally:
        tracing.shutdown()  # the spans still buffered are exported


def arguments(name: str) -> argparse.ArgumentParser:
    """``python -m opsched.services.<name> --help``: the settings, each an environment variable, with its default."""
    lines = []
    for variable, field in Settings.variables():
        default = "" if field.is_required() or field.default in (None, "", [], {}) else f" (default {field.default})"
        lines.append(f"  {variable}{default}\n      {field.description or ''}")
    return argparse.ArgumentParser(
        prog=f"python -m opsched.services.{name}", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"opsched's {name} service: it serves until SIGTERM or SIGINT, then drains. It takes no "
                    "arguments: its settings are environment variables (docs/deploying.md).",
        epilog="environment:\n" + "\n".join(lines))
