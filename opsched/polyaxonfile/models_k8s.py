"""Kubernetes structures a polyaxonfile may carry into the pod, validated at the edge with Kubernetes'
shape (camelCase keys, unknown keys refused) so a malformed one is a field error, not a pod the API
server refuses later: ``affinity``, probes, ``lifecycle``, ports, the pod ``securityContext``,
``dnsConfig``, ``hostAliases`` and ``imagePullSecrets``. Each is dumped back as the pod's dict.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from opsched.polyaxonfile.fields import Int, Model, NonEmpty, Str

NonNegative = Annotated[Int, Field(ge=0)]
Port = Annotated[Int, Field(ge=1, le=65535)] | NonEmpty  # a number or a named port


# ---- affinity -------------------------------------------------------------------------------------

class NodeSelectorRequirement(Model):
    key: NonEmpty
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[Str] = []

    @model_validator(mode="after")
    def _values(self) -> "NodeSelectorRequirement":
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Gt", "Lt") and (len(self.values) != 1 or not self.values[0].lstrip("-").isdigit()):
            raise ValueError(f"operator {self.operator} needs exactly one integer value")
        return self


class NodeSelectorTerm(Model):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []

    @model_validator(mode="after")
    def _fields(self) -> "NodeSelectorTerm":
        if any(f.key != "metadata.name" or f.operator not in ("In", "NotIn") for f in self.match_fields):
            raise ValueError("matchFields supports only key metadata.name with In or NotIn")
        return self


class NodeSelector(Model):
    node_selector_terms: Annotated[list[NodeSelectorTerm], Field(min_length=1)]


class PreferredSchedulingTerm(Model):
    weight: Annotated[Int, Field(ge=1, le=100)]
    preference: NodeSelectorTerm


class NodeAffinity(Model):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class LabelSelectorRequirement(Model):
    key: NonEmpty
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[Str] = []


class LabelSelector(Model):
    match_labels: dict[str, Str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class PodAffinityTerm(Model):
    label_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    namespaces: list[str] = []
    topology_key: NonEmpty


class WeightedPodAffinityTerm(Model):
    weight: Annotated[Int, Field(ge=1, le=100)]
    pod_affinity_term: PodAffinityTerm


class PodAffinity(Model):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = []


class Affinity(Model):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


# ---- probes and lifecycle --------------------------------------------------------------------------

class ExecAction(Model):
    command: Annotated[list[str], Field(min_length=1)]


class HTTPHeader(Model):
    name: NonEmpty
    value: Str


class HTTPGetAction(Model):
    path: str | None = None
    port: Port
    host: str | None = None
    scheme: Literal["HTTP", "HTTPS"] | None = None
    http_headers: list[HTTPHeader] = []


class TCPSocketAction(Model):
    port: Port
    host: str | None = None


class Handler(Model):
    """Exactly one of exec, httpGet, tcpSocket."""

    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None

    @model_validator(mode="after")
    def _one(self) -> "Handler":
        if sum(x is not None for x in (self.exec, self.http_get, self.tcp_socket)) != 1:
            raise ValueError("set exactly one of exec, httpGet and tcpSocket")
        return self


class Probe(Handler):
    initial_delay_seconds: NonNegative | None = None
    timeout_seconds: Annotated[Int, Field(ge=1)] | None = None
    period_seconds: Annotated[Int, Field(ge=1)] | None = None
    success_threshold: Annotated[Int, Field(ge=1)] | None = None
    failure_threshold: Annotated[Int, Field(ge=1)] | None = None
    termination_grace_period_seconds: Annotated[Int, Field(ge=1)] | None = None


class Lifecycle(Model):
    """``preStop`` runs before the container is stopped: before a preemption or stop deletes the pod
    (the dispatcher deletes with a grace period), e.g. to write a checkpoint."""

    post_start: Handler | None = None
    pre_stop: Handler | None = None


class ContainerPort(Model):
    container_port: Annotated[Int, Field(ge=1, le=65535)]
    name: str | None = None
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    host_port: Annotated[Int, Field(ge=1, le=65535)] | None = None
    host_ip: str | None = Field(None, alias="hostIP")


# ---- the pod ----------------------------------------------------------------------------------------

class SeccompProfile(Model):
    type: Literal["RuntimeDefault", "Unconfined", "Localhost"]
    localhost_profile: str | None = None


class SELinuxOptions(Model):
    user: str | None = None
    role: str | None = None
    type: str | None = None
    level: str | None = None


class Sysctl(Model):
    name: NonEmpty
    value: Str


class PodSecurityContext(Model):
    run_as_user: NonNegative | None = None
    run_as_group: NonNegative | None = None
    run_as_non_root: bool | None = None
    fs_group: NonNegative | None = None
    supplemental_groups: list[NonNegative] = []
    fs_group_change_policy: Literal["OnRootMismatch", "Always"] | None = None
    seccomp_profile: SeccompProfile | None = None
    se_linux_options: SELinuxOptions | None = None
    sysctls: list[Sysctl] = []


class DNSConfigOption(Model):
    name: NonEmpty
    value: Str | None = None


class PodDNSConfig(Model):
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[DNSConfigOption] = []


class HostAlias(Model):
    ip: NonEmpty
    hostnames: Annotated[list[NonEmpty], Field(min_length=1)]


def _secret_name(value: Any) -> Any:
    """Kubernetes writes ``[{name: regcred}]``; a bare ``[regcred]`` is accepted too."""
    return value.get("name") if isinstance(value, dict) and set(value) == {"name"} else value


SecretName = Annotated[NonEmpty, BeforeValidator(_secret_name)]


def dump(model: Model | None) -> Any:
    """The Kubernetes dict of a validated structure (None stays None)."""
    return None if model is None else model.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
