"""Build the Pods of one attempt of an admitted operation, as plain dicts (fast to serialise).

An attempt is one pod (the main container) or a gang: the main pod plus ``count`` pods per replica
group, each with its group's container and restartPolicy and the same labels, annotations and placement, and
each given its run kind's rendezvous (``rules.rendezvous``: hostnames in a headless Service, the framework's env). A pod's init steps
are its init containers, in order (``rules.init_steps``), its sidecars come after its main container, and a pod
with either gets Polyaxon's context: an emptyDir ``opsched-context`` mounted at ``/plx-context`` in every
container (and an emptyDir per init step ``path`` outside it, ``opsched-init-<k>``, mounted at that path in
every container). A connection gives the container that names it its ``env`` and its Secret (mounted read-only
at its ``mountPath``, volume ``opsched-conn-<name>``; else its ``items`` as ``secretKeyRef`` env vars; else
``envFrom``): the main container gets the pod's ``connections``, an init step its own. Accelerators
appear only as limits, with requests equal to limits. Labels carry the op id, queue, attempt, the
pod's replica (``main`` or ``<role>-<i>``: ``rules.replica_roles``) and the gang size, so the watcher can map a pod back to
its attempt from the API alone. Admission's placement (the flavor's node labels and tolerations) is
merged into the op's own; the flavors chosen are annotated.
"""
from __future__ import annotations

import json
from typing import Any

from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import DEFAULT_INIT_IMAGE, Connection
from opsched.proto.resources import GPU_MEMORY, QuantityError, gpu_memory_gib, is_accelerator, parse_quantity
from opsched.proto.spec import CONTEXT_ROOT, Container, Environment, InitStep, OpSpec, ReplicaGroup
from opsched.rules import init_steps, rendezvous, serving
from opsched.rules.naming import pod_names
from opsched.rules.replica_roles import pods_of, replica_label

NVIDIA_RESOURCES = ("nvidia.com/gpu", GPU_MEMORY)  # their device plugins set NVIDIA_VISIBLE_DEVICES
NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
VOID = "void"  # the NVIDIA container runtime's "no device": set on every container given none
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "opsched"
LABEL_OP = "opsched.io/op-id"
LABEL_QUEUE = "opsched.io/queue"
LABEL_ATTEMPT = "opsched.io/attempt"
LABEL_BORROWING = "opsched.io/borrowing"  # "true" when admitted on quota borrowed from the cohort
LABEL_REPLICA = "opsched.io/replica"  # "main" or "<group>-<i>"
LABEL_GANG_SIZE = "opsched.io/gang-size"  # every pod of the attempt, the main one included
MAIN_REPLICA = "main"
ANNOTATION_NAME = "opsched.io/op-name"
ANNOTATION_FLAVORS = "opsched.io/flavors"  # JSON {resource: flavor} chosen by admission
SELECTOR = f"{MANAGED_BY}={MANAGER}"
# Set by the dispatcher before it deletes pods on purpose (never by users): such a deletion is not a failure.
ANNOTATION_PREEMPTED_BY = "opsched.io/preempted-by"  # the preemptor's op id
ANNOTATION_PREEMPT_REASON = "opsched.io/preempt-reason"
ANNOTATION_PREEMPT_MESSAGE = "opsched.io/preempt-message"
ANNOTATION_STOPPED = "opsched.io/stopped"  # "true"
ANNOTATION_TTL = "opsched.io/ttl-seconds"  # termination.ttl: delete the finished pod this long after its end
ANNOTATION_PENDING_TIMEOUT = "opsched.io/pending-timeout-seconds"  # the queue's pendingTimeout
ANNOTATION_DESCRIPTION = "opsched.io/description"  # the polyaxonfile's description
MAX_DESCRIPTION = 4096
ANNOTATION_EVICTED = "opsched.io/evicted"  # why: "gang_timeout", "gang_failed", "pod_rejected"
RELEASE_ANNOTATIONS = (ANNOTATION_PREEMPTED_BY, ANNOTATION_PREEMPT_REASON, ANNOTATION_PREEMPT_MESSAGE,
                       ANNOTATION_STOPPED, ANNOTATION_EVICTED)
# Set by the dispatcher when tracing is on (never by users): the W3C traceparent of the span that created the pod
ANNOTATION_TRACEPARENT = "opsched.io/traceparent"
# admitted onto new nodes of a node pool (``OperationAdmitted.provisioning``): the pools awaited, and how long an
# unbound pod may wait for them (``dispatcher.expiry``, ``dispatcher.gang``: ``node_not_provisioned``)
ANNOTATION_POOL = "opsched.io/pool"
ANNOTATION_PROVISIONING_TIMEOUT = "opsched.io/provisioning-timeout-seconds"
PROVISIONING_ANNOTATIONS = (ANNOTATION_POOL, ANNOTATION_PROVISIONING_TIMEOUT)
WATCHED_ANNOTATIONS = (*RELEASE_ANNOTATIONS, ANNOTATION_TRACEPARENT, serving.ANNOTATION_PORTS,
                       *PROVISIONING_ANNOTATIONS)  # what the pod watch reads


CONTEXT_VOLUME = "opsched-context"  # Polyaxon's context, mounted at CONTEXT_ROOT
INIT_VOLUME_PREFIX = "opsched-init-"  # + k: the k-th init step path outside CONTEXT_ROOT
CONNECTION_VOLUME_PREFIX = "opsched-conn-"  # + a connection's name: its Secret
# names (or prefixes) of opsched's; an mpijob's launcher mounts its hostfile ConfigMap as rendezvous.HOSTFILE_VOLUME
RESERVED_VOLUMES = (CONTEXT_VOLUME, INIT_VOLUME_PREFIX, CONNECTION_VOLUME_PREFIX, rendezvous.HOSTFILE_VOLUME)


HOSTNAME_LABEL = "kubernetes.io/hostname"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
PREFERRED_WEIGHT = 100  # the most a preferred term may weigh: the node admission placed the pod on


def attempt_selector(op_id: str, attempt: int) -> str:
    """The label selector of every pod of one attempt."""
    return f"{SELECTOR},{LABEL_OP}={op_id},{LABEL_ATTEMPT}={attempt}"


def build_pods(admitted: OperationAdmitted) -> list[dict[str, Any]]:
    """Every pod of the attempt: the main pod first, then a service's replicas of it (``rules.serving``: they serve
    alike, no rendezvous), or each replica group's pods in order (``rules.replica_roles.pods_of``) with their
    rendezvous (``rules.rendezvous``)."""
    spec = admitted.spec
    names = pod_names(admitted.op_id, admitted.attempt, spec)
    size = len(names)
    hosts = list(admitted.preferred_hosts) + [""] * size
    if serving.serves(spec):
        return [build_pod(admitted, gang_size=size, host=hosts[0])] + [
            build_pod(admitted, name=name, replica=f"{serving.REPLICA}-{i}", gang_size=size, host=hosts[i])
            for i, name in enumerate(names[1:], 1)]
    pods = []
    for i, (name, role) in enumerate(zip(names, pods_of(spec))):
        if role.is_main:
            pods.append(build_pod(admitted, gang_size=size, host=hosts[i]))
        else:
            pods.append(build_pod(admitted, name=name, replica=replica_label(role), group=role.group,
                                  gang_size=size, host=hosts[i]))
    rendezvous.apply(pods, spec, admitted.namespace)
    return pods


def _owned(admitted: OperationAdmitted) -> dict[str, str]:
    """The labels of what the dispatcher creates for an attempt besides its pods (its Service, its ConfigMap)."""
    return {MANAGED_BY: MANAGER, LABEL_OP: admitted.op_id, LABEL_ATTEMPT: str(admitted.attempt)}


def rendezvous_service(admitted: OperationAdmitted) -> dict[str, Any] | None:
    """The Service the attempt's pods need, created before them: a service's ClusterIP Service (``rules.serving``),
    else a gang's headless rendezvous Service (``rules.rendezvous``) selecting every pod of the attempt; None for a
    one-pod job."""
    labels = _owned(admitted)
    if serving.serves(admitted.spec):
        return serving.service_object(admitted.pod_name, admitted.namespace, admitted.spec, labels, labels)
    if not rendezvous.is_gang(admitted.spec):
        return None
    return rendezvous.service(admitted.spec, admitted.pod_name, admitted.namespace, labels, labels)


