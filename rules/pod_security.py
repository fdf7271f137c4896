"""A queue's pod security level, checked on the pods the dispatcher would create (every container: init,
main, ephemeral, of every pod of the attempt, replicas included).

The levels are Kubernetes' Pod Security Standards: ``privileged`` (no restriction), ``baseline`` (the
default: no known privilege escalation) and ``restricted`` (hardened). On top of them, at ``baseline`` and
``restricted``, opsched refuses what would undo its own isolation: a projected service-account token
volume (it undoes ``automountServiceAccountToken``), ``gitRepo`` volumes, ``secret`` volumes (and projected
secrets) unless the queue sets ``allowSecretVolumes`` (the volume of an admin-declared connection's Secret, which
``rules.podspec`` names ``opsched-conn-<name>``, is allowed: ``Policy.connection_secrets``), a toleration of every taint, and the system priority
classes; and what the queue does not list: a ``serviceAccountName`` not in its ``serviceAccounts``, a token
(``automountServiceAccountToken`` true, or unset with a service account named: the account's own setting,
which mounts one by default) without ``allowServiceAccountToken``, a ``priorityClassName`` not in its
``priorityClassNames``, a ``persistentVolumeClaim`` or ``nfs`` volume whose kind is not in its ``allowVolumes``
(``restricted`` refuses ``nfs`` whatever the queue allows: Pod Security admission would), an
``imagePullSecrets`` name not in its ``imagePullSecrets``. At ``privileged`` none of these apply (such a pod
may mount the node's files, the tokens of every pod on it included). At every level, opsched never puts a pod
into a system namespace, and no probe or lifecycle hook of a container may name a ``host`` (the kubelet would
connect there, from the node: the cloud metadata server at 169.254.169.254, another pod, the API server); the
pod's own IP is the default. The GPU-accounting refusals (``rules.gpu_accounting``) apply at every level too;
they are a separate policy.
"""
from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from opsched.proto.queues import DEFAULT_LEVEL, AllowableVolume, Connection, Level, QueuesConfig
from opsched.rules.podspec import CONNECTION_VOLUME_PREFIX

LEVELS: tuple[Level, ...] = ("privileged", "baseline", "restricted")  # least to most restrictive
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"  # Pod Security admission's namespace label
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = frozenset({"system-node-critical", "system-cluster-critical"})
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                          "net.ipv4.ip_unprivileged_port_start",
                          "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                          "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                          "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                                "projected", "secret"})
CONFINED_PROFILES = ("RuntimeDefault", "Localhost")  # seccomp and AppArmor profile types restricted allows
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_ANNOTATIONS = ("seccomp.security.alpha.kubernetes.io/pod", "container.seccomp.security.alpha.kubernetes.io/")
UNSET_OR_FALSE = (None, False)  # the only allowed values of a flag: "true", 1, "yes" are all refused
ALLOWABLE_VOLUMES: tuple[AllowableVolume, ...] = ("persistentVolumeClaim", "nfs")  # volume kinds refused unless the queue's allowVolumes lists them
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
LIFECYCLE_HOOKS = ("postStart", "preStop")
HOST_HANDLERS = ("httpGet", "tcpSocket")  # the handlers the kubelet connects to a host of (grpc and exec: none)
LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))


class Policy(NamedTuple):
    """What one queue allows its pods."""

    queue: str
    level: Level = DEFAULT_LEVEL
    secret_volumes: bool = False  # the queue's allowSecretVolumes
    service_accounts: tuple[str, ...] = ()  # its serviceAccounts: the serviceAccountName its pods may name
    service_account_token: bool = False  # its allowServiceAccountToken
    priority_class_names: tuple[str, ...] = ()  # its priorityClassNames: the pods' priorityClassName
    volumes: tuple[str, ...] = ()  # its allowVolumes: of ALLOWABLE_VOLUMES
    pull_secrets: tuple[str, ...] = ()  # its imagePullSecrets: the secrets its pods may pull images with
    # (volume name, Secret name) of the admin-declared connections its op names: allowed without allowSecretVolumes
    connection_secrets: tuple[tuple[str, str], ...] = ()


