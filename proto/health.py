"""A service's health over the bus (``opsched.query.health.<service>``, request/reply, one replica answers): what
its ``/readyz`` says, for clients that reach the bus but not the service's port — the web view names a service
that cannot make progress (a publish the NATS server refused, a cycle failing again and again), one waiting for a
dependency, one not alive."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from opsched.proto.spec import Wire

ProblemKind = Literal["not_progressing", "waiting_for", "not_alive"]


class Problem(Wire, kw_only=True):
    kind: ProblemKind
    what: str  # "publish ops.succeeded.op-1", "cycle", "kubernetes", "dispatcher-admitted", ...
    detail: str = ""
    since: datetime | None = None
    count: int = 0  # refusals or failures so far (not_progressing, waiting_for)


class HealthRequest(Wire, tag_field="type", tag="health_request", kw_only=True):
    pass


class HealthAnswer(Wire, tag_field="type", tag="health_answer", kw_only=True):
    service: str
    instance: str = ""  # which replica answered
    role: str = ""  # "leader" or "standby" for a service one instance leads; "" otherwise
    problems: list[Problem] = []  # none: alive, ready and progressing
    version: str = ""  # the opsched version it runs ("": not told)
