"""Which operations a command is about: ``OpFilter``, the filters of `opsched ops` (and of the bulk commands that
act on a selection). Flags combine with AND; a flag given several times matches any of its values (OR).

- ``--queue/-q NAME``, ``--user/-u NAME`` (who submitted it), ``--project/-p NAME``, ``--batch/-b ID`` (a sweep);
- ``--status/-s STATUS``: a status as `opsched ops` shows it (``proto.lifecycle``: pending, queued, running,
  succeeded, ...), or a group: ``active`` (not ended yet: waiting or running), ``ended`` (succeeded, failed,
  stopped, rejected, skipped, timed_out) or ``all``; an unknown one is refused, naming the known ones;
- ``--label/-l``: ``TAG`` (the op has this tag), ``KEY=VALUE`` (a tag ``KEY=VALUE`` or ``KEY:VALUE``: Polyaxon's
  tags are strings) or ``KEY!=VALUE`` (no such tag);
- ``--since SPAN``: submitted within the last SPAN (``90s``, ``30m``, ``2h``, ``1d``, ``1h30m``)."""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from opsched.proto.lifecycle import SHOWN, TERMINAL_LABELS, Status
from opsched.proto.outputs import OpItem

ENDED = frozenset(TERMINAL_LABELS)
STATUSES = frozenset({s.label for s in Status} | {s.label for s in SHOWN.values()})
GROUPS = {"all": STATUSES, "ended": ENDED, "active": STATUSES - ENDED}
_SPAN = re.compile(r"(\d+)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class SelectionError(ValueError):
    """A filter that cannot be understood: its message says which and why."""


def statuses(values: list[str]) -> frozenset[str]:
    """The status labels ``values`` name (groups expanded), case-insensitively; an unknown one is refused."""
    out: set[str] = set()
    for value in values:
        v = value.strip().lower()
        if v in GROUPS:
            out |= GROUPS[v]
        elif v in STATUSES:
            out.add(v)
        else:
            raise SelectionError(f"unknown status {value!r}; known: {', '.join(sorted(GROUPS))}, "
                                 f"{', '.join(sorted(STATUSES))}")
    return frozenset(out)


def span(text: str) -> timedelta:
    """``90s``, ``30m``, ``2h``, ``1d``, ``1w``, ``1h30m``."""
    t = text.strip().lower()
    parts = _SPAN.findall(t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise SelectionError(f"--since {text!r}: a span like 90s, 30m, 2h, 1d or 1h30m")
    return timedelta(seconds=sum(int(n) * _UNIT_S[u] for n, u in parts))


@dataclass(frozen=True)
class Label:
    key: str
    value: str | None = None  # None: a bare tag
    negated: bool = False

    @classmethod
    def parse(cls, text: str) -> Label:
        if "!=" in text:
            key, value = text.split("!=", 1)
            negated = True
        elif "=" in text:
            (key, value), negated = text.split("=", 1), False
        else:
            key, value, negated = text, None, False
        if not key.strip():
            raise SelectionError(f"--label {text!r}: TAG, KEY=VALUE or KEY!=VALUE")
        return cls(key.strip(), value.strip() if value is not None else None, negated)

    def matches(self, tags: list[str]) -> bool:
        if self.value is None:
            return self.key in tags
        found = f"{self.key}={self.value}" in tags or f"{self.key}:{self.value}" in tags
        return found != self.negated


@dataclass(frozen=True)
class OpFilter:
    queues: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    projects: frozenset[str] = frozenset()
    labels: tuple[Label, ...] = ()
    batches: frozenset[str] = frozenset()
    since: datetime | None = None  # created at or after

    @classmethod
    def from_args(cls, args: argparse.Namespace, now: datetime | None = None) -> OpFilter:
        """The filter the flags of ``add_arguments`` give (``SelectionError`` for one that cannot be read)."""
        since = getattr(args, "since", None)
        return cls(queues=frozenset(getattr(args, "queue", None) or ()),
                   statuses=statuses(getattr(args, "status", None) or []),
                   users=frozenset(getattr(args, "user", None) or ()),
                   projects=frozenset(getattr(args, "project", None) or ()),
                   labels=tuple(Label.parse(v) for v in getattr(args, "label", None) or ()),
                   batches=frozenset(getattr(args, "batch", None) or ()),
                   since=(now or datetime.now(timezone.utc)) - span(since) if since else None)

    def matches(self, item: OpItem) -> bool:
        return ((not self.queues or item.queue in self.queues)
                and (not self.statuses or item.status in self.statuses)
                and (not self.users or item.user in self.users)
                and (not self.projects or item.project in self.projects)
                and all(label.matches(item.tags) for label in self.labels)
                and (not self.batches or item.batch in self.batches)
                and (self.since is None or (item.created_at is not None and item.created_at >= self.since)))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The filter flags (see the module docstring); each may be repeated."""
    from opsched import completion

    completion.queue(p.add_argument("--queue", "-q", action="append", metavar="QUEUE",
                                    help="only ops of this queue (repeatable)"))
    p.add_argument("--status", "-s", action="append", metavar="STATUS",
                   help="only ops with this status, or active/ended/all (repeatable)")
    p.add_argument("--user", "-u", action="append", metavar="USER", help="only ops this user submitted")
    p.add_argument("--project", "-p", action="append", metavar="PROJECT", help="only ops of this project")
    p.add_argument("--label", "-l", action="append", metavar="LABEL",
                   help="TAG, KEY=VALUE (a tag KEY=VALUE or KEY:VALUE) or KEY!=VALUE (repeatable: all must hold)")
    p.add_argument("--batch", "-b", action="append", metavar="BATCH", help="only the ops of this sweep")
    p.add_argument("--since", metavar="SPAN", help="only ops submitted within SPAN (90s, 30m, 2h, 1d)")
