"""One sample of every event and command, each with every field set away from its default, and how
to read a message's tag and its wire form."""
from __future__ import annotations

import json

import msgspec

from opsched.proto import codec
from opsched.proto.commands import (
    BULK_COMMANDS,
    COMMANDS,
    ApproveOperation,
    ApproveOperations,
    CopyOperation,
    RejectOperation,
    RejectOperations,
    RestartOperation,
    ResumeOperation,
    StopOperation,
    StopOperations,
    SubmitOperation,
    TouchOperation,
)
from opsched.proto.events import (
    EVENTS,
    BudgetExceeded,
    CacheHit,
    CacheMissed,
    CostEstimated,
    CostRecorded,
    DispatchDelayed,
    ErrorRaised,
    FailureFinal,
    HandlerFailed,
    Money,
    OperationAdmitted,
    OperationApproved,
    OperationDispatched,
    OperationEvicted,
    OperationFailed,
    OperationOnHold,
    OperationPreempted,
    OperationRejected,
    OperationResumed,
    OperationRunning,
    OperationSkipped,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    OperationTimedOut,
    OperationTouched,
    PodCharge,
    PreemptRequested,
    PricePoint,
    RetryScheduled,
    ServiceEndpoint,
    SpendRolled,
    StopRequested,
    WindowSpend,
)
from opsched.proto.queues import Connection, ConnectionSecret, GitSchema
from opsched.proto.spec import (
    Cache,
    Container,
    Culling,
    Environment,
    EnvVar,
    FileInit,
    GitInit,
    Hook,
    InitStep,
    OpSpec,
    ReplicaGroup,
    Resources,
    ServiceSpec,
    Termination,
)
from tests.builders import T0, t

# A spec with every field set away from its default, so the round trip covers all of them.
FULL_CONTAINER = Container(
    image="pytorch:2", name="trainer", command=["python"], args=["train.py", "--lr", "0.1"],
    env=[EnvVar(name="SEED", value="42")],
    resources=Resources(limits={"nvidia.com/gpu": "2", "memory": "8Gi"}, requests={"cpu": "500m"}),
    working_dir="/work", security_context={"runAsUser": 1000},
    volume_mounts=[{"name": "data", "mountPath": "/data"}], image_pull_policy="Always",
    lifecycle={"preStop": {"exec": {"command": ["save"]}}}, ports=[{"containerPort": 8080}],
    liveness_probe={"tcpSocket": {"port": 8080}}, readiness_probe={"tcpSocket": {"port": 8080}},
    startup_probe={"tcpSocket": {"port": 8080}}, termination_message_path="/dev/log",
    termination_message_policy="File", stdin=True, stdin_once=True, tty=True,
)
# init steps that set every field between them (a step is one of git, file or container)
FULL_INIT = [InitStep(git=GitInit(url="https://git.example/ml/models.git", revision="v1", flags=["--depth 1"]),
                      connection="repo", path="/plx-context/code"),
             InitStep(file=FileInit(content="echo hi", filename="run.sh", chmod="+x"), path="/scripts"),
             InitStep(container=msgspec.structs.replace(FULL_CONTAINER, name="prepare"), connection="db")]
FULL_POD = {"init": FULL_INIT, "sidecars": [msgspec.structs.replace(FULL_CONTAINER, name="logger")],
            "connections": ["repo"]}
