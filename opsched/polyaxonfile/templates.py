"""Render an op's templates at the edge, so a file that would run braces is refused before it is published.

The spec is rendered exactly as admission will render it (``rules.templating``), with stand-in globals
(an op id of ``PREVIEW_UUID``, created now); each ``TemplateError`` becomes a problem located at the
field of the polyaxonfile it came from (``run.container.args[0]``, ``run.worker.container.command[1]``,
``run.init[0].container.image``, ``run.sidecars[1].env``, ``queue``, ``run.environment.nodeSelector.<key>``).
"""
from __future__ import annotations

from datetime import datetime, timezone

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.proto.spec import OpSpec
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


def template_problems(spec: OpSpec, base: Loc) -> list[Problem]:
    """Every field of ``spec`` that would not render, located in the polyaxonfile (``base``: the component)."""
    with time_budget():  # the budget admission gives an op's templates
        return _problems(spec, base)


def _problems(spec: OpSpec, base: Loc) -> list[Problem]:
    globs = preview_globals(spec)
    errors: list[TemplateError] = []
    try:
        render_spec(spec, globs, errors)
    except TemplateError as exc:
        errors.append(exc)
    problems: list[Problem] = [(_yaml_loc(exc.path, spec, base), exc.message) for exc in errors]
    values = template_values(spec, globs)
    fields: list[tuple[Loc, str | None]] = [(("queue",), spec.queue)]
    fields += [(base + ("run", "environment", "nodeSelector", k), v)
               for k, v in spec.environment.node_selector.items()]
    for loc, text in fields:
        if text and has_template(text):
            try:
                render_text(text, values)
            except TemplateError as exc:
                problems.append((loc, exc.message))
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


def _yaml_loc(path: tuple, spec: OpSpec, base: Loc) -> Loc:
    """Where a field of the OpSpec (``container.args[0]``, ``init[1].container.image``, ``sidecars[0].env``,
    ``replicas[0].container.command``) was written: under the run, a pytorchjob's master or worker section."""
    run: Loc = base + ("run",)
    if path[:1] in (("container",), ("init",), ("sidecars",)):
        return run + (("master",) if spec.run_kind == "pytorchjob" else ()) + path
    if path[:1] == ("replicas",) and len(path) > 2:
        return run + (spec.replicas[path[1]].name,) + path[2:]
    return ()
