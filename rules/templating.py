"""Polyaxon's ``{{ ... }}`` templates, rendered the same way everywhere (contract semantics).

What a container runs is rendered from its op's values with a sandboxed Jinja2 environment
(``jinja2.sandbox.ImmutableSandboxedEnvironment``, ``StrictUndefined``): the CLI renders it to refuse a
bad file before publishing and for ``--dry-run``, admission renders it to refuse an op that arrived on
the bus and to put what runs on ``OperationAdmitted``. Rendered: every string of the run that reaches the pod
(``render_spec``), through lists and mappings, the keys of mappings as written: of every container (each pod's
main container, init steps' and sidecars), all but its ``name`` and ``resources`` (``NOT_RENDERED``: a DNS label
and quantities the edge refuses templates in); every init step's git ``url``/``revision``/``flags``, file
``content``/``filename``/``chmod``, ``connection`` and ``path``; every pod's ``connections``; the environment's
values (labels, annotations, node selector, tolerations, affinity, volumes, the pod's security context, ...). What
the contract checks of a templated value (``proto.spec_checks``: a label value, a mode, a path, a connection's name)
is checked once rendered, and a rendered value it refuses is a ``TemplateError`` at that field. What admission reads
before it routes and places an op renders at submit (``render_placement``: node selector values, tolerations,
affinity, connection names; ``queue`` with ``render_text``); the rest when it admits the op.

Names a template may use (``template_values``): every input, output and param by its bare name
(``{{ lr }}``), the same under ``params.``/``inputs.``/``outputs.``, and ``globals.*``: ``uuid`` (and
``run_uuid``: the op id), ``name``, ``project_name``, ``project_unique_name`` (``<owner>.<project>``),
``run_info`` (``<owner>.<project>.runs.<uuid>``), ``owner_name``, ``created_at`` and ``compiled_at`` (ISO 8601),
``cloning_kind`` and ``original_uuid`` (a restart's or copy's), ``iteration`` (a sweep trial's index, else None),
``namespace``, ``context_path`` (``/plx-context``), ``artifacts_path`` (``/plx-context/artifacts``: where init steps
write), ``run_artifacts_path`` and ``run_outputs_path``. A global is also reachable by its bare name unless a param
has that name.

``OpSpec.to_env`` (Polyaxon's ``toEnv``) sets an env var on the main container of every pod of the op (a
pytorchjob's master and workers) to a param's value: strings as written, booleans ``true``/``false``, None empty,
anything else as JSON.

Templates render in a bounded sandbox (``rules.template_sandbox``: source, depth, the size of every value,
output and time, all of one op's templates sharing one time budget). Every failure of any kind is a
``TemplateError`` naming the field (``container.args[0]``): an undefined name, a syntax error, access to
Python internals (the sandbox), a value too large, too slow, or any error raised while rendering.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from jinja2 import TemplateError as JinjaError
from jinja2 import UndefinedError
from jinja2.exceptions import SecurityError, TemplateSyntaxError

from opsched.proto.queues import QueuesConfig
from opsched.proto.spec import (
    ARTIFACTS_PATH,
    CONTEXT_ROOT,
    Container,
    Environment,
    EnvVar,
    InitStep,
    OpSpec,
    ReplicaGroup,
)
from opsched.proto.spec_checks import dotted, pod_problems, rendered_environment_problems
from opsched.proto.template_markers import MARKERS, has_template  # noqa: F401 - re-exported
from opsched.rules.template_sandbox import render, time_budget
from opsched.rules.value_bounds import OutOfTime, ValueTooLarge

Path = tuple[str | int, ...]


class TemplateError(ValueError):
    """A template that cannot be rendered; ``path`` names the field in OpSpec terms."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{format_path(path)}: {message}" if path else message)
        self.path = path
        self.message = message


def format_path(path: Path) -> str:
    """("container", "args", 0) -> "container.args[0]" (``proto.spec_checks.dotted``)."""
    return dotted(path)