FULL_SPEC = OpSpec(
    name="train", project="vision", queue="gpu-a", agent="agent-b", priority=7,
    container=FULL_CONTAINER,
    params={"lr": 0.1, "layers": [1, 2]}, inputs={"dataset": "s3://bucket/x"}, outputs={"model": "m.pt"},
    environment=Environment(
        node_selector={"nvidia.com/gpu.product": "A100"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={"nodeAffinity": {}}, labels={"team": "a"}, annotations={"note": "n"},
        priority_class_name="high", service_account_name="trainer", volumes=[{"name": "data", "emptyDir": {}}],
        automount_service_account_token=True, image_pull_secrets=["regcred"], security_context={"fsGroup": 100},
        dns_policy="None", dns_config={"nameservers": ["10.0.0.10"]}, host_aliases=[{"ip": "10.0.0.1",
                                                                                 "hostnames": ["db"]}],
        restart_policy="OnFailure",
    ),
    termination=Termination(max_retries=2, timeout=600, ttl=60, culling=Culling(timeout=3600)),
    service=ServiceSpec(ports=[8888, 6006], replicas=2),
    cache=Cache(disable=False, ttl=3600, io=["dataset"], sections=["init"]),
    is_approved=False, conditions="{{ params.lr > 0 }}", cost=2.5, tags=["a", "b"], run_kind="service",
    component_hash="abc123", priority_class="high", preemptible=False, batch="sweep-1", batch_concurrency=3, to_env={"LR": "lr"}, iteration=2,
    description="trains", clean_pod_policy="All", main_role="chief", slots_per_worker=2,
    ignored=["plugins.collectLogs"],

    replicas=[ReplicaGroup(name="worker", count=2, container=FULL_CONTAINER, restart_policy="OnFailure", **FULL_POD)],
    **FULL_POD,
)
# its hook's op: every field at every depth but hooks (a hook never triggers another)
FULL_SPEC = msgspec.structs.replace(FULL_SPEC, hooks=[Hook(trigger="succeeded", spec=FULL_SPEC)])

_COMMON = {"op_id": "op-1", "at": T0, "attempt": 1}

SAMPLES: dict[str, msgspec.Struct] = {
    "submitted": OperationSubmitted(**_COMMON, spec=FULL_SPEC, queue="gpu-a", submitted_at=t(-5), priority=7,
                                    original_op_id="op-0", relation="restart", requested_by="alice",
                                    request_id="r-1"),
    "cost_estimated": CostEstimated(**_COMMON, estimate=Money(amount=12.5, currency="EUR"), basis="timeout",
                                    duration_s=600.0, breakdown={"nvidia.com/gpu": 12.0, "cpu": 0.5},
                                    prices_source="file:/etc/opsched/prices.yaml#0123456789ab", pool="spot",
                                    runs=5, points=[PricePoint(pool="spot", match={"pool": "spot"}, product="A100",
                                                               hourly=1.25, amount=12.5)]),
    "cache_hit": CacheHit(**_COMMON, fingerprint="f" * 32, original_op_id="op-0", outputs={"model": "m.pt"}),
    "cache_missed": CacheMissed(**_COMMON, fingerprint="f" * 32, reason="not_found"),
    "admitted": OperationAdmitted(**_COMMON, spec=FULL_SPEC, queue="gpu-a", namespace="ml", pod_name="op-op-1-1",
                                  flavors={"nvidia.com/gpu": "a100"}, node_selector={"pool": "a100"},
                                  tolerations=[{"key": "gpu", "operator": "Exists"}], borrowing=True,
                                  effective_priority=12.5, pending_timeout_s=300.0, pod_security="restricted",
                                  allow_secret_volumes=True, service_accounts=["trainer"],
                                  allow_service_account_token=True, priority_class_names=["batch-high"],
                                  allow_volumes=["persistentVolumeClaim"], image_pull_secrets=["regcred"],
                                  preferred_hosts=["gpu-a"], agent="agent-b",
                                  connections=[Connection(name="repo", kind="git", schema_=GitSchema(
                                      url="https://git.example/ml/models.git", revision="main", flags=["--depth 1"]),
                                      secret=ConnectionSecret(name="git-creds", items=["GIT_TOKEN"], mount_path="/creds"),
                                      env=[EnvVar(name="GIT_HOST", value="git.example")], description="models",
                                      queues=["gpu-a"])], init_image="alpine/git:v2.36.1", estimate=3.2, pool="spot"),
    "dispatched": OperationDispatched(**_COMMON, pod_name="op-op-1-1", namespace="ml"),
    "running": OperationRunning(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1",
                                endpoint=ServiceEndpoint(name="op-op-1-1", namespace="ml", ports=[8888]),
                                nodes=["gpu-node-1", "gpu-node-2"]),
    "touched": OperationTouched(**_COMMON, touched_by="alice", request_id="r-1"),
    "succeeded": OperationSucceeded(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1", reason="cache_hit",
                                    outputs={"model": "m.pt", "loss": 0.25},
                                    outputs_warning="outputs ignored: the termination message is not JSON"),
    "failed": OperationFailed(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1", reason="Error",
                              message="boom", exit_code=2),
    "rejected": OperationRejected(**_COMMON, reason="unknown_queue", message="unknown queue 'x'", name="train",
                                  queue="x", request_id="r-1"),
    "stopped": OperationStopped(**_COMMON, reason="stopped_by_user", message="bye", request_id="r-1"),
    "stop_requested": StopRequested(**_COMMON, pod_name="op-op-1-1", namespace="ml", reason="preempted",
                                    agent="agent-b", request_id="r-1"),
    "preempt_requested": PreemptRequested(**_COMMON, pod_names=["op-op-1-1"], namespace="ml", preemptor="op-2",
                                          reason="within_queue", message="priority 100 > 0", agent="agent-b"),
    "preempted": OperationPreempted(**_COMMON, preemptor="op-2", reason="within_queue", message="m"),
    "evicted": OperationEvicted(**_COMMON, reason="gang_timeout", message="2/3 running", retry_after_s=30.0),
    "on_hold": OperationOnHold(**_COMMON, reason="is_approved_false", message="waiting for approval"),
    "approved": OperationApproved(**_COMMON, approved_by="alice", comment="ok", request_id="r-1"),
    "skipped": OperationSkipped(**_COMMON, reason="upstream_skipped", message="its upstream op was skipped"),
    "retry_scheduled": RetryScheduled(**_COMMON, retry_after_s=20.0, reason="Error", retries_used=2),
    "failure_final": FailureFinal(**_COMMON, reason="Error", message="no retry left: 2 of maxRetries 2 used",
                                  retries_used=2, max_retries=2),
    "timed_out": OperationTimedOut(**_COMMON, pod_name="op-op-1-1", node="gpu-node-1", message="deadline"),
    "resumed": OperationResumed(**_COMMON, params={"lr": 0.1}, resumed_by="alice", request_id="r-1"),
    "cost_recorded": CostRecorded(**_COMMON, amount=3.25, currency="EUR", seconds=3900.0, queue="gpu-a",
                                  project="vision", gpu_hours=2.1667, started_at=t(-3900), pool="spot",
                                  pods=[PodCharge(pool="spot", product="A100", pods=2, hourly=3.0)]),
    "budget_exceeded": BudgetExceeded(**_COMMON, scope="queue", name="gpu-a", window="day", limit=100.0,
                                      spent=103.25, unit="EUR", window_start=t(-3600), resets_at=t(82800)),
    "error": ErrorRaised(**_COMMON, service="admission", subject="cmd.submit._", reason="malformed_message",
                         message="cannot decode", payload="{oops", command_msg_id="op-1.stop.r-1"),
    "spend_rolled": SpendRolled(**_COMMON, scope="project", name="vision", through_seq=4711,
                                windows=[WindowSpend(window="month", start=t(-86400), money=12.5, gpu_hours=3.25)]),
    "dispatch_delayed": DispatchDelayed(**_COMMON, dependency="webhook", message="connection refused"),
    "handler_failed": HandlerFailed(**_COMMON, service="dispatcher", subject="ops.admitted.op-1",
                                    failed_type="admitted", error="gave up after 5 deliveries: KeyError('x')"),
    "submit": SubmitOperation(op_id="op-1", spec=FULL_SPEC, requested_at=T0, requested_by="alice", request_id="r-0",
                              hook_of="op-0"),
    "stop": StopOperation(op_id="op-1", requested_at=T0, requested_by="alice", reason="no longer needed",
                          request_id="r-1"),
    "approve": ApproveOperation(op_id="op-1", requested_at=T0, requested_by="alice", comment="fine", request_id="r-2"),
    "restart": RestartOperation(op_id="op-1", requested_at=T0, requested_by="alice", params={"lr": 1},
                                new_op_id="op-2", request_id="r-3"),
    "copy": CopyOperation(op_id="op-1", requested_at=T0, requested_by="alice", params={"lr": 1}, new_op_id="op-3",
                          request_id="r-4"),
    "resume": ResumeOperation(op_id="op-1", requested_at=T0, requested_by="alice", params={"lr": 1},
                              request_id="r-5"),
    "reject": RejectOperation(op_id="op-1", requested_at=T0, requested_by="bob", comment="too big", request_id="r-6"),
    "touch": TouchOperation(op_id="op-1", requested_at=T0, requested_by="alice", request_id="r-7"),
    "stop_many": StopOperations(op_ids=["op-1", "op-2"], requested_at=T0, requested_by="alice", request_id="r-8",
                                reason="sweep abandoned"),
    "approve_many": ApproveOperations(op_ids=["op-1", "op-2"], requested_at=T0, requested_by="alice",
                                      request_id="r-9", comment="fine"),
    "reject_many": RejectOperations(op_ids=["op-1"], requested_at=T0, requested_by="bob", request_id="r-10",
                                    comment="too big"),
}
MESSAGES = EVENTS + COMMANDS + BULK_COMMANDS


def tag_of(cls: type) -> str:
    return cls.__struct_config__.tag


def wire_of(message: msgspec.Struct) -> dict:
    return json.loads(codec.encode(message))