def rendezvous_config_map(admitted: OperationAdmitted) -> dict[str, Any] | None:
    """An mpijob attempt's hostfile ConfigMap (``rules.rendezvous``); None for every other attempt."""
    return rendezvous.config_map(admitted.spec, admitted.pod_name, admitted.namespace, _owned(admitted))


def build_pod(admitted: OperationAdmitted, *, name: str | None = None, replica: str = MAIN_REPLICA,
              group: ReplicaGroup | None = None, gang_size: int | None = None,
              host: str | None = None) -> dict[str, Any]:
    """One pod of the attempt: by default its main pod (named by the admitted event), else a pod of replica
    ``group``. ``host``: the node it prefers (admission's placement; default: the main pod's ``preferred_hosts``)."""
    if host is None:
        host = admitted.preferred_hosts[0] if admitted.preferred_hosts else ""
    spec, env = admitted.spec, admitted.spec.environment
    size = gang_size if gang_size is not None else len(pod_names(admitted.op_id, admitted.attempt, spec))
    init, containers, volumes = _containers(admitted, group if group is not None else spec)
    pod_spec: dict[str, Any] = {
        "restartPolicy": ((group.restart_policy if group is not None else env.restart_policy)
                          or (serving.RESTART_POLICY if serving.serves(spec) else "Never")),
        "containers": containers,
    }
    optional = {
        "initContainers": init or None,
        **_placement(admitted),
        "affinity": preferring(env.affinity, host),
        "activeDeadlineSeconds": spec.termination.timeout or None,
        "priorityClassName": env.priority_class_name,
        "serviceAccountName": env.service_account_name,
        "automountServiceAccountToken": _automount(env),
        "volumes": [*env.volumes, *volumes] or None,
        "imagePullSecrets": [{"name": n} for n in env.image_pull_secrets] or None,
        "securityContext": env.security_context,
        "dnsPolicy": env.dns_policy,
        "dnsConfig": env.dns_config,
        "hostAliases": list(env.host_aliases) or None,
    }
    pod_spec.update({k: v for k, v in optional.items() if v is not None})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name or admitted.pod_name,
            "namespace": admitted.namespace,
            "labels": {**_labels(admitted), LABEL_REPLICA: replica, LABEL_GANG_SIZE: str(size)},
            "annotations": _annotations(admitted),
        },
        "spec": pod_spec,
    }


def preferring(affinity: dict[str, Any] | None, host: str) -> dict[str, Any] | None:
    """The pod's affinity with, for ``host``, a preferred node term of weight 100 on ``kubernetes.io/hostname``
    added to the op's own preferred terms (its required terms stay as written)."""
    if not host:
        return affinity
    term = {"weight": PREFERRED_WEIGHT, "preference": {"matchExpressions": [
        {"key": HOSTNAME_LABEL, "operator": "In", "values": [host]}]}}
    out = dict(affinity or {})
    node = dict(out.get("nodeAffinity") or {})
    node[PREFERRED] = [*(node.get(PREFERRED) or []), term]
    out["nodeAffinity"] = node
    return out


def gets_nvidia_device(limits: dict[str, str]) -> bool:
    """Whether a container's limits give it an NVIDIA device (a GPU, or shared GPU memory) for the device plugin to
    expose: a limit above zero. Absent, ``0`` or not a quantity: none (the container gets ``NVIDIA_VISIBLE_DEVICES=void``)."""
    for name in NVIDIA_RESOURCES:
        try:
            if name in limits and parse_quantity(limits[name]) > 0:
                return True
        except QuantityError:
            continue
    return False


def _unit(resource: str, value: str) -> str:
    """Shared GPU memory in the device plugin's unit (a count of GiB: ``8Gi`` -> ``8``); else as written."""
    return str(gpu_memory_gib(value)) if resource == GPU_MEMORY else value


def _automount(env: Environment) -> bool | None:
    """As the user set it; unset: no token, unless they name a service account (whose own setting then holds)."""
    if env.automount_service_account_token is not None:
        return env.automount_service_account_token
    return None if env.service_account_name else False