# Each Policy field after queue and level: (the attribute of a Queue and of an admitted event that carries it,
# the queue configuration's YAML key). Admission copies them from the queue into the event; the dispatcher
# builds its policy from the event and refuses an event whose values are not its queue's.
CARRIED = {
    "secret_volumes": ("allow_secret_volumes", "allowSecretVolumes"),
    "service_accounts": ("service_accounts", "serviceAccounts"),
    "service_account_token": ("allow_service_account_token", "allowServiceAccountToken"),
    "priority_class_names": ("priority_class_names", "priorityClassNames"),
    "volumes": ("allow_volumes", "allowVolumes"),
    "pull_secrets": ("image_pull_secrets", "imagePullSecrets"),
}


def policy_of(queue: str, source: Any, connections: Iterable[Connection] | None = None) -> Policy:
    """The policy carried by ``source``: a ``proto.queues.Queue`` or an ``OperationAdmitted`` (same attributes),
    with the Secrets of ``connections`` (default: the event's; they are checked against the configuration apart,
    ``rules.connections``)."""
    connections = getattr(source, "connections", ()) if connections is None else connections
    return Policy(queue, source.pod_security, secret_volumes=source.allow_secret_volumes,
                  service_accounts=tuple(source.service_accounts),
                  service_account_token=source.allow_service_account_token,
                  priority_class_names=tuple(source.priority_class_names), volumes=tuple(source.allow_volumes),
                  pull_secrets=tuple(source.image_pull_secrets), connection_secrets=connection_secrets(connections))


def connection_secrets(connections: Iterable[Connection]) -> tuple[tuple[str, str], ...]:
    """(volume name, Secret name) of each connection with a Secret, as ``rules.podspec`` mounts it."""
    return tuple((f"{CONNECTION_VOLUME_PREFIX}{c.name}", c.secret.name) for c in connections if c.secret is not None)


def carried(policy: Policy) -> dict[str, Any]:
    """The event fields that carry ``policy`` (``OperationAdmitted(**carried(policy))``), level included."""
    out: dict[str, Any] = {"pod_security": policy.level}
    for field, (attr, _) in CARRIED.items():
        value = getattr(policy, field)
        out[attr] = list(value) if isinstance(value, tuple) else value
    return out


def mismatches(carried_policy: Policy, own: Policy) -> list[str]:
    """How an event's policy differs from its queue's, each naming the queue key, the event's value and the
    queue's."""
    out: list[str] = []
    if carried_policy.level != own.level:
        out.append(f"pod security level {carried_policy.level!r} is not queue {own.queue}'s ({own.level!r})")
    for field, (_, key) in CARRIED.items():
        theirs, ours = getattr(carried_policy, field), getattr(own, field)
        if theirs != ours:
            out.append(f"{key} {_show(_listed(theirs))} is not queue {own.queue}'s ({_show(_listed(ours))})")
    return out


def _listed(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def policy_for(config: QueuesConfig, queue: str, connections: Iterable[Connection] = ()) -> Policy:
    """The policy of ``queue`` in ``config`` for an op naming ``connections``; an unknown queue gets the default
    level."""
    own = next((q for q in config.queues if q.name == queue), None)
    if own is None:
        return Policy(queue, connection_secrets=connection_secrets(connections))
    return policy_of(queue, own, connections)


def queue_namespace(namespace: str | None, default_namespace: str) -> str:
    """Where a queue's pods go: the queue's own ``namespace``, else the default one (``OPSCHED_NAMESPACE``)."""
    return namespace or default_namespace


def run_policy(config: QueuesConfig, queue: str, default_namespace: str) -> tuple[str, Policy] | None:
    """What an admitted op of ``queue`` may run with under ``config``: its namespace and its policy (level,
    the allowances of ``CARRIED``); None when ``config`` has no such queue. Admission admits with exactly this and the
    dispatcher refuses anything else."""
    own = next((q for q in config.queues if q.name == queue), None)
    if own is None:
        return None
    return queue_namespace(own.namespace, default_namespace), policy_for(config, queue)


def namespace_levels(config: QueuesConfig, default_namespace: str) -> dict[str, Level]:
    """The Pod Security admission level of each namespace opsched puts pods into: the least restrictive level
    of the queues sharing it (a namespace no queue uses, the default one, gets the default level)."""
    levels: dict[str, Level] = {}
    for q in config.queues:
        ns = queue_namespace(q.namespace, default_namespace)
        levels[ns] = min(levels.get(ns, q.pod_security), q.pod_security, key=LEVELS.index)
    levels.setdefault(default_namespace, DEFAULT_LEVEL)
    return levels


def check_pods(pods: Iterable[dict[str, Any]], policy: Policy) -> list[str]:
    """Every problem of an attempt's pods, once each (the pods of one replica group are alike)."""
    out: list[str] = []
    for pod in pods:
        replica = str(pod.get("metadata", {}).get("labels", {}).get("opsched.io/replica", "main"))
        prefix = "" if replica == "main" else f"replica {replica.rsplit('-', 1)[0]!r}: "
        out += [prefix + p for p in check_pod(pod, policy)]
    return list(dict.fromkeys(out))


def check_pod(pod: dict[str, Any], policy: Policy) -> list[str]:
    """Every way ``pod`` breaks ``policy``, each naming the field, its value, the queue and the level."""
    found = _Found(policy)
    namespace = pod.get("metadata", {}).get("namespace")
    if namespace in SYSTEM_NAMESPACES:
        found.refuse("metadata.namespace", namespace, "opsched never schedules into " + ", ".join(SYSTEM_NAMESPACES),
                     every_level=True)
    spec = _dict(pod.get("spec")) if policy.level == "privileged" else found.obj("spec", pod.get("spec"))
    _probe_hosts(spec, found)
    if policy.level == "privileged":
        return list(dict.fromkeys(found.items))
    _baseline_pod(spec, pod.get("metadata", {}).get("annotations") or {}, found)
    for path, sc in _security_contexts(spec, found):
        _baseline_context(path, sc, found)
    _opsched_rules(spec, policy, found)
    if policy.level == "restricted":
        _restricted(spec, policy, found)
    return list(dict.fromkeys(found.items))


class _Found:
    """The problems found so far, worded with the policy's queue and level."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.items = policy, list[str]()

    def refuse(self, path: str, value: Any, why: str = "", every_level: bool = False) -> None:
        p = self.policy
        where = (f"any pod security level (queue {p.queue})" if every_level
                 else f"queue {p.queue}'s pod security level {p.level}")
        self.items.append(f"{path}: {_show(value)} is not allowed by {where}" + (f" ({why})" if why else ""))

    def obj(self, path: str, value: Any) -> dict[str, Any]:
        """``value`` if it is an object; unset: {}; anything else is refused (never read as unset)."""
        if value is None or isinstance(value, dict):
            return value or {}
        self.refuse(path, value, "it must be an object")
        return {}

    def items_of(self, path: str, value: Any) -> list[Any]:
        if value is None or isinstance(value, list):
            return value or []
        self.refuse(path, value, "it must be a list")
        return []


def _dict(value: Any) -> dict[str, Any]:
    """``value`` if an object, else {} (a malformed value is refused by the baseline pass, once)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _containers(spec: dict[str, Any], found: _Found) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in CONTAINER_LISTS:
        for i, c in enumerate(found.items_of(f"spec.{kind}", spec.get(kind))):
            yield f"spec.{kind}[{i}]", found.obj(f"spec.{kind}[{i}]", c)


def _security_contexts(spec: dict[str, Any], found: _Found) -> Iterator[tuple[str, dict[str, Any]]]:
    """The pod's security context, then each container's (path, context)."""
    yield "spec.securityContext", found.obj("spec.securityContext", spec.get("securityContext"))
    for path, c in _containers(spec, found):
        yield f"{path}.securityContext", found.obj(f"{path}.securityContext", c.get("securityContext"))


def _baseline_pod(spec: dict[str, Any], annotations: dict[str, Any], found: _Found) -> None:
    _baseline_host(spec, found)
    _baseline_sysctls(spec, found)
    _baseline_annotations(annotations, found)


def _baseline_host(spec: dict[str, Any], found: _Found) -> None:
    """Nothing of the node's: its namespaces, its files, its ports."""
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field) not in UNSET_OR_FALSE:
            found.refuse(f"spec.{field}", spec[field], "it shares the node's namespaces")
    for i, vol in enumerate(found.items_of("spec.volumes", spec.get("volumes"))):
        if isinstance(vol, dict) and "hostPath" in vol:
            found.refuse(f"spec.volumes[{i}].hostPath", vol["hostPath"], "hostPath volumes reach the node's files")
    for path, c in _containers(spec, found):
        for j, port in enumerate(found.items_of(f"{path}.ports", c.get("ports"))):
            if isinstance(port, dict) and port.get("hostPort") not in (None, 0):
                found.refuse(f"{path}.ports[{j}].hostPort", port["hostPort"], "host ports are refused")


