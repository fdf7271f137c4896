"""Each distributed kind's rendezvous (rules.rendezvous), pod by pod, as its Kubernetes operator sets it: TF_CONFIG,
xgboost's MASTER_*/RANK/WORKER_ADDRS, PADDLE_*, DMLC_*/MX_CONFIG, an mpijob's hostfile and OMPI_MCA_* env."""
from __future__ import annotations

import json

import msgspec

from opsched.proto.spec import Container, OpSpec, ReplicaGroup
from opsched.rules import rendezvous
from opsched.rules.naming import pod_names
from opsched.rules.podspec import build_pods, rendezvous_config_map, rendezvous_service
from opsched.rules.replica_roles import main_waits, pods_of
from tests.builders import admitted

C = Container(image="x")


def spec(kind: str, *groups: tuple[str, int], main_role: str | None = None, **fields) -> OpSpec:
    return OpSpec(name="d", container=C, run_kind=kind, main_role=main_role,
                  replicas=[ReplicaGroup(name=n, count=c, container=C) for n, c in groups], **fields)


def envs(s: OpSpec) -> list[dict[str, str]]:
    """Each pod's env (its first container's), in pod order, as the dispatcher builds them."""
    pods = build_pods(msgspec.structs.replace(admitted(s, op_id="a"), namespace="ns"))
    return [{e["name"]: e.get("value", e.get("valueFrom")) for e in p["spec"]["containers"][0]["env"]} for p in pods]


def test_a_tfjob_gets_tf_config_exactly_as_the_training_operator_marshals_it():
    s = spec("tfjob", ("ps", 1), ("worker", 2), ("evaluator", 1), main_role=None)
    cluster = ('{"chief":["chief-0.op-a-0.ns.svc:2222"],"evaluator":["evaluator-0.op-a-0.ns.svc:2222"],'
               '"ps":["ps-0.op-a-0.ns.svc:2222"],'
               '"worker":["worker-0.op-a-0.ns.svc:2222","worker-1.op-a-0.ns.svc:2222"]}')
    tasks = [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1), ("evaluator", 0)]
    assert [e["TF_CONFIG"] for e in envs(s)] == [
        f'{{"cluster":{cluster},"task":{{"type":"{t}","index":{i}}},"environment":"cloud"}}' for t, i in tasks]


def test_a_tfjob_without_a_chief_is_led_by_worker_0_whose_group_holds_the_other_workers():
    s = spec("tfjob", ("worker", 2), main_role="worker")
    assert pod_names("a", 0, s) == ["op-a-0", "op-a-0-worker-1", "op-a-0-worker-2"]
    configs = [json.loads(e["TF_CONFIG"]) for e in envs(s)]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    assert configs[0]["cluster"] == {"worker": [f"worker-{i}.op-a-0.ns.svc:2222" for i in range(3)]}


def test_an_xgbjob_gets_master_addr_world_size_rank_and_the_worker_addresses():
    s = spec("xgbjob", ("worker", 2))
    workers = "worker-0.op-a-0,worker-1.op-a-0"
    assert envs(s) == [
        {"NVIDIA_VISIBLE_DEVICES": "void", "MASTER_PORT": "9999", "MASTER_ADDR": "master-0.op-a-0", "WORLD_SIZE": "3",
         "RANK": str(rank), "PYTHONUNBUFFERED": "1", "WORKER_PORT": "9999", "WORKER_ADDRS": workers}
        for rank in range(3)]


def test_a_paddlejob_in_ps_mode_and_in_collective_mode():
    ps = envs(spec("paddlejob", ("worker", 2)))
    field = {"fieldRef": {"fieldPath": "status.podIP"}}
    common = {"NVIDIA_VISIBLE_DEVICES": "void", "PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": "op-a-0", "PADDLE_NNODES": "3"}
    assert ps[0] == {**common, "POD_IP_DUMMY": field, "PADDLE_MASTER": "$(POD_IP_DUMMY):36543", "PADDLE_SERVER_NUM": "1"}
    assert ps[1] == ps[2] == {**common, "PADDLE_MASTER": "master-0.op-a-0:36543", "PADDLE_TRAINER_NUM": "1"}
    collective = envs(spec("paddlejob", ("worker", 1), main_role="worker"))
    common["PADDLE_NNODES"] = "2"
    assert collective == [{**common, "POD_IP_DUMMY": field, "PADDLE_MASTER": "$(POD_IP_DUMMY):36543"},
                          {**common, "PADDLE_MASTER": "worker-0.op-a-0:36543"}]