@dataclass(frozen=True)
class Globals:
    """Polyaxon's ``globals.*`` of one op: who and where it is. ``compiled_at``: when it was rendered for this
    attempt (admission's clock; None: not known); ``cloning_kind`` and ``original_uuid``: a restart's or copy's
    relation to the op it was made from (``restart``/``copy``, its id)."""

    uuid: str
    name: str
    project_name: str
    owner_name: str = "default"
    created_at: datetime | None = None
    iteration: int | None = None
    namespace: str = "default"
    artifacts_root: str = "/plx-context/artifacts"  # Polyaxon's (QueuesConfig.artifacts_root)
    compiled_at: datetime | None = None
    cloning_kind: str | None = None
    original_uuid: str | None = None

    def as_dict(self) -> dict[str, Any]:
        run_path = f"{self.artifacts_root.rstrip('/')}/{self.uuid}"
        project = f"{self.owner_name}.{self.project_name}"
        return {
            "uuid": self.uuid, "run_uuid": self.uuid, "name": self.name, "project_name": self.project_name,
            "project_unique_name": project, "run_info": f"{project}.runs.{self.uuid}",
            "owner_name": self.owner_name, "iteration": self.iteration, "namespace": self.namespace,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "compiled_at": self.compiled_at.isoformat() if self.compiled_at else None,
            "cloning_kind": self.cloning_kind, "original_uuid": self.original_uuid,
            "context_path": CONTEXT_ROOT, "artifacts_path": ARTIFACTS_PATH,
            "run_artifacts_path": run_path, "run_outputs_path": f"{run_path}/outputs",
        }


def globals_for(op_id: str, spec: OpSpec, queue: str, config: QueuesConfig, *, namespace: str,
                created_at: datetime, requested_by: str | None, compiled_at: datetime | None = None,
                cloning_kind: str | None = None, original_uuid: str | None = None) -> Globals:
    """The op's ``globals.*``: its queue's namespace and artifacts root (else the config's)."""
    own = next((q for q in config.queues if q.name == queue), None)
    return Globals(uuid=op_id, name=spec.name, project_name=spec.project, owner_name=requested_by or "default",
                   created_at=created_at, iteration=spec.iteration,
                   namespace=(own.namespace if own and own.namespace else namespace),
                   artifacts_root=(own.artifacts_root if own and own.artifacts_root else config.artifacts_root),
                   compiled_at=compiled_at, cloning_kind=cloning_kind or None, original_uuid=original_uuid or None)


def template_values(spec: OpSpec, globs: Globals) -> dict[str, Any]:
    """Everything a template of ``spec`` may name."""
    params = {**spec.outputs, **spec.inputs, **spec.params}
    g = globs.as_dict()
    return {**g, **params, "params": params, "inputs": dict(spec.inputs), "outputs": dict(spec.outputs),
            "globals": g}




def hook_values(spec: OpSpec, globs: Globals, status: str, outputs: dict[str, Any]) -> dict[str, Any]:
    """What a hook of ``spec``'s op sees once the op ended (Polyaxon: a hook's params render in the finished op's
    context): the op's own names (``template_values``), its ``outputs`` as it wrote them over those its component
    declared, and ``globals.status`` (also the bare name ``status``, unless a param takes it)."""
    written = msgspec.structs.replace(spec, outputs={**spec.outputs, **outputs}) if outputs else spec
    values = template_values(written, globs)
    values["globals"] = {**values["globals"], "status": status}
    values.setdefault("status", status)
    return values


def render_value(value: Any, values: dict[str, Any], path: Path) -> Any:
    """``value`` (a param's: a string, or lists and mappings of them) with every string's templates rendered."""
    if isinstance(value, str):
        return render_text(value, values, path)
    if isinstance(value, list):
        return [render_value(v, values, (*path, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: render_value(v, values, (*path, k)) for k, v in value.items()}
    return value


def render_text(text: str, values: dict[str, Any], path: Path = ()) -> str:
    """``text`` with its templates rendered over ``values``; TemplateError naming ``path`` if it can't be."""
    if not has_template(text):
        return text
    try:
        return render(text, values)
    except UndefinedError as exc:
        known = ", ".join(sorted(k for k in values if k not in ("params", "inputs", "outputs", "globals")))
        raise TemplateError(path, f"{exc.message}; known names: {known}") from None
    except TemplateSyntaxError as exc:
        raise TemplateError(path, f"template syntax error: {exc.message} in {_quote(text)}") from None
    except SecurityError as exc:
        raise TemplateError(path, f"not allowed in a template: {exc}") from None
    except ValueTooLarge as exc:
        raise TemplateError(path, f"{exc} in {_quote(text)}") from None
    except OutOfTime as exc:
        raise TemplateError(path, f"the templates {exc}") from None
    except RecursionError:
        raise TemplateError(path, f"nested too deeply: {_quote(text)}") from None
    except MemoryError:
        raise TemplateError(path, f"out of memory rendering {_quote(text)}") from None
    except Exception as exc:  # noqa: BLE001 - any other failure is the template's, never a handler bug to retry
        raise TemplateError(path, f"cannot render {_quote(text)}: {_reason(exc)}") from None


def _quote(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:80] + "…")


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, (JinjaError, ArithmeticError, TypeError, ValueError, LookupError)) \
        else f"{type(exc).__name__}: {exc}"


