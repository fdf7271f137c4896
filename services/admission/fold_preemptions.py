"""The fold's preemptions in flight: ``nominated`` (preemptor -> victims whose pods are not gone yet) and
``ghosts`` (what gone victims held, kept for their preemptor until it is admitted or gives up)."""
from __future__ import annotations

from proto.events import PreemptRequested
from services.admission.records import Ghost, OpRecord
from services.admission.transitions import Transitions


class PreemptionsInFlight:
    ops: dict[str, OpRecord]
    nominated: dict[str, set[str]]
    ghosts: dict[str, list[Ghost]]
    followers: tuple[Transitions, ...]

    def _preempt_requested(self, op: OpRecord, e: PreemptRequested) -> bool:
        if not op.status.active or op.preempted_by is not None:
            return False
        op.preempted_by = e.preemptor
        if e.preemptor in self.ops:  # a preemptor not held (unknown on the wire, or gone) waits for nothing
            self.nominated.setdefault(e.preemptor, set()).add(op.op_id)
        return True

    def _spent(self) -> bool:
        for f in self.followers:
            f.spent()
        return True

    def _hold(self, preemptor: str, ghost: Ghost) -> None:
        self.ghosts.setdefault(preemptor, []).append(ghost)
        for f in self.followers:
            f.held(ghost, +1)

    def drop_nomination(self, preemptor: str) -> None:
        self.nominated.pop(preemptor, None)
        self.release_ghosts(preemptor)

    def release_ghosts(self, preemptor: str) -> None:
        """Let go of the room held for a preemptor (to evaluate it, or because it gave up)."""
        for ghost in self.ghosts.pop(preemptor, []):
            for f in self.followers:
                f.held(ghost, -1)
