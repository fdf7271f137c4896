"""Models of a pod's ``init`` steps, ``sidecars`` and ``connections`` (a job's run, or a pytorchjob replica's).

  * ``init``: a list of Polyaxon's V1Init, each exactly one of ``git`` {url, revision, flags}, ``file`` {content,
    filename, chmod, kind} or ``container`` (a Kubernetes container: the user's own init container, name default
    ``init-<i>``), with an optional ``connection`` (an admin-declared connection: a git step clones its repository
    with its credentials; a container step gets its credentials) and ``path`` (where it writes; default
    ``/plx-context/artifacts``). A step with only a ``connection`` clones that connection's repository, as in
    Polyaxon. ``file.kind`` is an artifact kind for Polyaxon's lineage: no effect in opsched, warned. The other
    kinds of Polyaxon's init (``artifacts``, ``paths``, ``dockerfile``, ``tensorboard``, ``lineageRef``,
    ``modelRef``, ``artifactRef``) are refused, naming the key, until opsched has an artifacts store.
  * ``sidecars``: Kubernetes containers run beside the main one (name default ``sidecar-<i>``).
  * ``connections``: the names of admin-declared connections the main container gets (env and Secret).
Every string here may be a template (``rules.templating``): a connection's name is rendered at submit, before
admission resolves it; the rest when the op is admitted. What the contract checks of a templated value waits
until it is rendered.
The contract's rules (``proto.spec_checks.init_step_problems``, ``check_pod``) are applied at the edge with the
problems located in the file (``init_problems``).
"""
from __future__ import annotations

from typing import Annotated, Any

import msgspec
from pydantic import AfterValidator, BeforeValidator, Field

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import Model, Str, dns_label
from opsched.polyaxonfile.models_container import ContainerModel, check_resources
from opsched.proto import k8s_names
from opsched.proto.limits import (
    MAX_CONNECTION_NAME_CHARS,
    MAX_CONNECTIONS,
    MAX_INIT_STEPS,
    MAX_LIST_ITEMS,
    MAX_SIDECARS,
)
from opsched.proto.spec import Container, FileInit, GitInit, InitStep
from opsched.proto.spec_checks import pod_problems
from opsched.proto.template_markers import has_template

NO_STORE = ("{key!r} init steps read from an artifacts store, which opsched does not have yet; use git, file or "
            "container steps")


def _refuse(key: str) -> Any:
    def refuse(value: Any) -> Any:
        raise ValueError(NO_STORE.format(key=key))
    return BeforeValidator(refuse)


def _connection_name(value: str) -> str:
    problem = None if has_template(value) else k8s_names.dns_label(value, MAX_CONNECTION_NAME_CHARS)
    if problem:
        raise ValueError(f"connection {problem}")
    return value


ConnectionName = Annotated[str, AfterValidator(_connection_name)]


class GitModel(Model):
    url: Str | None = None
    revision: Str | None = None
    flags: Annotated[list[Str], Field(max_length=MAX_LIST_ITEMS)] = []


def _mode(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("write the mode as a string ('755', '+x'): YAML reads 0755 as the number 493")
    return value


class FileModel(Model):
    content: Str
    filename: Str | None = None
    chmod: Annotated[str, BeforeValidator(_mode)] | None = None
    kind: str | None = None  # Polyaxon's artifact kind (lineage): no effect, warned


class NamedContainerModel(ContainerModel):
    """A container whose name opsched gives when it has none (``init-<i>``, ``sidecar-<i>``)."""

    name: Annotated[str, AfterValidator(dns_label)] | None = None  # type: ignore[assignment]


class InitModel(Model):
    git: GitModel | None = None
    file: FileModel | None = None
    container: NamedContainerModel | None = None
    connection: ConnectionName | None = None
    path: Str | None = None
    artifacts: Annotated[Any, _refuse("artifacts")] = None
    paths: Annotated[Any, _refuse("paths")] = None
    dockerfile: Annotated[Any, _refuse("dockerfile")] = None
    tensorboard: Annotated[Any, _refuse("tensorboard")] = None
    lineage_ref: Annotated[Any, _refuse("lineageRef")] = None
    model_ref: Annotated[Any, _refuse("modelRef")] = None
    artifact_ref: Annotated[Any, _refuse("artifactRef")] = None


Init = Annotated[list[InitModel], Field(max_length=MAX_INIT_STEPS)]
Sidecars = Annotated[list[NamedContainerModel], Field(max_length=MAX_SIDECARS)]
Connections = Annotated[list[ConnectionName], Field(max_length=MAX_CONNECTIONS)]


def container_of(model: ContainerModel, default_name: str) -> Container:
    data = model.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
    return msgspec.convert({"name": default_name, **data}, Container)


def init_steps(models: list[InitModel]) -> list[InitStep]:
    """The wire's init steps: a step with only a connection clones its repository (a git step)."""
    out = []
    for i, m in enumerate(models):
        git = GitInit(url=m.git.url, revision=m.git.revision, flags=list(m.git.flags)) if m.git else None
        if m.git is None and m.file is None and m.container is None and m.connection is not None:
            git = GitInit()
        out.append(InitStep(
            git=git,
            file=FileInit(content=m.file.content, filename=m.file.filename, chmod=m.file.chmod) if m.file else None,
            container=container_of(m.container, f"init-{i}") if m.container is not None else None,
            connection=m.connection, path=m.path))
    return out


def sidecars_of(models: list[NamedContainerModel]) -> list[Container]:
    return [container_of(m, f"sidecar-{i}") for i, m in enumerate(models)]


def pod_parts_problems(main: Container, init: list[InitModel], sidecars: list[NamedContainerModel],
                       connections: list[str], loc: Loc) -> list[Problem]:
    """The contract's rules of a pod's steps, sidecars and connections (``proto.spec_checks.pod_problems``),
    located under ``loc`` (the run, or a replica section: its main container is ``container``); the resources of
    every init and sidecar container."""
    problems: list[Problem] = [(loc + where, message) for where, message in
                               pod_problems(main, init_steps(init), sidecars_of(sidecars), connections)]
    for i, step in enumerate(init):
        if step.container is not None:
            problems += check_resources(step.container.resources, loc + ("init", i, "container", "resources"))
    for i, sidecar in enumerate(sidecars):
        problems += check_resources(sidecar.resources, loc + ("sidecars", i, "resources"))
    return problems
