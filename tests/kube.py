"""Conditions on the API server that tests wait for (polled with a deadline, never a bare sleep)."""
from __future__ import annotations

import asyncio

from kubernetes.client.rest import ApiException


async def pod_gone(core_v1, namespace: str, name: str, timeout: float = 20) -> bool:
    """True once the pod is gone (404), False if it is still there after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            await asyncio.to_thread(core_v1.read_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        await asyncio.sleep(0.1)
    return False
