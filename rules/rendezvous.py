"""Rendezvous for a gang (a pytorchjob's master and workers): how its pods find each other, as PyTorch's
``env://`` initialisation reads it. Every container of every pod of the attempt gets ``MASTER_ADDR`` (the main
pod's DNS name), ``MASTER_PORT``, ``WORLD_SIZE`` (the gang's pods) and ``RANK`` (0 for the main pod, then the
replicas in order); a variable the op sets itself keeps the op's value. The main pod is ``master`` in the
subdomain of a headless Service (``service``) that the dispatcher creates with the pods and deletes with them."""
from __future__ import annotations

import hashlib
from typing import Any

PORT = 29500  # torch.distributed's default
HOSTNAME = "master"  # the main pod's hostname in the Service's subdomain
MAX_DNS_LABEL = 63


def service_name(main_pod: str) -> str:
    """The Service of an attempt: its main pod's name, or, past a DNS label's 63 characters, a digest of it."""
    if len(main_pod) <= MAX_DNS_LABEL:
        return main_pod
    return f"op-{hashlib.sha256(main_pod.encode()).hexdigest()[:20]}-rdzv"


def master_addr(main_pod: str) -> str:
    """``master.<service>``: resolved in the pods' own namespace (the search path of every pod's resolver)."""
    return f"{HOSTNAME}.{service_name(main_pod)}"


def environment(main_pod: str, rank: int, size: int) -> dict[str, str]:
    return {"MASTER_ADDR": master_addr(main_pod), "MASTER_PORT": str(PORT), "WORLD_SIZE": str(size),
            "RANK": str(rank)}


def apply(pods: list[dict[str, Any]]) -> None:
    """Give a gang's pods (main first) their rendezvous: the main pod's DNS name, every container's env."""
    if len(pods) < 2:
        return
    main = pods[0]["metadata"]["name"]
    pods[0]["spec"].update({"hostname": HOSTNAME, "subdomain": service_name(main)})
    for rank, pod in enumerate(pods):
        wanted = environment(main, rank, len(pods))
        for container in pod["spec"]["containers"]:
            env = container.setdefault("env", [])
            own = {e["name"] for e in env}
            env.extend({"name": k, "value": v} for k, v in wanted.items() if k not in own)


def service(main_pod: dict[str, Any], selector: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    """The headless Service whose DNS names the main pod (``master.<service>``); ready or not, so the workers
    find it while it starts."""
    meta = main_pod["metadata"]
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(meta["name"]), "namespace": meta["namespace"], "labels": labels},
        "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True,
                 "ports": [{"name": "rendezvous", "port": PORT, "targetPort": PORT, "protocol": "TCP"}]},
    }
