"""The pods opsched made, as the API server holds them, as plain dicts (camelCase, as ``kubectl get -o json``
prints them): what the demo shows at its end, for any cluster of a kubeconfig."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes import client, config


def listed(kubeconfig: Path, selector: str, namespace: str) -> list[dict[str, Any]]:
    with config.new_client_from_config(config_file=os.fspath(kubeconfig)) as api:
        found = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector)
        return [api.sanitize_for_serialization(pod) for pod in found.items]
