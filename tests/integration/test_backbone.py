"""One GPU operation end to end: real nats-server, real kube-apiserver + kube-scheduler, four services."""
from __future__ import annotations

import asyncio

import pytest

from opsched.proto.events import (
    CostEstimated,
    OperationAdmitted,
    OperationDispatched,
    OperationFailed,
    OperationRunning,
    OperationSucceeded,
    OperationTimedOut,
    RetryScheduled,
)
from tests.builders import op


@pytest.fixture
async def gpu_cluster(control_plane, k8s_namespace, sim_nodes, stack_factory, client, events):
    sim_nodes(("gpu-big", 2, "A100"), ("gpu-small", 1, "A100"))
    stack = await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    return client, stack


def pod(core_v1, namespace: str, name: str):
    return core_v1.read_namespaced_pod(name, namespace)


async def test_three_ops_on_two_nodes_the_third_waits_for_a_free_gpu_and_all_succeed(
        gpu_cluster, events, core_v1, k8s_namespace):
    client, _ = gpu_cluster
    big = await client.submit(op("big").gpus(2).runs("sleep 4").build())
    # running first: ops are admitted as their gates clear, two ops' gates may clear in any order (the services
    # handle different ops at once), and kube-scheduler binds pods as they come: small first would take a GPU of
    # gpu-big and big would wait for it
    await events.expect(OperationRunning, big)
    small = await client.submit(op("small").gpus(1).runs("sleep 4").build())
    running = [await events.expect(OperationRunning, i) for i in (big, small)]
    assert {r.node for r in running} == {"gpu-big", "gpu-small"}

    third = await client.submit(op("third").gpus(1).runs("sleep 1").build())
    await events.expect(CostEstimated, third)  # its gates cleared (caching off: the estimate) while both GPUs nodes were busy
    for i in (big, small, third):
        await events.expect(OperationSucceeded, i, timeout=30)
    first_end = min(events.seq_of(OperationSucceeded, big), events.seq_of(OperationSucceeded, small))
    # admission held it (the dispatcher reports node capacity) until a GPU was free, then it ran
    assert events.seq_of(OperationAdmitted, third) > first_end
    assert events.seq_of(OperationRunning, third) > first_end
    dispatched = events.of(third, OperationDispatched)[0]
    bound = await asyncio.to_thread(pod, core_v1, k8s_namespace, dispatched.pod_name)
    assert bound.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    assert bound.spec.node_name in ("gpu-big", "gpu-small")


async def test_a_container_that_exits_1_ends_failed_with_its_reason(gpu_cluster, events):
    client, _ = gpu_cluster
    op_id = await client.submit(op("crash").gpus(1).runs("sleep 0.5; exit 1").build())
    failed = await events.expect(OperationFailed, op_id, timeout=30)
    assert failed.exit_code == 1
    assert failed.reason == "Error" and "exited with code 1" in failed.message
    assert failed.node in ("gpu-big", "gpu-small")
    assert not events.of(op_id, OperationSucceeded)


async def test_the_pod_on_the_apiserver_asks_for_gpus_only_through_limits(
        gpu_cluster, events, core_v1, k8s_namespace):
    client, _ = gpu_cluster
    spec = op("train").gpus(2, product="A100").cpu("1").timeout(600).runs("sleep 0.5").build()
    op_id = await client.submit(spec)
    running = await events.expect(OperationRunning, op_id)
    created = await asyncio.to_thread(pod, core_v1, k8s_namespace, running.pod_name)
    resources = created.spec.containers[0].resources
    assert resources.limits["nvidia.com/gpu"] == "2" and resources.requests["nvidia.com/gpu"] == "2"
    assert created.spec.node_selector == {"nvidia.com/gpu.product": "A100"}
    assert created.spec.active_deadline_seconds == 600
    assert created.spec.restart_policy == "Never"
    assert created.metadata.labels["opsched.io/op-id"] == op_id
    assert created.spec.node_name == "gpu-big"
    await events.expect(OperationSucceeded, op_id)


async def test_a_timeout_shorter_than_the_run_ends_the_op_timed_out_without_a_retry(gpu_cluster, events):
    client, _ = gpu_cluster
    op_id = await client.submit(op("slow").gpus(1).timeout(1).max_retries(3).runs("sleep 30").build())
    timed_out = await events.expect(OperationTimedOut, op_id, timeout=30)
    assert "deadline" in timed_out.message.lower()
    probe = await client.submit(op("probe").gpus(1).runs("sleep 0.1").build())
    await events.expect(OperationSucceeded, probe)  # the GPU was freed and nothing retried the slow op
    assert not events.of(op_id, RetryScheduled) and not events.of(op_id, OperationFailed)


async def test_a_finished_pod_is_deleted_after_its_ttl_and_that_is_not_a_failure(
        gpu_cluster, events, core_v1, k8s_namespace):
    import msgspec

    from tests.kube import pod_gone

    client, _ = gpu_cluster
    spec = op("short-lived").gpus(1).runs("sleep 0.2").build()
    spec = msgspec.structs.replace(spec, termination=msgspec.structs.replace(spec.termination, ttl=1))
    op_id = await client.submit(spec)
    done = await events.expect(OperationSucceeded, op_id)
    assert await pod_gone(core_v1, k8s_namespace, done.pod_name, timeout=20), "the finished pod outlived its ttl"
    probe = await client.submit(op("probe").gpus(1).runs("sleep 0.1").build())
    await events.expect(OperationSucceeded, probe)
    assert not events.of(op_id, OperationFailed)


async def test_logs_follow_a_running_op_through_the_api_server_and_refusals_name_what_is_wrong(gpu_cluster, events):
    """The dispatcher reads pods/log from the real API server (proxied to the simulated kubelet) and streams it over
    the bus: -f, asked as soon as the op is submitted, waits for its pod, gets the echo and each line as it is printed,
    and ends with the container."""
    from opsched.logstream import LogsRefused
    from opsched.proto.reasons import LogsRefusal, Reason

    client, _ = gpu_cluster
    op_id = await client.submit(op("talks").gpus(1).runs("echo hello logs; sleep 1").build())
    followed = [line async for line in client.logs(op_id, follow=True)]  # returns once the container ended
    assert followed == ["hello logs", "[sim] second 1"]
    await events.expect(OperationSucceeded, op_id)
    assert [line async for line in client.logs(op_id, tail=1)] == ["[sim] second 1"]
    stamped = [line async for line in client.logs(op_id, timestamps=True, attempt=0)]
    assert stamped[0].endswith("Z hello logs") and len(stamped) == 2
    for kwargs, reason, named in (({"replica": "worker-0"}, LogsRefusal.UNKNOWN_REPLICA, "its pods' replicas: main"),
                                  ({"attempt": 3}, LogsRefusal.UNKNOWN_ATTEMPT, "attempts are 0..0"),
                                  ({"container": "x"}, LogsRefusal.UNKNOWN_CONTAINER, "its containers: main")):
        with pytest.raises(LogsRefused, match=named) as refused:
            [line async for line in client.logs(op_id, **kwargs)]
        assert refused.value.reason == reason
    with pytest.raises(LogsRefused) as refused:
        [line async for line in client.logs("no-such-op")]
    assert refused.value.reason == Reason.UNKNOWN_OP
