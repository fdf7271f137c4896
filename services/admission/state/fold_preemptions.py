"""The fold's preemptions in flight: ``nominated`` (preemptor -> victims whose pods are not gone yet) and
``ghosts`` (what gone victims held, kept for their preemptor until it is admitted or gives up). It owns both;
the fold (``fold.OpFold``) holds one and announces to its followers what room is held or let go."""
from __future__ import annotations

from opsched.proto.events import PreemptRequested
from opsched.services.admission.model.records import Ghost, OpRecord


class PreemptionsInFlight:
    def __init__(self) -> None:
        self.nominated: dict[str, set[str]] = {}  # preemptor -> victims whose pods are not gone yet
        self.ghosts: dict[str, list[Ghost]] = {}  # preemptor -> what its gone victims held (held for it)

    def requested(self, op: OpRecord, e: PreemptRequested, preemptor_known: bool) -> bool:
        """``op`` is asked to go for ``e.preemptor``; False when it is not active or already a victim."""
        if not op.status.active or op.preempted_by is not None:
            return False
        op.preempted_by = e.preemptor
        if preemptor_known:  # a preemptor not held (unknown on the wire, or gone) waits for nothing
            self.nominated.setdefault(e.preemptor, set()).add(op.op_id)
        return True

    def hold(self, preemptor: str, ghost: Ghost) -> None:
        self.ghosts.setdefault(preemptor, []).append(ghost)

    def release(self, preemptor: str) -> list[Ghost]:
        """Let go of the room held for a preemptor: what it was."""
        return self.ghosts.pop(preemptor, [])

    def drop(self, preemptor: str) -> list[Ghost]:
        """Forget a preemptor's nomination and the room held for it: what that room was."""
        self.nominated.pop(preemptor, None)
        return self.release(preemptor)
