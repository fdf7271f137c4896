"""Plain-text tables for `opsched queues`, `opsched why`, `opsched cost` and `opsched schedules`."""
from __future__ import annotations

from datetime import datetime, timezone

from opsched.proto.history import HistoryEntry
from opsched.proto.outputs import NotificationsAnswer, TokenList
from opsched.proto.queries import CostAnswer, QueuesAnswer, QueueStatus, SchedulesAnswer, ScheduleStatus, WhyAnswer


def grid(headers: tuple[str, ...], rows: list[tuple]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip() for line in [headers, *rows])


def queues_table(answer: QueuesAnswer) -> str:
    rows = []
    for q in answer.queues:
        quota = ", ".join(f"{u.resource}[{u.flavor}] {u.used:g}/{u.nominal:g}" for u in q.usage) or "-"
        borrowed = ", ".join(f"{u.resource}[{u.flavor}] {u.borrowed:g}" for u in q.usage if u.borrowed) or "-"
        cost = f"{q.cost_used:.2f}/{q.cost_quota:.2f}" if q.cost_quota is not None else f"{q.cost_used:.2f}"
        running = f"{q.running}/{q.concurrency if q.concurrency is not None else '∞'}"
        if q.services or q.max_services is not None:  # a queue that runs services, or caps them
            running += f" ({q.services}/{q.max_services if q.max_services is not None else '∞'} services)"
        name = q.name + (" *" if q.name == answer.default_queue else "")
        rows.append((name, stop_state(q), q.cohort or "-", running, q.pending, quota, borrowed, cost))
    table = grid(("QUEUE", "STATE", "COHORT", "RUNNING", "PENDING", "USED/QUOTA", "BORROWED", "COST"), rows)
    stops = [f"{q.name} {stop_state(q)} by {q.stopped_by or '?'} since {q.stopped_at:%Y-%m-%d %H:%M:%S}"
             + (f": {q.stop_comment}" if q.stop_comment else "") for q in answer.queues if q.stopped_at is not None]
    stops += [f"{name} held but not configured (it comes back held if added again; resume clears it)"
              for name in answer.stopped_unconfigured]
    held = "".join(f"\n{line}" for line in stops) + (
        "\n(held/drained: nothing of it is admitted until `opsched queues resume QUEUE`)" if stops else "")
    return (f"{table}\n(* default queue; configuration from {answer.source})" + held + cohorts_text(answer)
            + pools_text(answer) + fragmentation_text(answer))


def pools_text(answer: QueuesAnswer) -> str:
    """The flavors' node pools: nodes (leaving), bounds, the new nodes admitted ops wait for and since when."""
    if not answer.pools:
        return ""
    rows = [(f"{p.agent + '/' if p.agent else ''}{p.pool}", p.flavor, p.nodes, p.leaving, f"{p.min_nodes}/{p.max_nodes}",
             p.awaited, f"{p.oldest_since:%H:%M:%S}" if p.oldest_since else "-",
             f"{p.budget_blocked_until:%Y-%m-%d %H:%M}" if p.budget_blocked_until else "-") for p in answer.pools]
    return "\n\n" + grid(("POOL", "FLAVOR", "NODES", "LEAVING", "MIN/MAX", "AWAITED", "OLDEST WAIT",
                          "NO NEW NODES UNTIL"), rows) + (
        "\n(awaited: new nodes admitted ops wait for; leaving: nodes an autoscaler is removing, counted in NODES)")


def stop_state(q: QueueStatus) -> str:
    """active, held, draining N (a drained queue still running N ops, asked to go) or drained."""
    if q.stop_policy == "Hold":
        return "held"
    if q.stop_policy == "HoldAndDrain":
        return f"draining {q.draining}" if q.draining else "drained"
    return "active"


def cohorts_text(answer: QueuesAnswer) -> str:
    """Declared (nested) cohorts: parent, usage against the subtree quota, what each borrows from its parent."""
    if not answer.cohorts:
        return ""
    rows = []
    for c in answer.cohorts:
        used = ", ".join(f"{u.resource}[{u.flavor}] {u.used:g}/{u.subtree:g}" for u in c.usage) or "-"
        borrowed = ", ".join(f"{u.resource}[{u.flavor}] {u.borrowed:g}" for u in c.usage if u.borrowed) or "-"
        rows.append((c.name, c.parent or "-", used, borrowed))
    return "\n\n" + grid(("COHORT", "PARENT", "USED/SUBTREE", "BORROWED"), rows) + (
        "\n(subtree: the cohort's own quota plus what the queues and cohorts under it lend it)")


