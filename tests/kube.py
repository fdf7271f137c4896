"""Conditions on the API server that tests wait for (asked again with a deadline, never a bare sleep)."""
from __future__ import annotations

import asyncio

from kubernetes.client.rest import ApiException

from tests.waiting import eventually


async def pod_gone(core_v1, namespace: str, name: str, timeout: float = 20) -> bool:
    """True once the pod is gone (404), False if it is still there after ``timeout`` seconds."""
    async def gone() -> bool:
        try:
            await asyncio.to_thread(core_v1.read_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False
    try:
        return await eventually(gone, f"pod {namespace}/{name} to be deleted", timeout)
    except AssertionError:
        return False
