"""Models of a run's ``container`` and ``environment`` (and the resource rules Kubernetes enforces).

  * ``run.container``: ``image`` (required), ``name`` (default "main"), ``command`` (a string is
    split like a shell does), ``args`` (a string is ONE argument, for ``command: [sh, -c]``),
    ``env`` [{name, value}], ``resources`` {limits, requests} (Kubernetes quantities; numbers are
    turned into strings; accelerator counts must be whole, accelerator requests need an equal
    limit, requests may not exceed limits), ``workingDir``, ``securityContext``, ``volumeMounts``,
    ``imagePullPolicy``, ``lifecycle``, ``ports``, the three probes, ``terminationMessage*``,
    ``stdin``, ``stdinOnce``, ``tty`` (Kubernetes' shapes: ``models_k8s``). All reach the pod.
  * ``run.environment``: nodeSelector, tolerations, affinity (validated: ``models_k8s.Affinity``),
    labels, annotations, priorityClassName, serviceAccountName and automountServiceAccountToken,
    volumes (``run.volumes``, where Polyaxon puts them, is accepted too and merged in first),
    imagePullSecrets, securityContext (the pod's), dnsPolicy, dnsConfig, hostAliases and
    restartPolicy (Never or OnFailure; Always is refused). hostNetwork, hostPID and hostIPC are
    refused when true. All reach the pod.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import (
    Args,
    Command,
    Int,
    Model,
    NonEmpty,
    Quantity,
    Str,
    dns_label,
)
from opsched.polyaxonfile.models_k8s import (
    Affinity,
    ContainerPort,
    HostAlias,
    Lifecycle,
    PodDNSConfig,
    PodSecurityContext,
    Probe,
    SecretName,
)
from opsched.proto import k8s_names
from opsched.proto.limits import MAX_ANNOTATIONS_BYTES, MAX_ENV_PER_CONTAINER, MAX_LABELS, MAX_LIST_ITEMS
from opsched.proto.resources import is_accelerator, parse_quantity
from opsched.proto.spec_checks import resource_problem
from opsched.proto.template_markers import has_template

Items = Field(max_length=MAX_LIST_ITEMS)


class EnvVarModel(Model):
    name: NonEmpty
    value: Str = ""


class ResourcesModel(Model):
    limits: dict[str, Quantity] = {}
    requests: dict[str, Quantity] = {}


class ContainerModel(Model):
    image: NonEmpty
    name: Annotated[str, AfterValidator(dns_label)] = "main"
    command: Command = []
    args: Args = []
    env: Annotated[list[EnvVarModel], Field(max_length=MAX_ENV_PER_CONTAINER)] = []
    resources: ResourcesModel = ResourcesModel()
    working_dir: str | None = None
    security_context: dict[str, Any] | None = None
    volume_mounts: Annotated[list[dict[str, Any]], Items] = []
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    lifecycle: Lifecycle | None = None
    ports: Annotated[list[ContainerPort], Items] = []
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    termination_message_path: str | None = None
    termination_message_policy: Literal["File", "FallbackToLogsOnError"] | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None


class TolerationModel(Model):
    """Kubernetes' toleration, with the API server's rules across its fields (else the pod would be refused only
    when the dispatcher creates it): ``tolerationSeconds`` needs ``effect: NoExecute``, ``Exists`` takes no value."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: Str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Int | None = None

    @model_validator(mode="after")
    def _as_kubernetes_takes_it(self) -> TolerationModel:
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds applies to effect NoExecute only (Kubernetes refuses it with "
                             f"{self.effect or 'no effect'})")
        if self.operator == "Exists" and self.value:
            raise ValueError("operator Exists takes no value (Kubernetes refuses one)")
        return self


def _restart_policy(value: Any) -> Any:
    if value == "Always":
        raise ValueError("restartPolicy: Always never lets a job end (its pod restarts forever); use Never "
                         "(retries are termination.maxRetries) or OnFailure")
    return value


def _host_namespace(value: Any) -> Any:
    if value is True:
        raise ValueError("sharing the node's network, PID or IPC namespace is refused: it bypasses pod "
                         "isolation (until a queue's security policy allows it)")
    return value


HostNamespace = Annotated[bool, BeforeValidator(_host_namespace)]


class EnvironmentModel(Model):
    node_selector: dict[str, Str] = {}
    tolerations: Annotated[list[TolerationModel], Items] = []
    affinity: Affinity | None = None
    labels: dict[str, Str] = {}
    annotations: dict[str, Str] = {}
    priority_class_name: str | None = None
    service_account_name: str | None = None
    automount_service_account_token: bool | None = None
    volumes: Annotated[list[dict[str, Any]], Items] = []
    image_pull_secrets: Annotated[list[SecretName], Items] = []
    security_context: PodSecurityContext | None = None
    dns_policy: Literal["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"] | None = None
    dns_config: PodDNSConfig | None = None
    host_aliases: Annotated[list[HostAlias], Items] = []
    restart_policy: Annotated[Literal["Never", "OnFailure"], BeforeValidator(_restart_policy)] | None = None
    host_network: HostNamespace | None = None
    host_pid: HostNamespace | None = Field(None, alias="hostPID")
    host_ipc: HostNamespace | None = Field(None, alias="hostIPC")


# --- checks that need more than one field (they report exact paths, which validators can't) ----

def check_resources(res: ResourcesModel, loc: Loc) -> list[Problem]:
    """Kubernetes rules the scheduler relies on: valid quantities (the contract's rule: whole accelerators
    and GiB of shared GPU memory, within the bounds), requests within limits."""
    problems: list[Problem] = []
    for section in ("limits", "requests"):
        for name, qty in getattr(res, section).items():
            problem = resource_problem(name, qty)
            if problem:
                problems.append((loc + (section, name), f"{name}: {problem}"))
    if problems:
        return problems
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


def check_metadata(env: EnvironmentModel, loc: Loc) -> list[Problem]:
    """Labels, annotations and node selectors as Kubernetes takes them (``proto.k8s_names``, the contract's)."""
    problems: list[Problem] = []
    if len(env.labels) > MAX_LABELS:
        problems.append((loc + ("labels",), f"{len(env.labels)} labels is above the limit of {MAX_LABELS}"))
    for section, values in (("labels", env.labels), ("nodeSelector", env.node_selector)):
        for key, value in values.items():
            value_problem = None if has_template(value) else k8s_names.label_value(value)  # checked once rendered
            problems += [(loc + (section, key), p) for p in (k8s_names.qualified_key(key), value_problem) if p]
    problems += [(loc + ("annotations", key), p) for key in env.annotations if (p := k8s_names.qualified_key(key))]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in env.annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        problems.append((loc + ("annotations",), f"{size} bytes of keys and values is above the limit of "
                                                  f"{MAX_ANNOTATIONS_BYTES}"))
    return problems
