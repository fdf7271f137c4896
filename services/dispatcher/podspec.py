"""Build the Pod for one attempt of an admitted operation, as a plain dict (fast to serialise).

Accelerators appear only as limits, with requests equal to limits. Labels carry the op id, queue
and attempt, so the watcher can map a pod back to its operation.
"""
from __future__ import annotations

from typing import Any

from proto.events import OperationAdmitted
from proto.resources import is_accelerator

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "opsched"
LABEL_OP = "opsched.io/op-id"
LABEL_QUEUE = "opsched.io/queue"
LABEL_ATTEMPT = "opsched.io/attempt"
ANNOTATION_NAME = "opsched.io/op-name"
SELECTOR = f"{MANAGED_BY}={MANAGER}"


def build_pod(admitted: OperationAdmitted) -> dict[str, Any]:
    spec, env = admitted.spec, admitted.spec.environment
    labels = {**env.labels, MANAGED_BY: MANAGER, LABEL_OP: admitted.op_id,
              LABEL_QUEUE: admitted.queue, LABEL_ATTEMPT: str(admitted.attempt)}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [_container(admitted)],
        "automountServiceAccountToken": False,
    }
    optional = {
        "nodeSelector": dict(env.node_selector) or None,
        "tolerations": list(env.tolerations) or None,
        "affinity": env.affinity,
        "activeDeadlineSeconds": spec.termination.timeout or None,
        "priorityClassName": env.priority_class_name,
        "serviceAccountName": env.service_account_name,
        "volumes": list(env.volumes) or None,
    }
    pod_spec.update({k: v for k, v in optional.items() if v is not None})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": admitted.pod_name,
            "namespace": admitted.namespace,
            "labels": labels,
            "annotations": {**env.annotations, ANNOTATION_NAME: spec.name},
        },
        "spec": pod_spec,
    }


def _container(admitted: OperationAdmitted) -> dict[str, Any]:
    c = admitted.spec.container
    limits = dict(c.resources.limits)
    requests = dict(c.resources.requests)
    for name, value in limits.items():
        if is_accelerator(name):
            requests[name] = value  # extended resources: requests equal limits
    container: dict[str, Any] = {"name": c.name, "image": c.image}
    if c.command:
        container["command"] = list(c.command)
    if c.args:
        container["args"] = list(c.args)
    if c.env:
        container["env"] = [{"name": e.name, "value": e.value} for e in c.env]
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    if resources:
        container["resources"] = resources
    for key, value in (("workingDir", c.working_dir), ("securityContext", c.security_context)):
        if value:
            container[key] = value
    if c.volume_mounts:
        container["volumeMounts"] = list(c.volume_mounts)
    return container