def _labels(admitted: OperationAdmitted) -> dict[str, str]:
    labels = {**admitted.spec.environment.labels, MANAGED_BY: MANAGER, LABEL_OP: admitted.op_id,
              LABEL_QUEUE: admitted.queue, LABEL_ATTEMPT: str(admitted.attempt)}
    for key in (LABEL_BORROWING, LABEL_REPLICA, LABEL_GANG_SIZE):
        labels.pop(key, None)  # only admission (borrowing) and the dispatcher set these
    if admitted.borrowing:
        labels[LABEL_BORROWING] = "true"
    return labels


def _annotations(admitted: OperationAdmitted) -> dict[str, str]:
    annotations = {**admitted.spec.environment.annotations, ANNOTATION_NAME: admitted.spec.name}
    for key in (ANNOTATION_FLAVORS, *WATCHED_ANNOTATIONS):
        annotations.pop(key, None)  # a user annotation must not fake a release (or a trace) by the dispatcher
    annotations.pop(ANNOTATION_TTL, None)
    annotations.pop(ANNOTATION_PENDING_TIMEOUT, None)
    spec = admitted.spec
    ttl = spec.termination.ttl if spec.termination.ttl is not None else (0 if spec.clean_pod_policy == "All" else None)
    if ttl is not None:  # cleanPodPolicy All: every pod of the gang is deleted once it has ended
        annotations[ANNOTATION_TTL] = str(ttl)
    if spec.description:
        annotations[ANNOTATION_DESCRIPTION] = spec.description[:MAX_DESCRIPTION]
    if admitted.pending_timeout_s is not None:
        annotations[ANNOTATION_PENDING_TIMEOUT] = f"{admitted.pending_timeout_s:g}"
    pools = sorted({pool for pool in admitted.provisioning if pool})
    if pools and admitted.provisioning_timeout_s is not None:  # its nodes are being added: it may wait that long
        annotations[ANNOTATION_POOL] = ",".join(pools)
        annotations[ANNOTATION_PROVISIONING_TIMEOUT] = f"{admitted.provisioning_timeout_s:g}"
    annotations.update(serving.ports_annotation(spec))  # a service's pods: the watcher reads its ports here
    if admitted.flavors:
        annotations[ANNOTATION_FLAVORS] = json.dumps(admitted.flavors, sort_keys=True, separators=(",", ":"))
    return annotations


def _placement(admitted: OperationAdmitted) -> dict[str, Any]:
    """The op's own placement plus admission's: the flavor's labels win (its quota was charged),
    admission's tolerations are added to the op's, once each."""
    env = admitted.spec.environment
    selector = {**env.node_selector, **admitted.node_selector}
    tolerations: list[dict[str, Any]] = []
    for toleration in (*env.tolerations, *admitted.tolerations):
        if toleration not in tolerations:
            tolerations.append(dict(toleration))
    return {"nodeSelector": selector or None, "tolerations": tolerations or None}


