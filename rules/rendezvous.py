"""Rendezvous for a gang: how the pods of a distributed op find each other, per run kind, as each framework's
Kubernetes operator tells them.

Every pod of a gang gets a hostname, ``<role>-<index>`` (``rules.replica_roles``), in the subdomain of one headless
Service (``service``) that the dispatcher creates with the pods (before them) and deletes with them; the Service
selects every pod of the attempt and publishes them ready or not, so ``<role>-<index>.<service>`` (short, in the
pods' own namespace) and ``<role>-<index>.<service>.<namespace>.svc`` resolve to each pod while it starts. Each
pod's containers then get the env of ``environment`` (a variable the op sets itself keeps the op's value). What
each kind gets, and where it was read (Kubeflow training-operator v1.8.1 ``pkg/controller.v1/<kind>/``; mpi-operator
v0.8 ``pkg/controller/mpi_job_controller.go``), with the operator's ``<job>-<role>-<i>`` names replaced by ours:

* **pytorchjob** (every container): ``MASTER_ADDR`` (``master-0.<service>``), ``MASTER_PORT`` (29500, torch's
  default), ``WORLD_SIZE`` (the gang's pods), ``RANK`` (0 for the master, then the workers in order).
* **tfjob** (every container): ``TF_CONFIG``, the JSON ``tensorflow.go`` marshals: ``{"cluster": {role: [
  "<host>.<service>.<namespace>.svc:2222", ...]}, "task": {"type": role, "index": i}, "environment": "cloud"}``,
  roles sorted (Go marshals a map so), compact. The cluster lists every role the op has, ``evaluator`` included:
  the operator dropped it from the cluster spec in v1alpha2 (#650) and put it back in 2020 (#1146, "Fix evaluator
  runconfig"), and every v1 release since lists it.
* **xgbjob** (every container, ``xgboost.go``): ``MASTER_ADDR`` (``master-0.<service>``), ``MASTER_PORT`` (9999),
  ``WORLD_SIZE`` (all pods), ``RANK`` (master 0, worker i: i + 1), ``PYTHONUNBUFFERED=1``; with workers also
  ``WORKER_PORT`` (9999) and ``WORKER_ADDRS`` (``worker-0.<service>,...``, one per worker: LightGBM reads them).
* **paddlejob** (every container, ``envvar.go``): ``PYTHONUNBUFFERED=1``, ``PADDLE_JOB_ID`` (the main pod's name),
  ``PADDLE_NNODES`` (all pods), ``PADDLE_MASTER``: ``<host>:36543`` of master 0 (PS mode) or worker 0 (collective
  mode, no master), that pod itself getting ``$(POD_IP_DUMMY):36543`` with ``POD_IP_DUMMY`` its pod IP (a
  ``fieldRef``); in PS mode ``PADDLE_SERVER_NUM=1`` on masters, ``PADDLE_TRAINER_NUM=1`` on workers.
* **mxjob** (every container, ``mxnet.go``): ``MX_CONFIG`` (``{"cluster": {role: [{"url": host, "port": 9091}]},
  "labels": {role: ""}, "task": {"type": role, "index": i}}``), ``DMLC_PS_ROOT_PORT``/``DMLC_PS_ROOT_URI`` (the
  scheduler's port and host; 0 and "" without one), ``DMLC_NUM_SERVER``, ``DMLC_NUM_WORKER``, ``DMLC_ROLE``,
  ``DMLC_USE_KUBERNETES=1``, and ``DMLC_WORKER_ID`` (its index) on workers.
* **mpijob** (the first container; mpi-operator v2, OpenMPI): a hostfile (``hostfile``), one line per worker,
  ``<host>.<service>.<namespace>.svc slots=<slotsPerWorker>`` (default 1), in a ConfigMap (``config_map``) mounted
  read-only at ``/etc/mpi`` in the launcher; the launcher gets ``K_MPI_JOB_ROLE=launcher``,
  ``OMPI_MCA_orte_keep_fqdn_hostnames=true``, ``OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile``,
  ``OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10`` and ``OMPI_MCA_orte_set_default_slots=<slots>``; a worker
  ``K_MPI_JOB_ROLE=worker``. opsched makes no SSH keys (the operator's ``<job>-ssh`` Secret): the image brings them.

A port is the operator's default unless the role's main container declares a port with the operator's port name
(``tfjob-port``, ``xgboostjob-port``, ``master`` for paddle, ``mxjob-port``, ``pytorchjob-port``): then its
``containerPort``, as the operators read it.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opsched.proto.spec import OpSpec
from opsched.rules.replica_roles import PodRole, container_of, counts, pods_of

MAX_DNS_LABEL = 63
HOSTFILE_MOUNT = "/etc/mpi"
HOSTFILE_KEY = "hostfile"
HOSTFILE = f"{HOSTFILE_MOUNT}/{HOSTFILE_KEY}"
HOSTFILE_VOLUME = "opsched-mpi-hostfile"  # the launcher's volume of the ConfigMap (a reserved name)
CONNECTION_ATTEMPTS = "-o ConnectionAttempts=10"


@dataclass(frozen=True)
class Port:
    """A kind's rendezvous port: the operator's default, and the container port name that overrides it."""

    default: int
    name: str


PORTS: dict[str, Port] = {
    "pytorchjob": Port(29500, "pytorchjob-port"),
    "tfjob": Port(2222, "tfjob-port"),
    "xgbjob": Port(9999, "xgboostjob-port"),
    "paddlejob": Port(36543, "master"),
    "mxjob": Port(9091, "mxjob-port"),
}


def kind_of(spec: OpSpec) -> str:
    """The kind whose rendezvous the op's gang gets: its run kind's, else (a gang of another kind on the wire, e.g.
    ``job`` with replica groups) PyTorch's ``env://``, as every gang got before the other kinds existed."""
    return spec.run_kind if spec.run_kind in ENVIRONMENTS else "pytorchjob"


def service_name(main_pod: str) -> str:
    """The Service of an attempt: its main pod's name, or, past a DNS label's 63 characters, a digest of it."""
    if len(main_pod) <= MAX_DNS_LABEL:
        return main_pod
    return f"op-{hashlib.sha256(main_pod.encode()).hexdigest()[:20]}-rdzv"


def config_map_name(main_pod: str) -> str:
    """An mpijob attempt's hostfile ConfigMap: its Service's name and ``-hostfile``."""
    return f"{service_name(main_pod)}-hostfile"


@dataclass(frozen=True)
class Gang:
    """What a pod's rendezvous is computed from: the op, its attempt's main pod name and namespace."""

    spec: OpSpec
    main_pod: str
    namespace: str

    @property
    def service(self) -> str:
        return service_name(self.main_pod)

    def host(self, role: str, index: int) -> str:
        """A pod's short DNS name, resolved in the pods' namespace."""
        return f"{role}-{index}.{self.service}"

    def fqdn(self, role: str, index: int) -> str:
        return f"{self.host(role, index)}.{self.namespace}.svc"

    def port(self, role: str) -> int:
        """The kind's port, or the one the role's main container declares under the operator's port name."""
        port = PORTS[kind_of(self.spec)]
        pod = next((p for p in pods_of(self.spec) if p.role == role), None)
        for declared in container_of(pod, self.spec).ports if pod is not None else ():
            if declared.get("name") == port.name and isinstance(declared.get("containerPort"), int):
                return int(declared["containerPort"])
        return port.default


Env = list[dict[str, Any]]


def _plain(**values: object) -> Env:
    return [{"name": k, "value": str(v)} for k, v in values.items()]


def _pytorch(gang: Gang, pod: PodRole) -> Env:
    pods = pods_of(gang.spec)
    main = pods[0].role
    return _plain(MASTER_ADDR=gang.host(main, 0), MASTER_PORT=gang.port(main), WORLD_SIZE=len(pods),
                  RANK=pods.index(pod))


