"""The dispatcher's part of an op's trace (``bus.tracing``), tracing on: a CLIENT span around each
pod's create, child of the span handling the ``admitted``; the pod carries that span's context as the annotation
``opsched.io/traceparent``, and what the pod watch later reports of the attempt (``running``, ``succeeded``, ...)
carries it on, so the services that handle those events continue the op's trace."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opsched.bus import tracing
from opsched.rules.podspec import ANNOTATION_TRACEPARENT, LABEL_ATTEMPT, LABEL_OP, LABEL_REPLICA
from opsched.services.dispatcher.gang import PodView
from opsched.services.dispatcher.k8s import CreateResult, Kube


async def create_pod(kube: Kube, pod: dict[str, Any], service: str) -> CreateResult:
    """``kube.create_pod(pod)``, in a span whose context the pod carries (tracing on)."""
    tracer = tracing.tracer(service)
    if tracer is None:
        return await kube.create_pod(pod)
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    attributes = {"k8s.pod.name": meta["name"], "k8s.namespace.name": meta["namespace"],
                  "opsched.op_id": labels.get(LABEL_OP), "opsched.attempt": _number(labels.get(LABEL_ATTEMPT)),
                  "opsched.replica": labels.get(LABEL_REPLICA)}
    with tracing.span(tracer, "create pod", kind="CLIENT", attributes=attributes) as span:
        parent = tracing.current().get(tracing.TRACEPARENT)
        if parent:
            meta.setdefault("annotations", {})[ANNOTATION_TRACEPARENT] = parent
        result = await kube.create_pod(pod)
        span.set_attribute("opsched.pod.created", result.created)  # False: it existed (a redelivery)
        return result


def _number(label: str | None) -> int | None:
    return int(label) if label is not None and label.isdigit() else None


def headers_of(views: Iterable[PodView]) -> dict[str, str] | None:
    """The trace context an attempt's pods carry, as headers for the event reporting them (tracing on)."""
    if not tracing.ON:
        return None
    for view in views:
        parent = view.annotations.get(ANNOTATION_TRACEPARENT)
        if parent and tracing.valid_traceparent(parent):
            return {tracing.TRACEPARENT: parent}
    return None