_MARKERS = tuple(m.encode() for m in MARKERS)
_ENCODE = msgspec.json.Encoder().encode
NOT_RENDERED = frozenset({"name", "resources"})  # of a container: its name (a DNS label) and quantities, as written


def _rendered_parts(spec: OpSpec) -> tuple:
    """What of ``spec`` renders: every pod's containers, init steps, sidecars and connections, and the environment."""
    groups = [(g.container, g.init, g.sidecars, g.connections) for g in spec.replicas] if spec.replicas else ()
    return (spec.container, spec.init, spec.sidecars, spec.connections, spec.environment, groups)


def needs_rendering(spec: OpSpec) -> bool:
    """Does any rendered string of the op hold a template? (One encode and a byte search: admission asks it of every
    op it admits.)"""
    data = _ENCODE(_rendered_parts(spec))
    return b"{{" in data or b"{%" in data or b"{#" in data  # MARKERS


def env_value(value: Any) -> str:
    """A param's value as an env var (``toEnv``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, sort_keys=True, default=str)


def render_spec(spec: OpSpec, globs: Globals, errors: list[TemplateError] | None = None) -> OpSpec:
    """``spec`` with every string that reaches its pods rendered and its ``to_env`` vars set (the same spec if
    nothing changes), its rendered values checked as the contract checks them.

    Raises the first ``TemplateError``; with ``errors``, collects every one instead and returns ``spec`` as
    written."""
    if not spec.to_env and not needs_rendering(spec):
        return spec  # the common case: nothing to render, nothing to build
    with time_budget():  # one budget for all the op's templates
        return _render_spec(spec, globs, errors)


Render = Callable[[str, Path], str]


def _renderer(values: dict[str, Any], errors: list[TemplateError] | None) -> Render:
    """``render(text, path)``: the first failure raised, or with ``errors`` every one collected (the text kept)."""
    def render(text: str, path: Path) -> str:
        try:
            return render_text(text, values, path)
        except TemplateError as exc:
            if errors is None:
                raise
            errors.append(exc)
            return text
    return render


def _render_spec(spec: OpSpec, globs: Globals, errors: list[TemplateError] | None) -> OpSpec:
    values = template_values(spec, globs)
    failed: list[TemplateError] = []
    render = _renderer(values, failed)
    extra = _to_env(spec, values, failed)
    groups = [_pod(g, render, extra, ("replicas", i)) for i, g in enumerate(spec.replicas)]
    main = _pod(spec, render, extra, ())
    environment = msgspec.convert(_deep(msgspec.to_builtins(spec.environment), render, ("environment",)), Environment)
    if not failed:
        failed += _rendered_problems(main, environment, groups)
    if failed:
        if errors is None:
            raise failed[0]
        errors.extend(failed)
        return spec
    try:
        out = msgspec.structs.replace(spec, container=main["container"], init=main["init"],
                                      sidecars=main["sidecars"], connections=main["connections"],
                                      environment=environment, replicas=[
                                          msgspec.structs.replace(g, **parts) for g, parts in zip(spec.replicas, groups)])
    except ValueError as exc:  # what the contract refuses of the rendered op (an annotation or file grown too large)
        error = TemplateError((), f"the rendered op is refused: {exc}")
        if errors is None:
            raise error from None
        errors.append(error)
        return spec
    return spec if out == spec else out


def _rendered_problems(main: dict[str, Any], environment: Environment,
                       groups: list[dict[str, Any]]) -> list[TemplateError]:
    """What the contract checks of rendered values only (``proto.spec_checks``), each at its field."""
    out = [TemplateError(("environment", *where), f"{problem} (as rendered)")
           for where, problem in rendered_environment_problems(environment)]
    for at, pod in [((), main), *((("replicas", i), g) for i, g in enumerate(groups))]:
        out += [TemplateError(at + where, f"{problem} (as rendered)") for where, problem in
                pod_problems(pod["container"], pod["init"], pod["sidecars"], pod["connections"], rendered=True)]
    return out


def _deep(value: Any, render: Render, path: Path, skip: frozenset[str] = frozenset()) -> Any:
    """``value`` (builtins) with every string rendered, through lists and mappings; keys stay as written, and
    so do the values of the keys in ``skip`` (at this level)."""
    if isinstance(value, str):
        return render(value, path)
    if isinstance(value, list):
        return [_deep(v, render, (*path, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: v if k in skip else _deep(v, render, (*path, k)) for k, v in value.items()}
    return value


def _pod(pod: OpSpec | ReplicaGroup, render: Render, extra: list[EnvVar], at: Path) -> dict[str, Any]:
    """The rendered containers, init steps, sidecars and connections of ``pod`` (the op's main pod, or a replica
    group); ``extra`` (``toEnv``) goes to its main container only, as Polyaxon gives params to the main container."""
    init = []
    for i, step in enumerate(pod.init):
        where = (*at, "init", i)
        data = _deep(msgspec.to_builtins(msgspec.structs.replace(step, container=None)), render, where)
        container = None if step.container is None else _container(step.container, render, [], (*where, "container"))
        init.append(msgspec.structs.replace(msgspec.convert(data, InitStep), container=container))
    return {
        "container": _container(pod.container, render, extra, (*at, "container")),
        "init": init,
        "sidecars": [_container(c, render, [], (*at, "sidecars", i)) for i, c in enumerate(pod.sidecars)],
        "connections": [render(name, (*at, "connections", i)) for i, name in enumerate(pod.connections)],
    }


def _to_env(spec: OpSpec, values: dict[str, Any], errors: list[TemplateError] | None) -> list[EnvVar]:
    out = []
    for name, source in spec.to_env.items():
        if source in values["params"]:
            out.append(EnvVar(name=name, value=env_value(values["params"][source])))
            continue
        error = TemplateError(("toEnv", name), f"{name} takes its value from {source!r}, which is not a "
                                               "param, input or output of the op")
        if errors is None:
            raise error
        errors.append(error)
    return out


def _container(c: Container, render: Render, extra: list[EnvVar], at: Path) -> Container:
    """``c`` with every string rendered but its name and resources (``NOT_RENDERED``), then ``extra`` env."""
    data = _deep(msgspec.to_builtins(c), render, at, NOT_RENDERED)
    rendered = msgspec.convert(data, Container)
    clash = sorted({e.name for e in rendered.env} & {e.name for e in extra})
    if clash:
        raise TemplateError((*at, "env"), f"{clash[0]} is set both in env and by toEnv; keep one")
    return msgspec.structs.replace(rendered, env=[*rendered.env, *extra]) if extra else rendered


def render_placement(spec: OpSpec, values: dict[str, Any], errors: list[TemplateError] | None = None) -> OpSpec:
    """``spec`` with what admission reads before it routes and places the op rendered: its node selector values,
    tolerations, affinity and the connections every pod names (the rest renders at admission, ``render_spec``)."""
    render = _renderer(values, errors)
    env = spec.environment
    data = _deep({"nodeSelector": env.node_selector, "tolerations": env.tolerations, "affinity": env.affinity},
                 render, ("environment",))
    environment = msgspec.structs.replace(env, node_selector=data["nodeSelector"], tolerations=data["tolerations"],
                                          affinity=data["affinity"])

    def named(pod: Any, at: Path) -> dict[str, Any]:
        steps = [s if not has_template(s.connection) else msgspec.structs.replace(
            s, connection=render(s.connection or "", (*at, "init", i, "connection"))) for i, s in enumerate(pod.init)]
        return {"init": steps, "connections": [render(n, (*at, "connections", i)) for i, n in enumerate(pod.connections)]}
    replicas = [msgspec.structs.replace(g, **named(g, ("replicas", i))) for i, g in enumerate(spec.replicas)]
    return msgspec.structs.replace(spec, environment=environment, replicas=replicas, **named(spec, ()))


def placement_templated(spec: OpSpec) -> bool:
    """Does anything ``render_placement`` renders hold a template? (Asked of every op submitted: most have none of
    these fields.)"""
    env = spec.environment
    if not (spec.connections or spec.init or spec.replicas or env.node_selector or env.tolerations or env.affinity):
        return False
    names = [*spec.connections, *(s.connection for s in spec.init if s.connection)]
    for group in spec.replicas:
        names += [*group.connections, *(s.connection for s in group.init if s.connection)]
    if any(has_template(text) for text in (*names, *env.node_selector.values())):
        return True
    if not env.tolerations and not env.affinity:
        return False
    data = msgspec.json.encode((env.tolerations, env.affinity))
    return any(m in data for m in _MARKERS)