def fragmentation_text(answer: QueuesAnswer) -> str:
    """Free accelerators per flavor, and how many are stranded on nodes too full for the largest waiting pod."""
    if not answer.fragmentation:
        return ""
    rows = [(f"{f.agent + '/' if f.agent else ''}{f.resource}[{f.flavor or '-'}]", f.nodes, f"{f.free:g}", f"{f.stranded:g}",
             f"{f.largest_waiting:g}" if f.largest_waiting else "-") for f in answer.fragmentation]
    return "\n\n" + grid(("[AGENT/]ACCELERATOR[FLAVOR]", "NODES", "FREE", "STRANDED", "LARGEST WAITING POD"), rows) + (
        "\n(stranded: free on nodes with less free than the largest waiting pod of that flavor asks)")


def notifications_text(answer: NotificationsAnswer) -> str:
    """One line per notification attempt or final failure: when, the connection, the outcome."""
    if not answer.found:
        return f"{answer.op_id}: no such operation"
    if not answer.entries:
        return f"{answer.op_id}: no notification sent"
    rows = [(e.at.strftime("%Y-%m-%d %H:%M:%S"), e.by, e.reason, e.message) for e in answer.entries]
    return grid(("AT", "CONNECTION", "OUTCOME", "DETAIL"), rows)


def why_text(answer: WhyAnswer) -> str:
    """Its status, queue and name, why it waits (or how it ended), then its history grouped by attempt."""
    if not answer.found:
        return f"{answer.op_id}: no such operation"
    named = f"{answer.op_id} ({answer.name})" if answer.name else answer.op_id
    head = f"{named}: {answer.status}" + (f" in queue {answer.queue}" if answer.queue else "")
    note = [f"  ignored (no effect in opsched): {', '.join(answer.ignored)}"] if answer.ignored else []
    if answer.end_reason or answer.end_message:  # it ended: how
        ended = ": ".join(p for p in (answer.end_reason, answer.end_message) if p)
        return "\n".join([f"{head} (ended: {ended})", *note, *history_lines(answer)])
    if answer.position is not None:
        head += f", position {answer.position} of {answer.queued_total}"
    if not answer.reasons:
        waiting = answer.status in ("pending", "queued") or answer.history
        return "\n".join([head + ("" if waiting else " (not waiting)"), *note, *history_lines(answer)])
    lines = [f"  {i}. {r.message}  [{r.code}]" for i, r in enumerate(answer.reasons, 1)]
    return "\n".join([head, *lines, *note, *history_lines(answer)])


def history_lines(answer: WhyAnswer) -> list[str]:
    """``answer.history`` for people: grouped by attempt, a UTC time per entry (its date too once the day changed)."""
    if not answer.history:
        return []
    day = answer.history[0].at.astimezone(timezone.utc).date()
    out: list[str] = [f"  history (UTC, from {day.isoformat()}):"]
    attempt: int | None = None
    for i, entry in enumerate(answer.history):
        if entry.attempt != attempt:
            attempt = entry.attempt
            out.append(f"    attempt {attempt}")
        when = entry.at.astimezone(timezone.utc)
        stamp = when.strftime("%H:%M:%S") if when.date() == day else when.strftime("%Y-%m-%d %H:%M:%S")
        out.append(f"      {stamp}  {entry_text(entry)}")
        if i == 0 and answer.history_dropped:
            out.append(f"      … {answer.history_dropped} entries dropped (the first and the latest are kept)")
    return out


_VERBS = {"preempt_requested": "preemption requested", "failure_final": "failed for good",
          "cost_recorded": "charged", "cache_hit": "cache hit", "stop_requested": "stop requested",
          "on_hold": "on hold"}
_BY = {"cache_hit": "of", "submitted": "by"}  # how an entry names who did it (else "by")
_QUEUE_OF = ("submitted", "admitted", "rejected")  # entries whose queue is said


def entry_text(e: HistoryEntry) -> str:
    """One history entry in words: ``preempted by op-9 (reclaim): <its message>``; an entry with no ``by``
    leaves it out (``preempted (queue_drained): ...``); an event type not known here is named as it is."""
    admitted = e.event == "admitted"
    flavors = ", ".join(f"{r}={f}" for r, f in sorted(e.flavors.items()))
    words = [
        (True, _VERBS.get(e.event, e.event.replace("_", " "))),
        (e.amount is not None and not admitted, f"{e.amount or 0:.2f}"),
        (bool(e.queue) and e.event in _QUEUE_OF, f"{'in' if e.event == 'rejected' else 'to'} {e.queue}"),
        (bool(flavors), f"({flavors})"),
        (e.amount is not None and admitted, f"est {e.amount or 0:.2f}"),
        (bool(e.node), f"{'via agent' if admitted else 'on'} {e.node}"),
        (bool(e.pool), f"at pool {e.pool}'s prices"),
        (bool(e.by), f"{_BY.get(e.event, 'by')} {e.by}"),
        (bool(e.reason), f"({e.reason})"),
    ]
    text = " ".join(word for shown, word in words if shown)
    text += f": {e.message}" if e.message else ""
    return text + (f"; back in its queue after {e.retry_after_s:g}s" if e.retry_after_s else "")


