"""Build the ``proto.spec.OpSpec`` of a validated component or operation.

  * Precedence: ``overrides`` > the operation's fields, which patch its component's with the operation's
    ``patchStrategy`` (default post_merge: the operation's value wins, ``termination`` and ``cache`` merge field by
    field, ``tags`` and ``hooks`` are the component's then the operation's others; ``patching``), as Polyaxon
    compiles an operation. ``name`` falls back to the file's stem.
  * The run section gives the container, the environment and the replica groups: ``run.volumes``
    is merged in before ``run.environment.volumes``; a distributed run's main pod's container is
    ``OpSpec.container`` and each replica section a ``ReplicaGroup`` named for its role (see ``models_run``). A pod's
    ``init``, ``sidecars`` and ``connections`` (a job's run, a pytorchjob's master) are the OpSpec's;
    a worker section's, its group's (``models_init``).
  * A service's ``ports`` and ``replicas`` are ``OpSpec.service``; ``termination.culling`` is refused on any other
    run kind.
  * A sweep's ``Trial`` adds its params and gives the op its ``iteration`` and the name
    ``<name>-<iteration>`` (``rules.trial_names``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from pydantic import BaseModel

from opsched.polyaxonfile.errors import Loc, Problem, Problems
from opsched.polyaxonfile.fields import split_queue, valid_name
from opsched.polyaxonfile.hashing import component_hash
from opsched.polyaxonfile.models_container import ContainerModel
from opsched.polyaxonfile.models_init import init_steps, sidecars_of
from opsched.polyaxonfile.models_operation import (
    ComponentModel,
    HookModel,
    OperationModel,
    OverridesModel,
)
from opsched.polyaxonfile.models_run import JobRunModel, KFReplicaModel, RunModel, ServiceRunModel, check_run, main_role
from opsched.polyaxonfile.params import io_and_params
from opsched.polyaxonfile.patching import DEFAULT_STRATEGY, Section, patch_value
from opsched.polyaxonfile.templates import hook_problems, template_problems
from opsched.polyaxonfile.warned import warned_fields
from opsched.proto.spec import (
    SERVICE_KIND,
    Cache,
    Container,
    Environment,
    Hook,
    Notification,
    OpSpec,
    ReplicaGroup,
    ServiceSpec,
    Termination,
)
from opsched.rules.replica_roles import KINDS
from opsched.rules.trial_names import trial_name


@dataclass(frozen=True)
class Trial:
    """One trial of a sweep: its index, how many trials the batch has, its params and where each was written."""

    iteration: int
    count: int
    params: dict[str, Any]
    where: dict[str, Loc]


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _merged(struct: type, comp: BaseModel | None, op: BaseModel | None, strategy: str) -> Any:
    """A section of the component patched field by field by the operation's."""
    data = [part.model_dump(by_alias=True, exclude_none=True) if part is not None else None for part in (comp, op)]
    return msgspec.convert(patch_value(data[0], data[1], strategy, Section()) or {}, struct)


def strategy_of(op: OperationModel | None) -> str:
    return op.patch_strategy if op is not None and op.patch_strategy is not None else DEFAULT_STRATEGY


def hooks_of(op: OperationModel | None, comp: ComponentModel, base: Loc) -> list[tuple[HookModel, Loc]]:
    """The hooks that run, each with where it was written: the component's patched by the operation's."""
    written = [*((h, base + ("hooks", i)) for i, h in enumerate(comp.hooks or [])),
               *((h, ("hooks", i)) for i, h in enumerate(op.hooks or [] if op is not None else []))]
    where = {id(hook): at for hook, at in written}
    chosen = patch_value(comp.hooks, op.hooks if op is not None else None, strategy_of(op)) or []
    return [(hook, where[id(hook)]) for hook in chosen]


def _environment(run: JobRunModel) -> Environment:
    data = run.environment.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
    data["volumes"] = [*run.volumes, *data.get("volumes", [])]
    return msgspec.convert(data, Environment)


def _container(model: ContainerModel) -> Container:
    return msgspec.convert(model.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True), Container)


