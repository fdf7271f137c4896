"""What the CLI's read commands print with ``--output json|yaml``: one type per command (``OUTPUTS``), each
printed in full by ``opsched.output.full`` (every field, defaults and nulls included, camelCase names). Their JSON
Schemas are checked in under ``proto/schemas/output/<command>.json``. No service sends these; scripts read them,
and the web view's op rows have the same shape (``OpItem``)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from opsched.proto.events import Money, NotificationAttempted, NotificationFailed, event_type
from opsched.proto.history import HistoryEntry
from opsched.proto.queries import CostAnswer, QueuesAnswer, SchedulesAnswer, WhyAnswer
from opsched.proto.spec import Wire


class Endpoint(Wire, kw_only=True):
    """How a running service is reached: its Service's DNS name, its ports, and the port-forward line."""

    host: str
    ports: list[int] = []
    port_forward: str = ""


class OpItem(Wire, kw_only=True):
    """One operation as `opsched ops` knows it: from its events, or from its summary once it left admission's
    memory (then what the summary does not keep is at its default)."""

    op_id: str
    name: str = ""
    queue: str = ""
    project: str = ""
    user: str = ""  # who submitted it
    status: str = "pending"  # a status label (proto.lifecycle)
    attempt: int = 0
    reason: str = ""  # why it is where it is, in full (the table cuts it)
    batch: str = ""  # the sweep it belongs to
    iteration: int | None = None  # its index in its sweep
    params: dict[str, Any] = {}
    trial_params: dict[str, Any] = {}  # the params that differ within its batch ({} outside a sweep)
    tags: list[str] = []
    gpus: int = 0  # whole accelerator devices, all its pods
    accelerators: dict[str, float] = {}  # accelerator resource -> total over its pods (shared GPU memory: GiB)
    node: str = ""  # where it runs or ran (<agent>/<node> on a named agent)
    agent: str = ""  # the agent its attempt was admitted to ("": the default one)
    estimate: Money | None = None
    cost: Money | None = None  # actual: every finished attempt's cost summed
    created_at: datetime | None = None  # submitted
    admitted_at: datetime | None = None
    started_at: datetime | None = None  # running since (its latest attempt)
    ended_at: datetime | None = None
    duration_s: float | None = None  # ended - started, or now - started while it runs
    outputs: dict[str, Any] = {}  # what it succeeded with
    endpoint: Endpoint | None = None  # a running service's
    ignored: list[str] = []  # fields of its file with no effect in opsched
    max_retries: int | None = None
    history: list[str] = []  # the types of its events, in order (empty for an op shown from its summary)


class OpList(Wire, tag_field="type", tag="op_list", kw_only=True):
    items: list[OpItem] = []


class VerdictItem(Wire, kw_only=True):
    """Admission's verdict on one op of a `stop|approve|reject` (``outcome`` ``no_verdict``: none came in time)."""

    op_id: str
    verb: str  # stop, approve or reject
    outcome: str  # the done kind (stopped, approved, rejected), a nothing-to-do or refusal reason, or no_verdict
    message: str = ""
    refused: bool = False
    nothing_to_do: bool = False
    answered: bool = True


class VerdictList(Wire, tag_field="type", tag="verdict_list", kw_only=True):
    """`opsched stop|approve|reject ... -o json|yaml`: a verdict per op, in the order the ops were sent."""

    items: list[VerdictItem] = []


class VersionInfo(Wire, tag_field="type", tag="version", kw_only=True):
    """`opsched version`: the CLI's version, its Python, the digest of the wire contract it speaks (sha256 of
    ``proto/schemas``: two sides with the same digest speak the same messages), and admission's version."""

    client: str
    python: str
    wire_schemas: str
    server: str | None = None  # admission's opsched version (null: it did not answer, or did not tell)


class TokenItem(Wire, kw_only=True):
    """One of the gateway's bearer tokens as `opsched tokens list` shows it: never its secret nor its hash."""

    id: str
    identity: str  # the client user it acts as
    created: datetime
    expires: datetime | None = None
    revoked: datetime | None = None
    rate: float  # requests a second ...
    burst: int   # ... of which this many at once


class TokenList(Wire, tag_field="type", tag="token_list", kw_only=True):
    """`opsched tokens list -o json|yaml`: every token of the file, revoked and expired ones too."""

    items: list[TokenItem] = []


# command -> the type its JSON/YAML output is (the schema snapshot and the contract test walk this)
NOTIFICATION_EVENTS = frozenset({event_type(NotificationAttempted), event_type(NotificationFailed)})


class NotificationsAnswer(Wire, kw_only=True):
    """`opsched notifications OP`: its notifications' attempts and final failures, oldest first — the entries of its
    `why` timeline about notifications (``rules.op_history``; docs/notifications.md)."""

    op_id: str
    found: bool = False
    entries: list[HistoryEntry] = []

    @classmethod
    def of(cls, answer: WhyAnswer) -> NotificationsAnswer:
        return cls(op_id=answer.op_id, found=answer.found,
                   entries=[e for e in answer.history if e.event in NOTIFICATION_EVENTS])


OUTPUTS: dict[str, type] = {
    "ops": OpList,
    "why": WhyAnswer,
    "notifications": NotificationsAnswer,
    "queues": QueuesAnswer,
    "cost": CostAnswer,
    "schedules": SchedulesAnswer,
    "version": VersionInfo,
    "stop": VerdictList,
    "approve": VerdictList,
    "reject": VerdictList,
    "tokens": TokenList,
}