def _baseline_sysctls(spec: dict[str, Any], found: _Found) -> None:
    sc = _dict(spec.get("securityContext"))
    for j, sysctl in enumerate(found.items_of("spec.securityContext.sysctls", sc.get("sysctls"))):
        name = sysctl.get("name") if isinstance(sysctl, dict) else sysctl
        if name not in SAFE_SYSCTLS:
            found.refuse(f"spec.securityContext.sysctls[{j}].name", name, "only the safe sysctls are allowed")


def _baseline_annotations(annotations: dict[str, Any], found: _Found) -> None:
    """AppArmor and seccomp as annotations (older clusters read them): confined."""
    for key, value in annotations.items():
        confined = value == "runtime/default" or str(value).startswith("localhost/")
        if key.startswith(APPARMOR_ANNOTATION) and not confined:
            found.refuse(f"metadata.annotations[{key}]", value, "AppArmor must stay confined")
        if key.startswith(SECCOMP_ANNOTATIONS) and str(value).lower() == "unconfined":
            found.refuse(f"metadata.annotations[{key}]", value, "seccomp must stay confined")


def _baseline_context(path: str, sc: dict[str, Any], found: _Found) -> None:
    """The baseline rules of one security context (the pod's or a container's)."""
    if sc.get("privileged") not in UNSET_OR_FALSE:
        found.refuse(f"{path}.privileged", sc["privileged"], "privileged containers bypass isolation")
    windows = found.obj(f"{path}.windowsOptions", sc.get("windowsOptions"))
    if windows.get("hostProcess") not in UNSET_OR_FALSE:
        found.refuse(f"{path}.windowsOptions.hostProcess", windows["hostProcess"])
    caps = found.obj(f"{path}.capabilities", sc.get("capabilities"))
    for j, cap in enumerate(found.items_of(f"{path}.capabilities.add", caps.get("add"))):
        if _capability(cap) not in BASELINE_CAPABILITIES:
            found.refuse(f"{path}.capabilities.add[{j}]", cap, "only the baseline capabilities may be added")
    for kind in ("seccompProfile", "appArmorProfile"):
        profile = found.obj(f"{path}.{kind}", sc.get(kind))
        if "type" in profile and profile["type"] not in CONFINED_PROFILES:
            found.refuse(f"{path}.{kind}.type", profile["type"], "it must be RuntimeDefault or Localhost")
    _baseline_selinux(path, sc, found)
    if sc.get("procMount") not in (None, "Default"):
        found.refuse(f"{path}.procMount", sc["procMount"], "it must be Default")


def _baseline_selinux(path: str, sc: dict[str, Any], found: _Found) -> None:
    selinux = found.obj(f"{path}.seLinuxOptions", sc.get("seLinuxOptions"))
    if selinux.get("type", "") not in SELINUX_TYPES:
        found.refuse(f"{path}.seLinuxOptions.type", selinux["type"], "only the container SELinux types are allowed")
    for field in ("user", "role"):
        if selinux.get(field) not in (None, ""):
            found.refuse(f"{path}.seLinuxOptions.{field}", selinux[field], "it must be unset")


def _root(uid: Any) -> bool:
    """User 0, however written (0, 0.0, "0")."""
    try:
        return not isinstance(uid, bool) and uid is not None and float(uid) == 0
    except (TypeError, ValueError):
        return False


def _capability(cap: Any) -> str:
    """A capability as PSS names it: ``cap_sys_admin`` and ``CAP_SYS_ADMIN`` are SYS_ADMIN (runtimes accept both)."""
    name = str(cap).upper()
    return name[4:] if name.startswith("CAP_") else name


