"""Models of a run's ``container`` and ``environment`` (and the resource rules Kubernetes enforces).

  * ``run.container``: ``image`` (required), ``name`` (default "main"), ``command`` (a string is
    split like a shell does), ``args`` (a string is ONE argument, for ``command: [sh, -c]``),
    ``env`` [{name, value}], ``resources`` {limits, requests} (Kubernetes quantities; numbers are
    turned into strings; accelerator counts must be whole, accelerator requests need an equal
    limit, requests may not exceed limits), ``workingDir``, ``securityContext``, ``volumeMounts``.
  * ``run.environment``: nodeSelector, tolerations, affinity, labels, annotations,
    priorityClassName, serviceAccountName, volumes (``run.volumes``, where Polyaxon puts them,
    is accepted too and merged in first).

The keys these sections accept and ignore are their models' ``ignored`` sets (see ``keys``).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import Args, Command, Int, Model, NonEmpty, Quantity, Str, dns_label
from proto.resources import GPU_MEMORY, QuantityError, gpu_memory_gib, is_accelerator, parse_quantity


class EnvVarModel(Model):
    name: NonEmpty
    value: Str = ""


class ResourcesModel(Model):
    limits: dict[str, Quantity] = {}
    requests: dict[str, Quantity] = {}


class ContainerModel(Model):
    ignored = frozenset({
        "imagePullPolicy", "ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
        "terminationMessagePath", "terminationMessagePolicy", "stdin", "stdinOnce", "tty",
    })
    image: NonEmpty
    name: Annotated[str, AfterValidator(dns_label)] = "main"
    command: Command = []
    args: Args = []
    env: list[EnvVarModel] = []
    resources: ResourcesModel = ResourcesModel()
    working_dir: str | None = None
    security_context: dict[str, Any] | None = None
    volume_mounts: list[dict[str, Any]] = []


class TolerationModel(Model):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: Str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Int | None = None


class EnvironmentModel(Model):
    ignored = frozenset({
        "hostAliases", "securityContext", "imagePullSecrets", "hostNetwork", "hostPID",
        "dnsPolicy", "dnsConfig", "restartPolicy",
    })
    node_selector: dict[str, Str] = {}
    tolerations: list[TolerationModel] = []
    affinity: dict[str, Any] | None = None
    labels: dict[str, Str] = {}
    annotations: dict[str, Str] = {}
    priority_class_name: str | None = None
    service_account_name: str | None = None
    volumes: list[dict[str, Any]] = []


# --- checks that need more than one field (they report exact paths, which validators can't) ----

def check_resources(res: ResourcesModel, loc: Loc) -> list[Problem]:
    """Kubernetes rules the scheduler relies on: whole accelerators, requests within limits."""
    problems = []
    for section in ("limits", "requests"):
        for name, qty in getattr(res, section).items():
            if name == GPU_MEMORY:
                try:
                    gpu_memory_gib(qty)
                except QuantityError as exc:
                    problems.append((loc + (section, name), str(exc)))
            elif is_accelerator(name) and parse_quantity(qty) % 1:
                problems.append((loc + (section, name),
                                 f"{name} must be a whole number, got {qty!r}"))
    for name, req in res.requests.items():
        lim = res.limits.get(name)
        where = loc + ("requests", name)
        if lim is None and is_accelerator(name):
            problems.append((where, f"{name} needs a limit (set it in limits, like Kubernetes)"))
        elif lim is None:
            continue
        elif is_accelerator(name) and parse_quantity(req) != parse_quantity(lim):
            problems.append((where, f"{name} request {req!r} must equal its limit {lim!r}"))
        elif parse_quantity(req) > parse_quantity(lim):
            problems.append((where, f"request {req!r} exceeds the limit {lim!r}"))
    return problems