def tf_config(gang: Gang, pod: PodRole) -> str:
    """``TF_CONFIG`` as the training operator marshals it (roles sorted, compact)."""
    cluster = {role: [f"{gang.fqdn(role, i)}:{gang.port(role)}" for i in range(n)]
               for role, n in sorted(counts(gang.spec).items())}
    config = {"cluster": cluster, "task": {"type": pod.role, "index": pod.index}, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


def _tf(gang: Gang, pod: PodRole) -> Env:
    return _plain(TF_CONFIG=tf_config(gang, pod))


def _xgb(gang: Gang, pod: PodRole) -> Env:
    total = len(pods_of(gang.spec))
    rank = pod.index + (counts(gang.spec).get("master", 0) if pod.role == "worker" else 0)
    env = _plain(MASTER_PORT=gang.port("master"), MASTER_ADDR=gang.host("master", 0), WORLD_SIZE=total, RANK=rank,
                 PYTHONUNBUFFERED=1)
    if total > 1:
        env += _plain(WORKER_PORT=gang.port("worker"),
                      WORKER_ADDRS=",".join(gang.host("worker", i) for i in range(total - 1)))
    return env


def _paddle(gang: Gang, pod: PodRole) -> Env:
    roles = counts(gang.spec)
    master = "master" if "master" in roles else "worker"  # PS mode, else collective mode
    env = _plain(PYTHONUNBUFFERED=1, PADDLE_JOB_ID=gang.main_pod, PADDLE_NNODES=sum(roles.values()))
    port = gang.port(master)
    if (pod.role, pod.index) == (master, 0):
        env += [{"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "PADDLE_MASTER", "value": f"$(POD_IP_DUMMY):{port}"}]
    else:
        env += _plain(PADDLE_MASTER=f"{gang.host(master, 0)}:{port}")
    if master == "master":
        env += _plain(**{"PADDLE_SERVER_NUM" if pod.role == "master" else "PADDLE_TRAINER_NUM": 1})
    return env


def mx_config(gang: Gang, pod: PodRole) -> dict[str, Any]:
    roles = counts(gang.spec)
    cluster = {role: [{"url": gang.host(role, i), "port": gang.port(role)} for i in range(n)]
               for role, n in sorted(roles.items())}
    return {"cluster": cluster, "labels": {role: "" for role in sorted(roles)},
            "task": {"type": pod.role, "index": pod.index}}


def _mx(gang: Gang, pod: PodRole) -> Env:
    config = mx_config(gang, pod)
    scheduler = (config["cluster"].get("scheduler") or [{"url": "", "port": 0}])[0]
    env = _plain(MX_CONFIG=json.dumps(config, separators=(",", ":")), DMLC_PS_ROOT_PORT=scheduler["port"],
                 DMLC_PS_ROOT_URI=scheduler["url"], DMLC_NUM_SERVER=len(config["cluster"].get("server", [])),
                 DMLC_NUM_WORKER=len(config["cluster"].get("worker", [])), DMLC_ROLE=pod.role,
                 DMLC_USE_KUBERNETES=1)
    if pod.role == "worker":
        env += _plain(DMLC_WORKER_ID=pod.index)
    return env


def slots(spec: OpSpec) -> int:
    return spec.slots_per_worker or 1


def hostfile(gang: Gang) -> str:
    """An mpijob's hostfile: each worker's DNS name and its slots, one a line."""
    return "".join(f"{gang.fqdn(p.role, p.index)} slots={slots(gang.spec)}\n"
                   for p in pods_of(gang.spec) if p.role == "worker")


def _mpi(gang: Gang, pod: PodRole) -> Env:
    if pod.role != "launcher":
        return _plain(K_MPI_JOB_ROLE="worker")
    return _plain(K_MPI_JOB_ROLE="launcher", OMPI_MCA_orte_keep_fqdn_hostnames="true",
                  OMPI_MCA_orte_default_hostfile=HOSTFILE, OMPI_MCA_plm_rsh_args=CONNECTION_ATTEMPTS,
                  OMPI_MCA_orte_set_default_slots=slots(gang.spec))


# per kind: the env of one pod, and whether every container gets it (else the first, as mpi-operator does)
ENVIRONMENTS: dict[str, tuple[Callable[[Gang, PodRole], Env], bool]] = {
    "pytorchjob": (_pytorch, True), "tfjob": (_tf, True), "xgbjob": (_xgb, True), "paddlejob": (_paddle, True),
    "mxjob": (_mx, True), "mpijob": (_mpi, False),
}


def environment(gang: Gang, pod: PodRole) -> Env:
    """The rendezvous env of one pod of a gang."""
    return ENVIRONMENTS[kind_of(gang.spec)][0](gang, pod)


def is_gang(spec: OpSpec) -> bool:
    """Whether the op's attempts have a rendezvous: more than one pod (a plain job of one pod has none)."""
    return len(pods_of(spec)) > 1


def apply(pods: list[dict[str, Any]], spec: OpSpec, namespace: str) -> None:
    """Give a gang's pods (``pods_of`` order, main first) their rendezvous: each its hostname in the Service's
    subdomain and its env; an mpijob's launcher its hostfile. One pod alone gets none."""
    if not is_gang(spec) or len(pods) < 2:
        return
    gang = Gang(spec, pods[0]["metadata"]["name"], namespace)
    every = ENVIRONMENTS[kind_of(spec)][1]
    for role, pod in zip(pods_of(spec), pods):
        pod["spec"].update({"hostname": role.hostname, "subdomain": gang.service})
        wanted = environment(gang, role)
        for container in pod["spec"]["containers"] if every else pod["spec"]["containers"][:1]:
            env = container.setdefault("env", [])
            own = {e["name"] for e in env}
            env.extend(dict(e) for e in wanted if e["name"] not in own)
        if spec.run_kind == "mpijob" and role.is_main:
            _mount_hostfile(pod, gang)


def _mount_hostfile(pod: dict[str, Any], gang: Gang) -> None:
    volume = {"name": HOSTFILE_VOLUME, "configMap": {"name": config_map_name(gang.main_pod), "items": [
        {"key": HOSTFILE_KEY, "path": HOSTFILE_KEY, "mode": 0o444}]}}
    pod["spec"]["volumes"] = [*pod["spec"].get("volumes", []), volume]
    main = pod["spec"]["containers"][0]
    main["volumeMounts"] = [*main.get("volumeMounts", []),
                            {"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_MOUNT, "readOnly": True}]


def service(spec: OpSpec, main_pod: str, namespace: str, selector: dict[str, str],
            labels: dict[str, str]) -> dict[str, Any]:
    """The headless Service that names every pod of the attempt (``selector``), ready or not, so they find each
    other while they start; it lists the kind's port (an mpijob's none: its launcher reaches workers by SSH)."""
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(main_pod), "namespace": namespace, "labels": labels},
        "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True},
    }
    if kind_of(spec) in PORTS:
        gang = Gang(spec, main_pod, namespace)
        ports = sorted({gang.port(role) for role in counts(spec)})
        body["spec"]["ports"] = [{"name": f"rendezvous-{p}" if len(ports) > 1 else "rendezvous", "port": p,
                                  "targetPort": p, "protocol": "TCP"} for p in ports]
    return body


def config_map(spec: OpSpec, main_pod: str, namespace: str, labels: dict[str, str]) -> dict[str, Any] | None:
    """An mpijob attempt's hostfile ConfigMap; None for every other kind."""
    if spec.run_kind != "mpijob" or not is_gang(spec):
        return None
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": config_map_name(main_pod), "namespace": namespace, "labels": labels},
            "data": {HOSTFILE_KEY: hostfile(Gang(spec, main_pod, namespace))}}