def _opsched_rules(spec: dict[str, Any], policy: Policy, found: _Found) -> None:
    """What would undo opsched's own isolation of an op's pod, and what its queue does not list (baseline and
    restricted)."""
    _volumes(spec, policy, found)
    for i, tol in enumerate(found.items_of("spec.tolerations", spec.get("tolerations"))):
        if isinstance(tol, dict) and not tol.get("key") and tol.get("operator") == "Exists":
            found.refuse(f"spec.tolerations[{i}]", tol, "it tolerates every taint of every node")
    priority_class = spec.get("priorityClassName")
    if priority_class in SYSTEM_PRIORITY_CLASSES:
        found.refuse("spec.priorityClassName", priority_class, "system priority classes are for the "
                     "cluster's own components")
    elif priority_class is not None and priority_class not in policy.priority_class_names:
        found.refuse("spec.priorityClassName", priority_class,
                     f"the queue's priorityClassNames {_allows(policy.priority_class_names)} does not list it")
    _identity(spec, policy, found)


def _volumes(spec: dict[str, Any], policy: Policy, found: _Found) -> None:
    """No gitRepo; secrets (also projected ones) and the allowable kinds only as the queue allows; no
    projected token."""
    for i, vol in enumerate(found.items_of("spec.volumes", spec.get("volumes"))):
        vol = vol if isinstance(vol, dict) else {}
        if "gitRepo" in vol:
            found.refuse(f"spec.volumes[{i}].gitRepo", vol["gitRepo"], "gitRepo volumes run git on the node")
        if "secret" in vol and not policy.secret_volumes and not _connection_secret(vol, policy):
            found.refuse(f"spec.volumes[{i}].secret", vol["secret"], "the queue does not set allowSecretVolumes")
        for kind in ALLOWABLE_VOLUMES:
            if kind in vol and kind not in policy.volumes:
                found.refuse(f"spec.volumes[{i}].{kind}", vol[kind], "the queue's allowVolumes "
                             f"{_allows(policy.volumes)} does not list {kind}")
        projected = found.obj(f"spec.volumes[{i}].projected", vol.get("projected"))
        for j, source in enumerate(found.items_of(f"spec.volumes[{i}].projected.sources", projected.get("sources"))):
            at = f"spec.volumes[{i}].projected.sources[{j}]"
            source = source if isinstance(source, dict) else {}
            if "serviceAccountToken" in source:
                found.refuse(f"{at}.serviceAccountToken", source["serviceAccountToken"],
                             "a projected token undoes automountServiceAccountToken")
            if "secret" in source and not policy.secret_volumes:
                found.refuse(f"{at}.secret", source["secret"], "the queue does not set allowSecretVolumes")


def _connection_secret(volume: dict[str, Any], policy: Policy) -> bool:
    """The Secret volume of an admin-declared connection the op names (its name and Secret as opsched mounts it)."""
    secret = volume.get("secret")
    return isinstance(secret, dict) and (volume.get("name"), secret.get("secretName")) in policy.connection_secrets \
        and set(secret) == {"secretName"}


def _identity(spec: dict[str, Any], policy: Policy, found: _Found) -> None:
    """The service account, its token and the image pull secrets: only what the queue lists."""
    account = spec.get("serviceAccountName")
    if account is not None and account not in policy.service_accounts:
        found.refuse("spec.serviceAccountName", account,
                     f"the queue's serviceAccounts {_allows(policy.service_accounts)} does not list it")
    automount = spec.get("automountServiceAccountToken")
    if automount is not False and not policy.service_account_token:
        why = ("unset, the service account's own setting holds, which mounts a token by default; set it false"
               if automount is None else "it mounts the service account's token")
        found.refuse("spec.automountServiceAccountToken", automount,
                     f"{why}; the queue does not set allowServiceAccountToken")
    for i, secret in enumerate(found.items_of("spec.imagePullSecrets", spec.get("imagePullSecrets"))):
        name = secret.get("name") if isinstance(secret, dict) else secret
        if not isinstance(secret, dict) or name not in policy.pull_secrets:
            found.refuse(f"spec.imagePullSecrets[{i}].name", name,
                         f"the queue's imagePullSecrets {_allows(policy.pull_secrets)} does not list it")


