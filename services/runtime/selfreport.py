"""What a service says of itself on the bus (``proto.health``: ``opsched.query.health.<service>``): the problems its
``/readyz`` reports — what keeps it from progressing (``stalls``), the dependencies it waits for (``waits``), what
of it is not alive (``Service.liveness``) — for clients that reach the bus but not its port (the web view)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from opsched.proto import codec
from opsched.proto.health import HealthAnswer, Problem
from opsched.rules.version import version


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def problems(service: Any) -> list[Problem]:
    found = [Problem(kind="not_alive", what=what, detail=why) for what, why in sorted(service.liveness().items())]
    for dependency, wait in sorted(service.waits.report().items()):
        found.append(Problem(kind="waiting_for", what=dependency, detail=wait["detail"], since=_when(wait["since"]),
                             count=wait["failures"]))
    for what, stall in service.stalls.current(service.clock.now()).items():
        found.append(Problem(kind="not_progressing", what=what, detail=stall.detail, since=stall.since,
                             count=stall.count))
    return found


def answer(service: Any, instance: str) -> bytes:
    role = service.leadership.state if service.leadership is not None else ""
    return codec.encode(HealthAnswer(service=service.name, instance=instance, role=role, problems=problems(service),
                                     version=version()))
