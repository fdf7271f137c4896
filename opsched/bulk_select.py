"""Which ops a bulk `opsched stop|approve|reject` acts on: the ids typed, and those a selection picks.

``select(view, verb, ids, batch, queue, all_)`` accepts:

- explicit ids (``ids``): passed on as typed, in order, without judging them (admission does, per op: an unknown
  or ended op gets its own refusal);
- ``batch`` (a sweep's batch id, as ``opsched submit`` printed it) and/or ``queue`` with ``all_``: the ops of the
  batch and/or of the queue that the verb can act on now: ``approve`` those waiting (pending or on hold) and not
  yet approved (a sweep approved right after its submit, before its gates cleared, is covered); ``reject`` those
  on hold; ``stop`` those not ended. Both given: the ops in both (they intersect). In submit order.

``queue`` without ``all_`` is refused (``SelectionError``): acting on a whole queue is asked for explicitly; so
is a call that names no ops at all (no ids, no batch, no queue), and a batch no op belongs to. The batch and queue
are matched by ``opsched.selection.OpFilter``, the filter of `opsched ops` (one rule for which ops a flag names);
this adds which of them the verb can act on now."""
from __future__ import annotations

from collections.abc import Sequence

from opsched.selection import OpFilter, SelectionError
from opsched.view import OpRow, OpsView, item

VERBS = ("stop", "approve", "reject")


__all__ = ["VERBS", "SelectionError", "acts_on", "check_flags", "select"]


def acts_on(verb: str, row: OpRow) -> bool:
    """Can ``verb`` act on ``row``'s op now (what a selection picks)?"""
    if verb == "approve":
        return row.status in ("pending", "on_hold") and "approved" not in row.history
    if verb == "reject":
        return row.status == "on_hold"
    if verb == "stop":
        return not row.terminal
    raise ValueError(f"unknown verb {verb!r}; verbs: {', '.join(VERBS)}")


def check_flags(verb: str, ids: Sequence[str] = (), batch: str | None = None, queue: str | None = None,
                all_: bool = False) -> None:
    """``SelectionError`` for flags that do not say which ops (checked before anything is read)."""
    if queue and not all_:
        raise SelectionError(f"--queue {queue} acts on every op of the queue that {verb} can act on: add --all to "
                             f"say so")
    if all_ and not queue:
        raise SelectionError("--all needs --queue QUEUE (every op of that queue)")
    if not ids and not batch and not queue:
        raise SelectionError("which ops? give op ids, --batch BATCH or --queue QUEUE --all")


def select(view: OpsView | None, verb: str, ids: Sequence[str] = (), batch: str | None = None,
           queue: str | None = None, all_: bool = False) -> list[str]:
    """The op ids to send, explicit ids first, then the selection's (each once); ``SelectionError`` for flags that
    do not say which ops (``check_flags``), or a batch no op belongs to. ``view`` is read only for a batch or
    queue."""
    check_flags(verb, ids, batch, queue, all_)
    chosen = list(dict.fromkeys(ids))
    if batch or queue:
        assert view is not None, "a selection by batch or queue reads the ops"
        if batch and not any(r.batch == batch for r in view.rows.values()):
            raise SelectionError(f"no op of batch {batch!r} (a sweep's batch id, as `opsched submit` printed it)")
        named = OpFilter(queues=frozenset({queue} if queue else ()), batches=frozenset({batch} if batch else ()))
        rows = (r for r in view.rows.values() if named.matches(item(r)))
        chosen += [r.op_id for r in rows if acts_on(verb, r) and r.op_id not in chosen]
    return chosen