def _containers(admitted: OperationAdmitted, pod: OpSpec | ReplicaGroup
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A pod's init containers, its containers (the main one, then its sidecars) and the volumes opsched adds
    (its context, its init paths', its connections' Secrets)."""
    declared = {c.name: c for c in admitted.connections}
    mounts, volumes = _context(pod.init, bool(pod.sidecars))
    image = admitted.init_image or DEFAULT_INIT_IMAGE
    init = []
    for i, step in enumerate(pod.init):
        connection = _declared(declared, step.connection) if step.connection else None
        built = _mounted(_container(init_steps.container_of(step, i, image, connection)), mounts)
        if connection is not None:
            volumes += _connect(built, connection, git=step.git is not None)
        init.append(built)
    main = _mounted(_container(pod.container), mounts)
    probe = serving.default_probe(admitted.spec) if pod is admitted.spec else None
    if probe is not None:
        main["readinessProbe"] = probe
    for name in pod.connections:
        volumes += _connect(main, _declared(declared, name), git=False)
    sidecars = [_mounted(_container(c), mounts) for c in pod.sidecars]
    return init, [main, *sidecars], list({v["name"]: v for v in volumes}.values())


def _declared(declared: dict[str, Connection], name: str) -> Connection:
    if name not in declared:  # admission resolves every name it admits (``rules.connections``)
        raise ValueError(f"connection {name!r} is named by the op but not declared on its admitted event")
    return declared[name]


def under_context(path: str) -> bool:
    """Whether ``path`` is in the context volume (``CONTEXT_ROOT`` or below)."""
    return path.rstrip("/") == CONTEXT_ROOT or path.startswith(CONTEXT_ROOT + "/")


def _context(init: list[InitStep], sidecars: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The mounts every container of the pod gets, and their volumes: none without init steps or sidecars."""
    if not init and not sidecars:
        return [], []
    mounts = [{"name": CONTEXT_VOLUME, "mountPath": CONTEXT_ROOT}]
    volumes: list[dict[str, Any]] = [{"name": CONTEXT_VOLUME, "emptyDir": {}}]
    outside = dict.fromkeys(s.path.rstrip("/") for s in init if s.path and not under_context(s.path))
    for k, path in enumerate(outside):
        mounts.append({"name": f"{INIT_VOLUME_PREFIX}{k}", "mountPath": path})
        volumes.append({"name": f"{INIT_VOLUME_PREFIX}{k}", "emptyDir": {}})
    return mounts, volumes


def _mounted(container: dict[str, Any], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    if mounts:
        container["volumeMounts"] = [*container.get("volumeMounts", []), *(dict(m) for m in mounts)]
    return container


def _connect(container: dict[str, Any], connection: Connection, *, git: bool) -> list[dict[str, Any]]:
    """Give ``container`` what ``connection`` holds (its env and its Secret, by name only); the volumes it needs.
    A git step's container has the Secret mounted at ``init_steps.GIT_CREDENTIALS``, whatever it says."""
    _add_env(container, [{"name": e.name, "value": e.value} for e in connection.env])
    secret = connection.secret
    if secret is None:
        return []
    path = init_steps.GIT_CREDENTIALS if git else secret.mount_path
    if path is not None:
        volume = f"{CONNECTION_VOLUME_PREFIX}{connection.name}"
        container.setdefault("volumeMounts", []).append({"name": volume, "mountPath": path, "readOnly": True})
        return [{"name": volume, "secret": {"secretName": secret.name}}]
    if secret.items:
        _add_env(container, [{"name": key, "valueFrom": {"secretKeyRef": {"name": secret.name, "key": key}}}
                             for key in secret.items])
    else:
        container.setdefault("envFrom", []).append({"secretRef": {"name": secret.name}})
    return []


def _add_env(container: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """``entries`` after the container's own env, before the ``NVIDIA_VISIBLE_DEVICES=void`` it may end with."""
    env = container.setdefault("env", [])
    at = len(env) - 1 if env and env[-1] == {"name": NVIDIA_VISIBLE_DEVICES, "value": VOID} else len(env)
    env[at:at] = entries


def _container(c: Container) -> dict[str, Any]:
    limits = {name: _unit(name, value) for name, value in c.resources.limits.items()}
    requests = {name: _unit(name, value) for name, value in c.resources.requests.items()}
    for name, value in limits.items():
        if is_accelerator(name):
            requests[name] = value  # extended resources: requests equal limits
    container: dict[str, Any] = {"name": c.name, "image": c.image}
    if c.command:
        container["command"] = list(c.command)
    if c.args:
        container["args"] = list(c.args)
    env = [{"name": e.name, "value": e.value} for e in c.env]
    if not gets_nvidia_device(limits):
        env.append({"name": NVIDIA_VISIBLE_DEVICES, "value": VOID})  # an image's default `all` reaches no GPU
    container["env"] = env
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    if resources:
        container["resources"] = resources
    optional = {
        "workingDir": c.working_dir, "securityContext": c.security_context,
        "volumeMounts": list(c.volume_mounts) or None, "imagePullPolicy": c.image_pull_policy,
        "lifecycle": c.lifecycle, "ports": list(c.ports) or None, "livenessProbe": c.liveness_probe,
        "readinessProbe": c.readiness_probe, "startupProbe": c.startup_probe,
        "terminationMessagePath": c.termination_message_path,
        "terminationMessagePolicy": c.termination_message_policy,
        "stdin": c.stdin, "stdinOnce": c.stdin_once, "tty": c.tty,
    }
    container.update({k: v for k, v in optional.items() if v is not None and v != {}})
    return container
