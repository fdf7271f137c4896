"""Plain-text tables for `opsched queues`, `opsched why` and `opsched cost`."""
from __future__ import annotations

from opsched.proto.queries import CostAnswer, QueuesAnswer, QueueStatus, WhyAnswer


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
    return f"{table}\n(* default queue; configuration from {answer.source})" + held + fragmentation_text(answer)


def stop_state(q: QueueStatus) -> str:
    """active, held, draining N (a drained queue still running N ops, asked to go) or drained."""
    if q.stop_policy == "Hold":
        return "held"
    if q.stop_policy == "HoldAndDrain":
        return f"draining {q.draining}" if q.draining else "drained"
    return "active"


def fragmentation_text(answer: QueuesAnswer) -> str:
    """Free accelerators per flavor, and how many are stranded on nodes too full for the largest waiting pod."""
    if not answer.fragmentation:
        return ""
    rows = [(f"{f.agent + '/' if f.agent else ''}{f.resource}[{f.flavor or '-'}]", f.nodes, f"{f.free:g}", f"{f.stranded:g}",
             f"{f.largest_waiting:g}" if f.largest_waiting else "-") for f in answer.fragmentation]
    return "\n\n" + grid(("[AGENT/]ACCELERATOR[FLAVOR]", "NODES", "FREE", "STRANDED", "LARGEST WAITING POD"), rows) + (
        "\n(stranded: free on nodes with less free than the largest waiting pod of that flavor asks)")


def why_text(answer: WhyAnswer) -> str:
    if not answer.found:
        return f"{answer.op_id}: no such operation"
    head = f"{answer.op_id}: {answer.status}" + (f" in queue {answer.queue}" if answer.queue else "")
    if answer.end_reason or answer.end_message:  # it ended: how
        ended = ": ".join(p for p in (answer.end_reason, answer.end_message) if p)
        return "\n".join([f"{head} (ended: {ended})",
                          *([f"  ignored (no effect in opsched): {', '.join(answer.ignored)}"] if answer.ignored
                            else [])])
    if answer.position is not None:
        head += f", position {answer.position} of {answer.queued_total}"
    note = [f"  ignored (no effect in opsched): {', '.join(answer.ignored)}"] if answer.ignored else []
    if not answer.reasons:
        return "\n".join([head + ("" if answer.status in ("pending", "queued") else " (not waiting)"), *note])
    lines = [f"  {i}. {r.message}  [{r.code}]" for i, r in enumerate(answer.reasons, 1)]
    return "\n".join([head, *lines, *note])


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
    return "\n".join(lines)


def _limit(spent: float, limit: float | None, left: float | None, unit: str) -> str:
    if limit is None:
        return "-"
    return f"{spent:.2f}/{limit:.2f} {unit} ({left:.2f} left)"
