"""Build the Pod for one attempt of an admitted operation, as a plain dict (fast to serialise).

Accelerators appear only as limits, with requests equal to limits. Labels carry the op id, queue
and attempt, so the watcher can map a pod back to its operation. Admission's placement (the flavor's
node labels and tolerations) is merged into the op's own; the flavors chosen are annotated.
"""
from __future__ import annotations

import json
from typing import Any

from proto.events import OperationAdmitted
from proto.resources import is_accelerator

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "opsched"
LABEL_OP = "opsched.io/op-id"
LABEL_QUEUE = "opsched.io/queue"
LABEL_ATTEMPT = "opsched.io/attempt"
LABEL_BORROWING = "opsched.io/borrowing"  # "true" when admitted on quota borrowed from the cohort
ANNOTATION_NAME = "opsched.io/op-name"
ANNOTATION_FLAVORS = "opsched.io/flavors"  # JSON {resource: flavor} chosen by admission
SELECTOR = f"{MANAGED_BY}={MANAGER}"


def build_pod(admitted: OperationAdmitted) -> dict[str, Any]:
    spec, env = admitted.spec, admitted.spec.environment
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [_container(admitted)],
        "automountServiceAccountToken": False,
    }
    optional = {
        **_placement(admitted),
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
            "labels": _labels(admitted),
            "annotations": _annotations(admitted),
        },
        "spec": pod_spec,
    }


def _labels(admitted: OperationAdmitted) -> dict[str, str]:
    labels = {**admitted.spec.environment.labels, MANAGED_BY: MANAGER, LABEL_OP: admitted.op_id,
              LABEL_QUEUE: admitted.queue, LABEL_ATTEMPT: str(admitted.attempt)}
    labels.pop(LABEL_BORROWING, None)  # only admission says whether an op borrows
    if admitted.borrowing:
        labels[LABEL_BORROWING] = "true"
    return labels


def _annotations(admitted: OperationAdmitted) -> dict[str, str]:
    annotations = {**admitted.spec.environment.annotations, ANNOTATION_NAME: admitted.spec.name}
    annotations.pop(ANNOTATION_FLAVORS, None)
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
