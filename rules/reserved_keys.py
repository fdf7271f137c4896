"""Labels, annotations, volumes and mount paths that opsched writes on an op's pods: a spec that sets one itself is
refused, naming it (it would be overwritten, could fake a release or a trace by the dispatcher, or pass for a
connection's Secret; a mount at a path opsched mounts would make the API server refuse the pod), never silently
dropped. Checked by the CLI before anything is sent and by the dispatcher before it creates a pod."""
from __future__ import annotations

from opsched.proto.spec import CONTEXT_ROOT, OpSpec, all_containers
from opsched.proto.spec_checks import dotted
from opsched.rules.podspec import (
    ANNOTATION_DESCRIPTION,
    ANNOTATION_FLAVORS,
    ANNOTATION_NAME,
    ANNOTATION_PENDING_TIMEOUT,
    ANNOTATION_TTL,
    CONTEXT_VOLUME,
    LABEL_ATTEMPT,
    LABEL_BORROWING,
    LABEL_GANG_SIZE,
    LABEL_OP,
    LABEL_QUEUE,
    LABEL_REPLICA,
    MANAGED_BY,
    RESERVED_VOLUMES,
    WATCHED_ANNOTATIONS,
    under_context,
)

RESERVED_LABELS = (MANAGED_BY, LABEL_OP, LABEL_QUEUE, LABEL_ATTEMPT, LABEL_BORROWING, LABEL_REPLICA, LABEL_GANG_SIZE)
RESERVED_ANNOTATIONS = (ANNOTATION_NAME, ANNOTATION_FLAVORS, ANNOTATION_TTL, ANNOTATION_PENDING_TIMEOUT,
                        ANNOTATION_DESCRIPTION, *WATCHED_ANNOTATIONS)


def problems(spec: OpSpec) -> list[str]:
    """One message per reserved key, volume name or mount path the spec uses (empty: none)."""
    env = spec.environment
    return ([f"environment.labels[{k!r}] is set by opsched on every pod; remove it" for k in RESERVED_LABELS
             if k in env.labels]
            + [f"environment.annotations[{k!r}] is set by opsched; remove it" for k in RESERVED_ANNOTATIONS
               if k in env.annotations]
            + [f"environment.volumes[{i}].name: {v.get('name')!r} is opsched's (its context, init paths and "
               f"connections' Secrets are {CONTEXT_VOLUME!r}, {RESERVED_VOLUMES[1]!r}…, {RESERVED_VOLUMES[2]!r}…, an "
               f"mpijob's hostfile {RESERVED_VOLUMES[3]!r}); "
               "rename it" for i, v in enumerate(env.volumes) if str(v.get("name", "")).startswith(RESERVED_VOLUMES)]
            + _mount_paths(spec))


def _mount_paths(spec: OpSpec) -> list[str]:
    """A pod with init steps or sidecars has opsched's context mounted at ``CONTEXT_ROOT``, and each init path
    outside it: a container may not mount anything there itself."""
    out: list[str] = []
    pods = [((), spec)] + [(("replicas", i), g) for i, g in enumerate(spec.replicas)]
    for at, pod in pods:
        if not pod.init and not pod.sidecars:
            continue
        taken = {CONTEXT_ROOT, *(s.path.rstrip("/") for s in pod.init if s.path and not under_context(s.path))}
        for path, container in all_containers(spec):
            if path[:len(at)] != at or (not at and path[:1] == ("replicas",)):
                continue
            out += [f"{dotted(path)}.volumeMounts[{j}].mountPath: {m.get('mountPath')!r} is where opsched "
                    "mounts the pod's context (or an init step's path); mount elsewhere"
                    for j, m in enumerate(container.volume_mounts) if str(m.get("mountPath", "")).rstrip("/") in taken]
    return out