def _pod(section: JobRunModel | KFReplicaModel) -> dict[str, Any]:
    """A pod's init steps, sidecars and connections (``models_init``), as OpSpec and ReplicaGroup name them."""
    return {"init": init_steps(section.init), "sidecars": sidecars_of(section.sidecars),
            "connections": list(section.connections)}


def _run_parts(run: RunModel) -> tuple[Container, Environment, list[ReplicaGroup], dict[str, Any]]:
    """The main container, the environment, the replica groups of a validated run, and the main pod's init steps,
    sidecars and connections. A distributed run's main pod is pod 0 of its main role (``models_run.main_role``);
    each section is a group named for its role, the main role's holding its pods after pod 0 (if any)."""
    if isinstance(run, JobRunModel):
        return _container(run.container), _environment(run), [], _pod(run)
    role = main_role(run)
    sections = run.sections()
    assert role is not None  # check_run refused a run without one
    main = sections[role]
    replicas = []
    for name, section in sections.items():
        count = _first(section.replicas, 1) - (1 if name == role else 0)
        if count >= 1:
            replicas.append(ReplicaGroup(name=name, count=count, container=_container(section.container),
                                         restart_policy=section.restart_policy(), **_pod(section)))
    # Polyaxon puts environment in each replica; opsched honours only its restartPolicy (check_run)
    return _container(main.container), Environment(restart_policy=main.restart_policy()), replicas, _pod(main)


def _shape(run: RunModel) -> dict[str, Any]:
    """What of a distributed run's own fields its component hash counts (only when set: no other hash changes)."""
    fields = _kind_fields(run)
    return {"mainRole": fields.get("main_role"), "slotsPerWorker": fields.get("slots_per_worker")}


def _kind_fields(run: RunModel) -> dict[str, Any]:
    """What a distributed run sets besides its pods: its cleanPodPolicy, its main pod's role when not its kind's
    first, an mpijob's slots per worker."""
    if isinstance(run, JobRunModel):
        return {}
    role = main_role(run)
    return {"clean_pod_policy": run.clean_pod_policy,
            "main_role": role if role != KINDS[run.kind].main_roles[0] else None,
            "slots_per_worker": getattr(run, "slots_per_worker", None)}


def build_spec(model: ComponentModel | OperationModel, extra: OverridesModel, fallback: str,
               trial: Trial | None = None) -> OpSpec:
    """The OpSpec of a validated model, or of one ``trial`` of a sweep. Its templates are rendered
    once with stand-in globals, so one that cannot render is refused here."""
    op = model if isinstance(model, OperationModel) else None
    comp = model.component if isinstance(model, OperationModel) else model
    base: Loc = ("component",) if op else ()
    problems = check_run(comp.run, base + ("run",)) + _culling_problems(op, comp, base)
    swept, swept_at = (trial.params, trial.where) if trial else (None, None)
    params, inputs, outputs, to_env = io_and_params(op, comp, extra, base, problems, swept, swept_at)
    if problems:
        raise Problems(problems)
    try:
        spec = _spec(op, comp, extra, fallback, (params, inputs, outputs, to_env), trial)
    except ValueError as exc:  # the contract's refusal of what no check above caught: said, never a crash
        raise Problems([((), f"refused by the op contract: {exc}")]) from None
    hooks = hooks_of(op, comp, base)
    spec.ignored = warned_fields(op, comp, base, hooks)
    problems = template_problems(spec, base, len(comp.run.volumes) if isinstance(comp.run, JobRunModel) else 0)
    if problems:
        raise Problems(problems)
    if hooks:
        spec.hooks = _hooks(hooks, spec, [io.name for io in comp.outputs])
    spec.notifications = _notifications(op, comp)
    return spec


def _notifications(op: OperationModel | None, comp: ComponentModel) -> list[Notification]:
    """``plugins.notifications``: the operation's when it sets them, else the component's (docs/notifications.md)."""
    written = (op.plugins.notifications if op is not None and op.plugins is not None else []) or \
        (comp.plugins.notifications if comp.plugins is not None else [])
    return [Notification(trigger=n.trigger, connections=list(n.connections)) for n in written]