def _allows(names: tuple[str, ...]) -> str:
    return "[" + ", ".join(names) + "]" if names else "(unset: none)"


def _probe_hosts(spec: dict[str, Any], found: _Found) -> None:
    """Every level: no probe or lifecycle hook connects the kubelet to a host but the pod's own IP."""
    for kind in CONTAINER_LISTS:
        for i, c in enumerate(_list(spec.get(kind))):
            c = _dict(c)
            handlers = [(p, _dict(c.get(p))) for p in PROBES]
            lifecycle = _dict(c.get("lifecycle"))
            handlers += [(f"lifecycle.{h}", _dict(lifecycle.get(h))) for h in LIFECYCLE_HOOKS]
            for name, handler in handlers:
                for action in HOST_HANDLERS:
                    host = _dict(handler.get(action)).get("host")
                    if host not in (None, ""):
                        path = f"spec.{kind}[{i}].{name}.{action}.host"
                        why = ("it is link-local (the cloud metadata server is 169.254.169.254)" if _link_local(host)
                               else "the kubelet would connect to it from the node; only the pod's own IP, the "
                               "default, is allowed")
                        found.refuse(path, host, why, every_level=True)


def _link_local(host: Any) -> bool:
    try:
        address = ipaddress.ip_address(str(host).strip("[]"))
    except ValueError:
        return False
    return any(address in net for net in LINK_LOCAL if net.version == address.version)


def _restricted(spec: dict[str, Any], policy: Policy, found: _Found) -> None:
    refused = {"hostPath", "gitRepo", *(k for k in ALLOWABLE_VOLUMES if k not in policy.volumes)}  # already
    for i, vol in enumerate(found.items_of("spec.volumes", spec.get("volumes"))):
        kinds = sorted(k for k in (vol if isinstance(vol, dict) else {}) if k != "name")
        for kind in kinds:
            if kind not in RESTRICTED_VOLUMES and kind not in refused:
                found.refuse(f"spec.volumes[{i}].{kind}", vol[kind], "restricted allows only "
                             + ", ".join(sorted(RESTRICTED_VOLUMES)) + " volumes")
    pod_sc = _dict(spec.get("securityContext"))
    if _root(pod_sc.get("runAsUser")):
        found.refuse("spec.securityContext.runAsUser", pod_sc["runAsUser"], "it must not run as root")
    for path, c in _containers(spec, found):
        sc = _dict(c.get("securityContext"))
        _restricted_container(f"{path}.securityContext", sc, pod_sc, found)


def _restricted_container(path: str, sc: dict[str, Any], pod_sc: dict[str, Any], found: _Found) -> None:
    if sc.get("allowPrivilegeEscalation") is not False:
        found.refuse(f"{path}.allowPrivilegeEscalation", sc.get("allowPrivilegeEscalation"), "it must be false")
    caps = _dict(sc.get("capabilities"))
    drop = _list(caps.get("drop"))
    if "ALL" not in {_capability(c) for c in drop}:
        found.refuse(f"{path}.capabilities.drop", caps.get("drop"), "it must include ALL")
    add = _list(caps.get("add"))
    for j, cap in enumerate(add):
        if _capability(cap) not in RESTRICTED_CAPABILITIES:
            found.refuse(f"{path}.capabilities.add[{j}]", cap, "restricted allows only NET_BIND_SERVICE")
    if _root(sc.get("runAsUser")):
        found.refuse(f"{path}.runAsUser", sc["runAsUser"], "it must not run as root")
    non_root = sc["runAsNonRoot"] if "runAsNonRoot" in sc else pod_sc.get("runAsNonRoot")
    if non_root is not True:
        found.refuse(f"{path}.runAsNonRoot", non_root, "runAsNonRoot: true is required, here or in the pod's securityContext")
    seccomp = sc.get("seccompProfile") or pod_sc.get("seccompProfile")
    kind = seccomp.get("type") if isinstance(seccomp, dict) else seccomp
    if kind not in CONFINED_PROFILES:
        found.refuse(f"{path}.seccompProfile.type", kind, "RuntimeDefault or Localhost is required, here or in "
                     "the pod's securityContext")