def cost_text(answer: CostAnswer) -> str:
    cur = answer.currency
    spend = grid(("SCOPE", "NAME", f"TODAY {cur}", f"WEEK {cur}", f"MONTH {cur}", "GPU-H TODAY", "GPU-H MONTH"),
                 [(s.scope, s.name, f"{s.day:.2f}", f"{s.week:.2f}", f"{s.month:.2f}", f"{s.gpu_hours_day:.2f}",
                   f"{s.gpu_hours_month:.2f}") for s in answer.spend]) if answer.spend else "no spend recorded yet"
    lines = [spend, f"burn rate: {answer.burn_rate_per_hour:.2f} {cur}/h (last hour)"]
    if answer.budgets:
        rows = [(b.scope, b.name, b.window, _limit(b.spent_money, b.money, b.remaining_money, cur),
                 _limit(b.spent_gpu_hours, b.gpu_hours, b.remaining_gpu_hours, "GPU-h"),
                 b.resets_at.isoformat() if b.resets_at else "-") for b in answer.budgets]
        lines += ["", grid(("SCOPE", "NAME", "WINDOW", "MONEY SPENT/LIMIT (LEFT)", "GPU-H SPENT/LIMIT (LEFT)",
                            "RESETS"), rows)]
    if answer.pools:
        lines += ["", pools_grid(answer)]
    return "\n".join(lines)


def pools_grid(answer: CostAnswer) -> str:
    """What each node pool's nodes cost (charged nodes and the open ones so far): today, split into busy (held by
    op pods), stranded (free beside them) and idle (running nothing); the month and its node-hours."""
    rows = [(p.pool or "-", p.agent or "-", str(p.nodes), f"{p.day.money:.2f}", f"{p.day.busy:.2f}",
             f"{p.day.stranded:.2f}", f"{p.day.idle:.2f}", _share(p.day.idle, p.day.money), f"{p.month.money:.2f}",
             f"{p.month.node_hours:.1f}") for p in answer.pools]
    return grid(("POOL", "AGENT", "NODES", f"TODAY {answer.currency}", "BUSY", "STRANDED", "IDLE", "IDLE%",
                 f"MONTH {answer.currency}", "NODE-HOURS(M)"), rows)


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "-"


def _limit(spent: float, limit: float | None, left: float | None, unit: str) -> str:
    if limit is None:
        return "-"
    return f"{spent:.2f}/{limit:.2f} {unit} ({left:.2f} left)"


def _ago(at: datetime, now: datetime) -> str:
    from opsched.view import span_text

    seconds = (now - at).total_seconds()
    return f"{span_text(seconds)} ago" if seconds >= 0 else f"in {span_text(-seconds)}"


def _when(s: ScheduleStatus) -> str:
    if s.kind == "cron":
        return s.cron or "-"
    if s.kind == "interval":
        from opsched.view import span_text

        return f"every {span_text(s.frequency_s or 0)}"
    return s.start_at.isoformat() if s.start_at else "-"


def schedules_table(answer: SchedulesAnswer, now: datetime | None = None) -> str:
    """One line per schedule: when it runs, its state (and why), its next run and its last runs."""
    if not answer.schedules:
        return "no schedules"
    now = now or datetime.now(timezone.utc)
    rows = []
    for s in answer.schedules:
        state = s.state + (f" ({s.reason})" if s.reason else "") + (f" (on {s.waiting_for})" if s.waiting_for else "")
        runs = f"{s.runs}" + (f"/{s.max_runs}" if s.max_runs is not None else "")
        last = ", ".join(f"#{r.run} {r.status or '?'} {_ago(r.fired_at, now)}" for r in reversed(s.last_runs[-3:]))
        rows.append((s.schedule_id, s.name or "?", s.kind or "-", _when(s), state, runs,
                     _ago(s.next_run_at, now) if s.next_run_at else "-", last or "-"))
    return grid(("SCHEDULE", "NAME", "KIND", "WHEN", "STATE", "RUNS", "NEXT RUN", "LAST RUNS"), rows)


def tokens_table(listed: TokenList) -> str:
    """`opsched tokens list`: one row a token, its state (active, expired at ..., revoked at ...)."""
    now = datetime.now(timezone.utc)

    def state(expires: datetime | None, revoked: datetime | None) -> str:
        if revoked:
            return f"revoked {revoked:%Y-%m-%d %H:%M}"
        if expires and expires <= now:
            return f"expired {expires:%Y-%m-%d %H:%M}"
        return f"until {expires:%Y-%m-%d %H:%M}" if expires else "active"

    rows = [(t.id, t.identity, f"{t.created:%Y-%m-%d %H:%M}", state(t.expires, t.revoked), f"{t.rate:g}/s", t.burst)
            for t in listed.items]
    return grid(("ID", "IDENTITY", "CREATED", "STATE", "RATE", "BURST"), rows) if rows else "no tokens"