def test_an_mxjob_gets_mx_config_and_dmlc_env():
    got = envs(spec("mxjob", ("server", 1), ("worker", 2)))
    cluster = {"scheduler": [{"url": "scheduler-0.op-a-0", "port": 9091}],
               "server": [{"url": "server-0.op-a-0", "port": 9091}],
               "worker": [{"url": "worker-0.op-a-0", "port": 9091}, {"url": "worker-1.op-a-0", "port": 9091}]}
    for env, (role, index) in zip(got, [("scheduler", 0), ("server", 0), ("worker", 0), ("worker", 1)]):
        assert json.loads(env["MX_CONFIG"]) == {"cluster": cluster, "labels": {r: "" for r in cluster},
                                                "task": {"type": role, "index": index}}
        assert {k: v for k, v in env.items() if k.startswith("DMLC_")} == {
            "DMLC_PS_ROOT_PORT": "9091", "DMLC_PS_ROOT_URI": "scheduler-0.op-a-0", "DMLC_NUM_SERVER": "1",
            "DMLC_NUM_WORKER": "2", "DMLC_ROLE": role, "DMLC_USE_KUBERNETES": "1",
            **({"DMLC_WORKER_ID": str(index)} if role == "worker" else {})}


def test_an_operator_port_name_on_the_role_s_container_sets_its_port():
    s = spec("xgbjob", ("worker", 1))
    s = msgspec.structs.replace(s, container=Container(image="x", ports=[{"name": "xgboostjob-port",
                                                                           "containerPort": 7000}]))
    assert envs(s)[1]["MASTER_PORT"] == "7000" and envs(s)[1]["WORKER_PORT"] == "9999"


def test_an_mpijob_s_launcher_mounts_a_hostfile_of_its_workers_and_waits_for_them():
    s = spec("mpijob", ("worker", 2), slots_per_worker=4)
    event = msgspec.structs.replace(admitted(s, op_id="a"), namespace="ns")
    config_map = rendezvous_config_map(event)
    assert config_map["metadata"]["name"] == "op-a-0-hostfile" and config_map["data"] == {
        "hostfile": "worker-0.op-a-0.ns.svc slots=4\nworker-1.op-a-0.ns.svc slots=4\n"}
    launcher, *workers = build_pods(event)
    assert launcher["spec"]["volumes"][-1] == {"name": "opsched-mpi-hostfile", "configMap": {
        "name": "op-a-0-hostfile", "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}]}}
    assert launcher["spec"]["containers"][0]["volumeMounts"][-1] == {
        "name": "opsched-mpi-hostfile", "mountPath": "/etc/mpi", "readOnly": True}
    env = envs(s)
    assert env[0] == {"NVIDIA_VISIBLE_DEVICES": "void", "K_MPI_JOB_ROLE": "launcher",
                      "OMPI_MCA_orte_keep_fqdn_hostnames": "true", "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                      "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10", "OMPI_MCA_orte_set_default_slots": "4"}
    assert env[1] == env[2] == {"NVIDIA_VISIBLE_DEVICES": "void", "K_MPI_JOB_ROLE": "worker"}
    assert main_waits(s) and not main_waits(spec("tfjob", ("worker", 1)))
    assert rendezvous_config_map(admitted(spec("tfjob", ("worker", 1)))) is None


def test_every_pod_of_a_gang_has_its_dns_name_in_one_headless_service():
    s = spec("tfjob", ("ps", 1), ("worker", 2))
    event = msgspec.structs.replace(admitted(s, op_id="a"), namespace="ns")
    pods = build_pods(event)
    assert [(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in pods] == [
        (r.hostname, "op-a-0") for r in pods_of(s)] == [
        ("chief-0", "op-a-0"), ("ps-0", "op-a-0"), ("worker-0", "op-a-0"), ("worker-1", "op-a-0")]
    service = rendezvous_service(event)
    assert service["spec"]["selector"] == {"app.kubernetes.io/managed-by": "opsched", "opsched.io/op-id": "a",
                                           "opsched.io/attempt": "0"}
    assert service["spec"]["ports"] == [{"name": "rendezvous", "port": 2222, "targetPort": 2222, "protocol": "TCP"}]
    assert rendezvous.service(spec("mpijob", ("worker", 1)), "op-a-0", "ns", {}, {})["spec"].get("ports") is None
