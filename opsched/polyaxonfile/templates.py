"""Render an op's templates at the edge, so a file that would run braces is refused before it is published.

The spec is rendered exactly as admission will render it (``rules.templating``), with stand-in globals
(an op id of ``PREVIEW_UUID``, created now); each ``TemplateError`` becomes a problem located at the
field of the polyaxonfile it came from (``run.container.args[0]``, ``run.worker.container.command[1]``,
``run.init[0].git.url``, ``run.sidecars[1].env``, ``run.connections[0]``, ``queue``,
``run.environment.labels.<key>``, ``run.volumes[0].nfs.path``).
"""
from __future__ import annotations

from datetime import datetime, timezone

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.proto.spec import OpSpec
from opsched.rules.replica_roles import KINDS, main_role
from opsched.rules.template_sandbox import time_budget
from opsched.rules.templating import (
    Globals,
    TemplateError,
    has_template,
    hook_values,
    render_spec,
    render_text,
    render_value,
    template_values,
)

PREVIEW_UUID = "00000000000000000000000000000000"


def preview_globals(spec: OpSpec, op_id: str = PREVIEW_UUID, namespace: str = "default") -> Globals:
    return Globals(uuid=op_id, name=spec.name, project_name=spec.project, iteration=spec.iteration,
                   created_at=datetime.now(timezone.utc), namespace=namespace)


def template_problems(spec: OpSpec, base: Loc, run_volumes: int = 0) -> list[Problem]:
    """Every field of ``spec`` that would not render, located in the polyaxonfile (``base``: the component;
    ``run_volumes``: how many of the environment's volumes ``run.volumes`` gave, before ``run.environment``'s)."""
    with time_budget():  # the budget admission gives an op's templates
        return _problems(spec, base, run_volumes)


def _problems(spec: OpSpec, base: Loc, run_volumes: int) -> list[Problem]:
    globs = preview_globals(spec)
    errors: list[TemplateError] = []
    try:
        render_spec(spec, globs, errors)
    except TemplateError as exc:
        errors.append(exc)
    problems: list[Problem] = [(_yaml_loc(exc.path, spec, base, run_volumes), exc.message) for exc in errors]
    if spec.queue and has_template(spec.queue):
        try:
            render_text(spec.queue, template_values(spec, globs))
        except TemplateError as exc:
            problems.append((("queue",), exc.message))
    return problems


def hook_problems(follow: OpSpec, spec: OpSpec, declared: list[str], where: Loc) -> list[Problem]:
    """The params and inputs of a hook's op (at ``where``) that would not render in ``spec``'s op's context once it
    ends: its names, its declared outputs (written or not), ``globals.status``."""
    outputs = {name: spec.outputs.get(name) for name in declared}
    values = hook_values(spec, preview_globals(spec), "succeeded", outputs)
    problems: list[Problem] = []
    with time_budget():
        for section, entries in (("params", follow.params), ("inputs", follow.inputs)):
            for name, value in entries.items():
                try:
                    render_value(value, values, (section, name))
                except TemplateError as exc:
                    problems.append((where + ("params", name), exc.message))
    return list(dict.fromkeys(problems))  # a param that fills an input: said once


def _yaml_loc(path: tuple, spec: OpSpec, base: Loc, run_volumes: int = 0) -> Loc:
    """Where a field of the OpSpec (``container.args[0]``, ``init[1].git.url``, ``sidecars[0].env``,
    ``connections[0]``, ``replicas[0].container.command``, ``environment.labels.team``) was written: under the run,
    a distributed run's replica section (the main pod's: its main role's); an environment volume under ``run.volumes``
    or ``run.environment``."""
    run: Loc = base + ("run",)
    if path[:1] in (("container",), ("init",), ("sidecars",), ("connections",)):
        return run + ((main_role(spec),) if spec.run_kind in KINDS else ()) + path
    if path[:1] == ("replicas",) and len(path) > 2:
        return run + (spec.replicas[path[1]].name,) + path[2:]
    if path[:2] == ("environment", "volumes") and len(path) > 2 and isinstance(path[2], int) and path[2] < run_volumes:
        return run + ("volumes",) + path[2:]
    if path[:2] == ("environment", "volumes") and len(path) > 2 and isinstance(path[2], int):
        return run + ("environment", "volumes", path[2] - run_volumes) + path[3:]
    if path[:1] == ("environment",):
        return run + path
    return ()