def _culling_problems(op: OperationModel | None, comp: ComponentModel, base: Loc) -> list[Problem]:
    """``termination.culling`` stops an idle service: on any other run kind it is refused where it was written."""
    if comp.run.kind == SERVICE_KIND:
        return []
    return [(at + ("termination", "culling"), f"culling stops a service nobody uses; this run is a {comp.run.kind}, "
                                              "which ends on its own (use termination.timeout to bound it)")
            for layer, at in ((comp, base), (op, ())) if layer is not None and layer.termination is not None
            and layer.termination.culling is not None]


def _service(run: RunModel) -> ServiceSpec | None:
    """A service's ports and replicas (``models_run.ServiceRunModel``); None for any other run."""
    if not isinstance(run, ServiceRunModel):
        return None
    return ServiceSpec(ports=list(run.ports), replicas=_first(run.replicas, 1))


def _hooks(hooks: list[tuple[HookModel, Loc]], spec: OpSpec, declared: list[str]) -> list[Hook]:
    """The follow-up ops of the op's hooks (``proto.spec.Hook``), each built as an operation of its component, in
    the op's project unless its component names one. Their params' templates are tried on the op's own context
    (its declared outputs included, ``globals.status``), as they will render when it ends."""
    problems: list[Problem] = []
    out: list[Hook] = []
    for hook, where in hooks:
        if hook.component.hooks:
            problems.append((where + ("component", "hooks"), "a hook's component has no hooks of its own (a hook "
                                                               "never triggers another)"))
            continue
        model = OperationModel.model_construct(kind="operation", params=hook.params, conditions=hook.conditions,
                                               component=hook.component, queue=hook.queue)
        try:
            follow = build_spec(model, OverridesModel(), "hook")
        except Problems as exc:
            problems += [(where + loc, message) for loc, message in exc.problems]
            continue
        if hook.component.project is None:
            follow.project = spec.project
        problems += hook_problems(follow, spec, declared, where)
        out.append(Hook(trigger=hook.trigger, spec=follow))
    if problems:
        raise Problems(problems)
    return out


def _spec(op: OperationModel | None, comp: ComponentModel, extra: OverridesModel, fallback: str,
          io: tuple[dict, dict, dict, dict], trial: Trial | None) -> OpSpec:
    params, inputs, outputs, to_env = io
    strategy = strategy_of(op)

    def pick(attr: str) -> Any:  # the component's value patched by the operation's
        return patch_value(getattr(comp, attr), getattr(op, attr) if op is not None else None, strategy)

    container, environment, replicas, pod = _run_parts(comp.run)
    agent, queue = split_queue(_first(extra.queue, pick("queue")))
    name = pick("name") or fallback
    return OpSpec(
        name=trial_name(name, trial.iteration, trial.count) if trial else name,
        container=container,
        project=_first(extra.project, pick("project"), "default"),
        queue=queue,
        agent=agent,
        priority=_first(extra.priority, pick("priority"), 0),
        params=params, inputs=inputs, outputs=outputs, environment=environment,
        termination=_merged(Termination, comp.termination, op and op.termination, strategy),
        cache=_merged(Cache, comp.cache, op and op.cache, strategy),
        is_approved=pick("is_approved"),
        conditions=op.conditions if op else None,
        cost=pick("cost"),
        tags=pick("tags") or [],
        run_kind=comp.run.kind,
        component_hash=component_hash(container, environment, replicas, comp.run.kind, {**pod, **_shape(comp.run)}),
        priority_class=_first(extra.priority_class, pick("priority_class")),
        preemptible=_first(extra.preemptible, pick("preemptible")),  # unset: admission decides, by its queue
        replicas=replicas,
        to_env=to_env,
        iteration=trial.iteration if trial else None,
        description=pick("description"),
        **_kind_fields(comp.run),
        service=_service(comp.run),
        **pod,
    )


def fallback_name(source: str) -> str:
    stem = Path(source).stem
    return stem if not source.startswith("<") and valid_name(stem) else "operation"
