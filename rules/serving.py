"""A service's pods and its ClusterIP Service (``run.kind: service``, ``OpSpec.service``).

* **Pods.** ``replicas`` identical pods: the main pod (``op-<id>-<attempt>``) and ``op-<id>-<attempt>-replica-<i>``
  for i in 1..replicas-1 (labels ``main``, ``replica-<i>``), admitted together like a gang (all or none). Their
  ``restartPolicy`` is ``Always``: a service runs until it is stopped (or culled, or past ``termination.timeout``);
  a container that exits is restarted, so a service never succeeds. The main container gets a readiness probe when
  it has none: a TCP connect on the first of the service's ports (``default_probe``). The op is ``running`` when every
  pod is Ready (``services.dispatcher.gang``). Each pod carries the annotation ``opsched.io/service-ports`` (the
  ports, comma-separated), which tells the dispatcher's watcher the pod serves, and on which ports.
* **The Service.** ClusterIP, named as the gang's rendezvous Service is (``rules.rendezvous.service_name`` of the
  main pod: at most 63 characters, deterministic, so a 409 is its own), in the pods' namespace, selecting the
  attempt's pods by their op-id and attempt labels, one TCP port per declared port (``port-<n>``, target the same).
  The dispatcher creates it before the pods and deletes it with them.
* **The endpoint** (``proto.events.ServiceEndpoint``): the Service's name, namespace and ports, carried on the
  op's ``running``: ``NAME.NAMESPACE.svc`` inside the cluster, ``kubectl port-forward -n NS svc/NAME PORT:PORT``
  from outside.
"""
from __future__ import annotations

from typing import Any

from opsched.proto.events import ServiceEndpoint
from opsched.proto.spec import OpSpec
from opsched.rules import rendezvous

REPLICA = "replica"  # the replica label of the pods after the main one: replica-<i>
RESTART_POLICY = "Always"
ANNOTATION_PORTS = "opsched.io/service-ports"  # on a service's pods: its ports, "8888,6006"
PROBE_PERIOD_S = 5


def serves(spec: OpSpec) -> bool:
    return spec.service is not None


def replica_names(main_pod: str, spec: OpSpec) -> list[str]:
    """The pod names after the main pod of a service's attempt (none for anything else)."""
    count = spec.service.replicas if spec.service is not None else 1
    return [f"{main_pod}-{REPLICA}-{i}" for i in range(1, count)]


def default_probe(spec: OpSpec) -> dict[str, Any] | None:
    """The main container's readiness probe when it has none: TCP on the service's first port."""
    if spec.service is None or spec.container.readiness_probe is not None:
        return None
    return {"tcpSocket": {"port": spec.service.ports[0]}, "periodSeconds": PROBE_PERIOD_S}


def ports_annotation(spec: OpSpec) -> dict[str, str]:
    return {ANNOTATION_PORTS: ",".join(map(str, spec.service.ports))} if spec.service is not None else {}


def ports_of(annotation: str) -> list[int]:
    """The ports an annotation holds (what the dispatcher wrote; anything else is skipped)."""
    return [int(p) for p in annotation.split(",") if p.strip().isdigit()]


def service_object(main_pod: str, namespace: str, spec: OpSpec, selector: dict[str, str],
                   labels: dict[str, str]) -> dict[str, Any] | None:
    """The ClusterIP Service of a service's attempt; None for anything else."""
    if spec.service is None:
        return None
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": rendezvous.service_name(main_pod), "namespace": namespace, "labels": labels},
        "spec": {"type": "ClusterIP", "selector": selector,
                 "ports": [{"name": f"port-{p}", "port": p, "targetPort": p, "protocol": "TCP"}
                           for p in spec.service.ports]},
    }


def endpoint(main_pod: str, namespace: str, ports: list[int]) -> ServiceEndpoint:
    return ServiceEndpoint(name=rendezvous.service_name(main_pod), namespace=namespace, ports=ports)
