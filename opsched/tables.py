"""Plain-text tables for `opsched queues` and `opsched why`."""
from __future__ import annotations

from proto.queries import QueuesAnswer, WhyAnswer


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
        name = q.name + (" *" if q.name == answer.default_queue else "")
        rows.append((name, q.cohort or "-", running, q.pending, quota, borrowed, cost))
    table = grid(("QUEUE", "COHORT", "RUNNING", "PENDING", "USED/QUOTA", "BORROWED", "COST"), rows)
    return f"{table}\n(* default queue; configuration from {answer.source})"


def why_text(answer: WhyAnswer) -> str:
    if not answer.found:
        return f"{answer.op_id}: no such operation"
    head = f"{answer.op_id}: {answer.status} in queue {answer.queue}"
    if answer.position is not None:
        head += f", position {answer.position} of {answer.queued_total}"
    if not answer.reasons:
        return head + ("" if answer.status in ("pending", "queued") else " (not waiting)")
    lines = [f"  {i}. {r.message}  [{r.code}]" for i, r in enumerate(answer.reasons, 1)]
    return "\n".join([head, *lines])
