"""Labels and annotations that opsched writes on an op's pods: a spec that sets one itself is refused, naming
the key (it would be overwritten, or could fake a release or a trace by the dispatcher), never silently
dropped. Checked by the CLI before anything is sent and by the dispatcher before it creates a pod."""
from __future__ import annotations

from opsched.proto.spec import OpSpec
from opsched.rules.podspec import (
    ANNOTATION_DESCRIPTION,
    ANNOTATION_FLAVORS,
    ANNOTATION_NAME,
    ANNOTATION_PENDING_TIMEOUT,
    ANNOTATION_TTL,
    LABEL_ATTEMPT,
    LABEL_BORROWING,
    LABEL_GANG_SIZE,
    LABEL_OP,
    LABEL_QUEUE,
    LABEL_REPLICA,
    MANAGED_BY,
    WATCHED_ANNOTATIONS,
)

RESERVED_LABELS = (MANAGED_BY, LABEL_OP, LABEL_QUEUE, LABEL_ATTEMPT, LABEL_BORROWING, LABEL_REPLICA, LABEL_GANG_SIZE)
RESERVED_ANNOTATIONS = (ANNOTATION_NAME, ANNOTATION_FLAVORS, ANNOTATION_TTL, ANNOTATION_PENDING_TIMEOUT,
                        ANNOTATION_DESCRIPTION, *WATCHED_ANNOTATIONS)


def problems(spec: OpSpec) -> list[str]:
    """One message per reserved key the spec sets (empty: none)."""
    env = spec.environment
    return ([f"environment.labels[{k!r}] is set by opsched on every pod; remove it" for k in RESERVED_LABELS
             if k in env.labels]
            + [f"environment.annotations[{k!r}] is set by opsched; remove it" for k in RESERVED_ANNOTATIONS
               if k in env.annotations])
