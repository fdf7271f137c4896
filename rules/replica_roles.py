"""Replica roles: the one notion every distributed run kind (pytorchjob, tfjob, mpijob, xgbjob, paddlejob, mxjob)
shares, and the pods of an attempt it gives.

An op's pods are its **main pod** (``OpSpec.container``: the pod whose end is the op's end) and its replica groups
(``OpSpec.replicas``, each named for its role: ``worker``, ``ps``, ...). Every pod has a role and an index within it:
the main pod is index 0 of its role (``main_role``: ``OpSpec.main_role``, else its kind's first), a group of another
role holds indices 0..count-1, and a group of the main pod's own role holds 1..count (e.g. a tfjob without a chief:
worker 0 is the main pod, its group the workers 1..n-1). ``KINDS`` says, per run kind, its roles in Polyaxon's order,
which roles may hold the main pod (the first the op has, as each operator's success rule reads it) and whether the
main pod waits for the others to run before it is created (an mpijob's launcher). A plain job is one pod, role
``main``. Admission's quota, the cost estimate, the GPU count and the cache fingerprint count pods through
``proto.pod_resources`` and the spec's groups, which this rule only names: no per-kind code there.
"""
from __future__ import annotations

from dataclasses import dataclass

from opsched.proto.spec import Container, OpSpec, ReplicaGroup

JOB_ROLE = "main"  # a plain job's one pod


@dataclass(frozen=True)
class RunKind:
    """One run kind: its replica roles (Polyaxon's sections, in its order), the roles that may hold the main pod
    (in preference: the first the op has), and whether the main pod starts only once every other pod runs."""

    roles: tuple[str, ...]
    main_roles: tuple[str, ...]
    main_waits: bool = False


KINDS: dict[str, RunKind] = {
    "pytorchjob": RunKind(("master", "worker"), ("master",)),
    # Kubeflow's TFJob succeeds with its chief, else with worker 0 (the default success policy)
    "tfjob": RunKind(("chief", "ps", "worker", "evaluator"), ("chief", "worker")),
    # mpi-operator: the launcher's end is the job's; it starts once the workers run (WaitForWorkersReady)
    "mpijob": RunKind(("launcher", "worker"), ("launcher",), main_waits=True),
    "xgbjob": RunKind(("master", "worker"), ("master",)),
    # PaddleJob succeeds with its master (PS mode), else (collective mode) with its workers: worker 0 here
    "paddlejob": RunKind(("master", "worker"), ("master", "worker")),
    # MXJob succeeds with its scheduler, else (one worker, no server) with that worker
    "mxjob": RunKind(("scheduler", "server", "worker"), ("scheduler", "worker")),
}
DISTRIBUTED = tuple(KINDS)


@dataclass(frozen=True)
class PodRole:
    """One pod of an attempt: its role, its index in the role, and its group (None: the main pod)."""

    role: str
    index: int
    group: ReplicaGroup | None

    @property
    def is_main(self) -> bool:
        return self.group is None

    @property
    def hostname(self) -> str:
        """Its name in the attempt's headless Service (``<role>-<index>``; a DNS label)."""
        return f"{self.role}-{self.index}"


def main_role(spec: OpSpec) -> str:
    """The main pod's role: the spec's, else its kind's first (``main`` for a plain job)."""
    if spec.main_role:
        return spec.main_role
    kind = KINDS.get(spec.run_kind)
    return kind.main_roles[0] if kind is not None else JOB_ROLE


def first_index(group: ReplicaGroup, spec: OpSpec) -> int:
    """A group's first index: 1 when it is of the main pod's role (the main pod is index 0), else 0."""
    return 1 if group.name == main_role(spec) else 0


def pods_of(spec: OpSpec) -> list[PodRole]:
    """Every pod of an attempt: the main pod first, then each group's pods in order."""
    pods = [PodRole(main_role(spec), 0, None)]
    for group in spec.replicas:
        start = first_index(group, spec)
        pods += [PodRole(group.name, start + i, group) for i in range(group.count)]
    return pods


def replica_label(pod: PodRole) -> str:
    """The pod's ``opsched.io/replica`` label: ``main`` for the main pod, else ``<role>-<index>``."""
    return JOB_ROLE if pod.is_main else pod.hostname


def container_of(pod: PodRole, spec: OpSpec) -> Container:
    return spec.container if pod.group is None else pod.group.container


def counts(spec: OpSpec) -> dict[str, int]:
    """Pods per role (the main pod's included), in the order the pods are listed."""
    out: dict[str, int] = {}
    for pod in pods_of(spec):
        out[pod.role] = out.get(pod.role, 0) + 1
    return out


def main_waits(spec: OpSpec) -> bool:
    """Whether the main pod is created only once every other pod of the attempt runs (an mpijob's launcher)."""
    kind = KINDS.get(spec.run_kind)
    return kind is not None and kind.main_waits and len(pods_of(spec)) > 1
