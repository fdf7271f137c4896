"""Reads of the local API server the integration tests share."""
from __future__ import annotations

from kubernetes import client


def node_or_none(core: client.CoreV1Api, name: str) -> client.V1Node | None:
    """The node ``name``, or None when there is none (404)."""
    try:
        return core.read_node(name)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise
