"""An op's outputs: the JSON object its main container wrote to its termination message, read from the pod.

A container writes its outputs, e.g. ``{"loss": 0.12, "model": "s3://b/m.pt"}``, to its termination message file
(``terminationMessagePath``, by default ``/dev/termination-log``); the kubelet puts the file's content on the pod's
status (``containerStatuses[].state.terminated.message``, at most 4 KiB), and when the main pod succeeded the
dispatcher puts the object on the ``succeeded`` event. The main container is the pod's first (``rules.podspec``:
sidecars come after it). Outputs never fail an op: what is not a JSON object, or is larger than
``MAX_OUTPUTS_BYTES``, gives no outputs and a warning on the event saying why; an empty message gives neither.
"""
from __future__ import annotations

import json
from typing import Any

from opsched.proto.limits import MAX_OUTPUTS_BYTES
from opsched.services.dispatcher.kobjects import Pod


def outputs_of(pod: Pod) -> tuple[dict[str, Any], str]:
    """(outputs, warning) of a pod whose main container has ended; ({}, "") when it wrote nothing."""
    message = _message(pod)
    if not message or not message.strip():
        return {}, ""
    size = len(message.encode())
    if size > MAX_OUTPUTS_BYTES:
        return {}, f"outputs ignored: the termination message is {size} bytes, above {MAX_OUTPUTS_BYTES}"
    try:
        value = json.loads(message)
    except ValueError as exc:
        return {}, f"outputs ignored: the termination message is not JSON ({exc}): {_excerpt(message)}"
    if not isinstance(value, dict):
        return {}, f"outputs ignored: the termination message is JSON but not an object: {_excerpt(message)}"
    return value, ""


def _message(pod: Pod) -> str | None:
    if pod.spec is None or not pod.spec.containers or pod.status is None:
        return None
    main = pod.spec.containers[0].name
    for status in pod.status.container_statuses or []:
        if status.name == main and status.state is not None and status.state.terminated is not None:
            return status.state.terminated.message
    return None


def _excerpt(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:80] + "…")
