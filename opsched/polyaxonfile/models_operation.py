"""Models of a component and of an operation (its scheduling fields), and of the caller's overrides.

  * ``version``: 1, 1.0 or 1.1 (number or string); optional. Anything else is an error.
  * Scheduling fields, on the component or the operation: ``name``, ``project`` (opsched's own,
    default "default"), ``tags`` (list or comma-separated string), ``queue``, ``priority`` (int,
    opsched's own), ``termination`` {maxRetries >= 0, timeout > 0 s, ttl >= 0 s}, ``cache``
    {disable, ttl >= 0, io, sections}, ``isApproved``, ``cost`` (>= 0), ``priorityClass`` and
    ``preemptible`` (bool; unset: true, or a service's queue's ``services.defaultPreemptible``). The operation also has ``params`` and ``conditions``.
  * ``priorityClass`` (opsched's own, → ``OpSpec.priority_class``): the name of a priority class
    of opsched's queue config, a DNS label; whether it exists is checked by admission, not here.
    It is NOT the pod's ``run.environment.priorityClassName``, which is passed to Kubernetes.
  * ``queue``: a lowercase subject token (``proto.subjects.valid_token``), or Polyaxon's ``agent/queue``:
    the agent is kept (``OpSpec.agent``) and admission refuses the op unless its queue runs on that agent.

``overrides`` (``OverridesModel``) may hold ``params`` (bare or ``{value: ...}``), ``queue``, ``priority``, ``project``,
``priority_class`` and ``preemptible`` (plain Python names, not Polyaxon's camelCase).
Components and operations exist per run kind (``MODELS_BY_RUN_KIND``).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from opsched.polyaxonfile.fields import (
    EnvName,
    Float,
    Int,
    Model,
    Name,
    PriorityClass,
    Queue,
    Tags,
    Version,
    not_reserved,
)
from opsched.polyaxonfile.models_run import (
    JobRunModel,
    MPIJobRunModel,
    MXJobRunModel,
    PaddleJobRunModel,
    PytorchJobRunModel,
    ServiceRunModel,
    TFJobRunModel,
    XGBoostJobRunModel,
)
from opsched.polyaxonfile.patching import Strategy
from opsched.proto.lifecycle import HOOK_TRIGGERS
from opsched.proto.limits import (
    MAX_COST,
    MAX_DURATION_S,
    MAX_HOOKS,
    MAX_LIST_ITEMS,
    MAX_PRIORITY,
    MAX_RETRIES,
    MAX_TAGS,
)

Priority = Annotated[Int, Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)]


class CullingModel(Model):
    """Polyaxon's ``termination.culling``: a service nobody used (``opsched touch``) for ``timeout`` seconds is
    stopped. Only a service has it (``convert`` refuses it on any other run kind)."""

    timeout: Annotated[Int, Field(gt=0, le=MAX_DURATION_S)]


class TerminationModel(Model):
    max_retries: Annotated[Int, Field(ge=0, le=MAX_RETRIES)] | None = None
    timeout: Annotated[Int, Field(gt=0, le=MAX_DURATION_S)] | None = None
    ttl: Annotated[Int, Field(ge=0, le=MAX_DURATION_S)] | None = None
    culling: CullingModel | None = None


class CacheModel(Model):
    disable: bool | None = None
    ttl: Annotated[Int, Field(ge=0, le=MAX_DURATION_S)] | None = None
    io: Annotated[list[str], Field(max_length=MAX_LIST_ITEMS)] | None = None
    sections: list[Literal["init", "connections", "containers"]] | None = None


class IOModel(Model):
    """One entry of a component's ``inputs``/``outputs``; ``value`` is the default.

    ``isList`` (the value is a list of ``type``), ``options`` (the allowed values) and
    ``delayValidation`` (skip both checks and the type's) are checked by ``params``; ``toEnv`` sets an
    env var to the value on every container. ``description`` is documentation. ``isFlag``, ``argFormat``,
    ``connection`` and ``toInit`` change what runs and are refused (``keys.UNSUPPORTED``)."""

    name: Annotated[Name, AfterValidator(not_reserved)]
    description: str | None = None
    type: str | None = None
    value: Any = None
    is_optional: bool = False
    is_list: bool = False
    options: list[Any] | None = None
    delay_validation: bool = False
    to_env: EnvName | None = None


def _refused_plugin(value: Any) -> Any:
    if value:
        raise ValueError("this plugin changes the pod (a volume, a sidecar or an init container opsched does not "
                         "add yet); remove it or set it to false")
    return value


RefusedPlugin = Annotated[Any, BeforeValidator(_refused_plugin)]


def _trigger(value: str) -> str:
    """A hook's or a notification's ``trigger``: Polyaxon's, one rule (``proto.lifecycle.HOOK_TRIGGERS``)."""
    if value not in HOOK_TRIGGERS:
        *first, last = (repr(t) for t in HOOK_TRIGGERS)
        raise ValueError(f"a trigger is {', '.join(first)} or {last}, not {value!r}")
    return value


class NotificationModel(Model):
    """One of ``plugins.notifications``: Polyaxon's ``{connections: [NAME...], trigger: succeeded|failed|
    stopped|done}``; ``done`` (any final status) when the trigger is unset. The names are the admin's
    connections (docs/notifications.md); whether they exist is not known here."""

    connections: list[Name] = Field(min_length=1)
    trigger: Annotated[str, AfterValidator(_trigger)] = "done"


class PluginsModel(Model):
    """Polyaxon's plugins. Those that add to the pod are refused when set; the rest collect or notify, have
    no effect in opsched, and are warned when set (``keys.PLUGINS_WARNED``)."""

    auth: RefusedPlugin = None
    docker: RefusedPlugin = None
    shm: RefusedPlugin = None
    mount_artifacts_store: RefusedPlugin = None
    sidecar: RefusedPlugin = None
    auto_resume: RefusedPlugin = None
    collect_artifacts: bool | None = None
    collect_logs: bool | None = None
    collect_resources: bool | None = None
    sync_statuses: bool | None = None
    external_host: bool | None = None
    log_level: str | None = None
    notifications: list[NotificationModel] = []


class _Common(Model):
    """Fields an operation may set to override its component's. ``schedule`` is read by
    ``opsched.polyaxonfile.schedule`` (and refused by a plain parse, see ``load``)."""

    ignored = frozenset({"schedule"})
    version: Version | None = None
    name: Name | None = None
    description: str | None = None
    plugins: PluginsModel | None = None
    project: Name | None = None
    tags: Annotated[Tags, Field(max_length=MAX_TAGS)] | None = None
    queue: Queue | None = None
    priority: Priority | None = None
    termination: TerminationModel | None = None
    cache: CacheModel | None = None
    is_approved: bool | None = None
    cost: Annotated[Float, Field(ge=0, le=MAX_COST)] | None = None
    priority_class: PriorityClass | None = None  # opsched's own: a class of the queue config
    preemptible: bool | None = None  # opsched's own


class ComponentModel(_Common):
    kind: Literal["component"] = "component"
    inputs: list[IOModel] = []
    outputs: list[IOModel] = []
    run: JobRunModel
    hooks: Annotated[list[HookModel], Field(max_length=MAX_HOOKS)] | None = None


class HookModel(Model):
    """Polyaxon's V1Hook: a follow-up op when its op ends as ``trigger`` says (``proto.spec.Hook``). What runs: an
    inline ``component`` (opsched's), or a ``hubRef``/``pathRef`` resolved into one before validation. ``params`` fill
    the component's inputs; their templates and ``conditions`` are evaluated in the finished op's context when it
    ends (its globals, params, outputs and ``globals.status``). ``queue``: default the finished op's.
    ``disableDefaults`` has no effect in opsched (no default hooks or presets): warned. ``connection`` and
    ``presets`` are refused (``keys.UNSUPPORTED``)."""

    trigger: Annotated[str, AfterValidator(_trigger)]
    component: ComponentModel
    params: dict[str, Any] = {}
    conditions: str | None = None
    queue: Queue | None = None
    disable_defaults: bool | None = None


class OperationModel(_Common):
    """An operation: its component (inline; a ``pathRef``/``hubRef`` was replaced by it, and its ``runPatch``
    applied to its run, before validation: ``references``, ``overlays``), params, conditions and hooks.
    ``patchStrategy`` (Polyaxon's; default post_merge) says how its ``runPatch`` patched the run and how its own
    fields patch its component's (``convert``)."""

    kind: Literal["operation"]
    patch_strategy: Strategy | None = None
    params: dict[str, Any] = {}
    conditions: str | None = None
    component: ComponentModel
    hooks: Annotated[list[HookModel], Field(max_length=MAX_HOOKS)] | None = None


class PytorchComponentModel(ComponentModel):
    run: PytorchJobRunModel  # type: ignore[assignment]


class PytorchOperationModel(OperationModel):
    component: PytorchComponentModel  # type: ignore[assignment]


class TFComponentModel(ComponentModel):
    run: TFJobRunModel  # type: ignore[assignment]


class TFOperationModel(OperationModel):
    component: TFComponentModel  # type: ignore[assignment]


class MPIComponentModel(ComponentModel):
    run: MPIJobRunModel  # type: ignore[assignment]


class MPIOperationModel(OperationModel):
    component: MPIComponentModel  # type: ignore[assignment]


class XGBoostComponentModel(ComponentModel):
    run: XGBoostJobRunModel  # type: ignore[assignment]


class XGBoostOperationModel(OperationModel):
    component: XGBoostComponentModel  # type: ignore[assignment]


class PaddleComponentModel(ComponentModel):
    run: PaddleJobRunModel  # type: ignore[assignment]


class PaddleOperationModel(OperationModel):
    component: PaddleComponentModel  # type: ignore[assignment]


class MXComponentModel(ComponentModel):
    run: MXJobRunModel  # type: ignore[assignment]


class MXOperationModel(OperationModel):
    component: MXComponentModel  # type: ignore[assignment]


class ServiceComponentModel(ComponentModel):
    run: ServiceRunModel  # type: ignore[assignment]


class ServiceOperationModel(OperationModel):
    component: ServiceComponentModel  # type: ignore[assignment]


ComponentModel.model_rebuild()  # its hooks' components are components

# run.kind -> (component model, operation model); the parser picks them after its precheck.
MODELS_BY_RUN_KIND: dict[str, tuple[type[ComponentModel], type[OperationModel]]] = {
    "job": (ComponentModel, OperationModel),
    "pytorchjob": (PytorchComponentModel, PytorchOperationModel),
    "tfjob": (TFComponentModel, TFOperationModel),
    "mpijob": (MPIComponentModel, MPIOperationModel),
    "xgbjob": (XGBoostComponentModel, XGBoostOperationModel),
    "paddlejob": (PaddleComponentModel, PaddleOperationModel),
    "mxjob": (MXComponentModel, MXOperationModel),
    "service": (ServiceComponentModel, ServiceOperationModel),
}


class OverridesModel(Model):
    """What a caller (CLI flags, API) may override; keys are plain Python names."""

    model_config = ConfigDict(alias_generator=None)
    params: dict[str, Any] = {}
    queue: Queue | None = None
    priority: Priority | None = None
    project: Name | None = None
    priority_class: PriorityClass | None = None
    preemptible: bool | None = None
