"""The dispatcher's pod: deterministic, labelled, GPUs only as limits; and the GPU-accounting refusals."""
from __future__ import annotations

import copy
import json

import msgspec
import pytest

from opsched.rules import rendezvous
from opsched.rules.gpu_accounting import violations
from opsched.rules.podspec import (
    ANNOTATION_FLAVORS,
    ANNOTATION_NAME,
    ANNOTATION_PREEMPTED_BY,
    ANNOTATION_STOPPED,
    LABEL_ATTEMPT,
    LABEL_BORROWING,
    LABEL_GANG_SIZE,
    LABEL_OP,
    LABEL_QUEUE,
    LABEL_REPLICA,
    MANAGED_BY,
    MANAGER,
    build_pod,
    build_pods,
)
from tests.builders import GPU, GPU_PRODUCT, admitted, case, case_name, op

TAINT_GPU = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
TAINT_SPOT = {"key": "cloud.example.com/spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
VOID = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}  # pods without an NVIDIA GPU


def pod_of(builder, **kw) -> dict:
    return build_pod(admitted(builder.build(), **kw))


def placed(builder, **placement) -> dict:
    """The pod of an op admitted with admission's placement (flavors, node_selector, tolerations, borrowing)."""
    return build_pod(msgspec.structs.replace(admitted(builder.build()), **placement))


def main_container(pod: dict) -> dict:
    (container,) = pod["spec"]["containers"]
    return container


# ---- build_pod --------------------------------------------------------------------------------

def test_the_pod_is_named_after_the_admitted_event_and_built_the_same_every_time():
    event = admitted(op("train").gpus(1).build(), op_id="abc", attempt=2, namespace="ml")
    pod = build_pod(event)
    assert pod["metadata"]["name"] == "op-abc-2" == event.pod_name
    assert pod["metadata"]["namespace"] == "ml"
    assert build_pod(event) == pod
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"


def test_labels_carry_op_id_queue_attempt_and_manager():
    pod = pod_of(op("train").label("team", "vision"), op_id="abc", attempt=3, queue="gpu-a")
    assert pod["metadata"]["labels"] == {
        "team": "vision", MANAGED_BY: MANAGER, LABEL_OP: "abc", LABEL_QUEUE: "gpu-a", LABEL_ATTEMPT: "3",
        LABEL_REPLICA: "main", LABEL_GANG_SIZE: "1",
    }
    assert pod["metadata"]["annotations"][ANNOTATION_NAME] == "train"


def test_a_user_label_cannot_override_the_scheduler_labels():
    pod = pod_of(op().label(LABEL_OP, "someone-else").label(MANAGED_BY, "me").label(LABEL_REPLICA, "x")
                 .label(LABEL_GANG_SIZE, "9"), op_id="abc")
    assert pod["metadata"]["labels"][LABEL_OP] == "abc"
    assert pod["metadata"]["labels"][MANAGED_BY] == MANAGER
    assert (pod["metadata"]["labels"][LABEL_REPLICA], pod["metadata"]["labels"][LABEL_GANG_SIZE]) == ("main", "1")


def test_a_user_annotation_cannot_fake_a_release_by_the_dispatcher():
    spec = op().build()
    spec.environment.annotations = {ANNOTATION_PREEMPTED_BY: "someone", ANNOTATION_STOPPED: "true", "team": "a"}
    annotations = build_pod(admitted(spec))["metadata"]["annotations"]
    assert ANNOTATION_PREEMPTED_BY not in annotations and ANNOTATION_STOPPED not in annotations
    assert annotations["team"] == "a"


@pytest.mark.parametrize("c", [
    case("gpus given as a limit get an equal request",
         builder=op().gpus(2),
         resources={"limits": {GPU: "2"}, "requests": {GPU: "2"}}),
    case("cpu and memory requests are kept and the gpu request is added equal to the limit",
         builder=op().gpus(1).cpu("500m").memory("4Gi"),
         resources={"limits": {GPU: "1"}, "requests": {"cpu": "500m", "memory": "4Gi", GPU: "1"}}),
    case("any extended resource is an accelerator with requests equal to limits",
         builder=op().gpus(4, resource="amd.com/gpu").limits(memory="8Gi"),
         resources={"limits": {"amd.com/gpu": "4", "memory": "8Gi"}, "requests": {"amd.com/gpu": "4"}}),
    case("cpu and memory limits do not create requests",
         builder=op().limits(cpu="2", memory="1Gi"),
         resources={"limits": {"cpu": "2", "memory": "1Gi"}}),
    case("a spec without resources has none",
         builder=op(), resources=None),
], ids=case_name)
def test_accelerators_only_as_limits_with_equal_requests(c):
    assert main_container(pod_of(c.builder)).get("resources") == c.resources


def test_building_the_pod_does_not_change_the_spec():
    spec = op().gpus(1).cpu("1").build()
    build_pod(admitted(spec))
    assert spec.container.resources.requests == {"cpu": "1"}


def test_placement_is_passed_through():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    pod = pod_of(op().gpus(1, product="A100").toleration(key="nvidia.com/gpu", operator="Exists",
                                                         effect="NoSchedule").affinity(affinity))
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "A100"}
    assert pod["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["spec"]["affinity"] == affinity


@pytest.mark.parametrize("c", [
    case("admission's flavor labels are added to the op's own selector",
         builder=op().gpus(1).node_selector("zone", "a"), selector={GPU_PRODUCT: "A100"},
         expected={"zone": "a", GPU_PRODUCT: "A100"}),
    case("on a conflict the flavor's label wins: admission charged that flavor's quota",
         builder=op().gpus(1, product="T4"), selector={GPU_PRODUCT: "A100"},
         expected={GPU_PRODUCT: "A100"}),
    case("an op admitted without a flavor selector keeps its own",
         builder=op().gpus(1, product="T4"), selector={}, expected={GPU_PRODUCT: "T4"}),
    case("a flavor selector alone is the pod's selector",
         builder=op().gpus(1), selector={"pool": "spot"}, expected={"pool": "spot"}),
], ids=case_name)
def test_admitted_node_selector_is_merged_and_wins(c):
    assert placed(c.builder, node_selector=c.selector)["spec"]["nodeSelector"] == c.expected


@pytest.mark.parametrize("c", [
    case("admission's tolerations are appended after the op's",
         own=[TAINT_GPU], given=[TAINT_SPOT], expected=[TAINT_GPU, TAINT_SPOT]),
    case("a toleration the op already has is not repeated",
         own=[TAINT_GPU, TAINT_SPOT], given=[TAINT_SPOT], expected=[TAINT_GPU, TAINT_SPOT]),
    case("a toleration admission repeats is added once",
         own=[], given=[TAINT_SPOT, dict(TAINT_SPOT)], expected=[TAINT_SPOT]),
    case("no tolerations at all leave the field out",
         own=[], given=[], expected=None),
], ids=case_name)
def test_admitted_tolerations_are_appended_without_duplicates(c):
    builder = op().gpus(1)
    for toleration in c.own:
        builder.toleration(**toleration)
    assert placed(builder, tolerations=c.given)["spec"].get("tolerations") == c.expected


def test_the_flavors_chosen_by_admission_are_annotated_as_json():
    flavors = {GPU: "a100-spot", "cpu": "default"}
    spec = op().gpus(1).build()
    spec.environment.annotations = {ANNOTATION_FLAVORS: "forged by the user"}
    pod = build_pod(msgspec.structs.replace(admitted(spec), flavors=flavors))
    assert json.loads(pod["metadata"]["annotations"][ANNOTATION_FLAVORS]) == flavors
    assert pod["metadata"]["annotations"][ANNOTATION_NAME] == "train"


def test_an_op_admitted_without_flavors_has_no_flavors_annotation():
    assert ANNOTATION_FLAVORS not in placed(op().gpus(1))["metadata"]["annotations"]


@pytest.mark.parametrize("c", [
    case("an op admitted on borrowed quota is labelled borrowing", borrowing=True, label="true"),
    case("an op within its own quota has no borrowing label", borrowing=False, label=None),
], ids=case_name)
def test_borrowing_is_labelled(c):
    pod = placed(op().gpus(1).label(LABEL_BORROWING, "forged"), borrowing=c.borrowing)
    assert pod["metadata"]["labels"].get(LABEL_BORROWING) == c.label


def test_admission_placement_leaves_the_spec_unchanged():
    spec = op().gpus(1, product="T4").toleration(**TAINT_GPU).build()
    build_pod(msgspec.structs.replace(admitted(spec), node_selector={GPU_PRODUCT: "A100"}, tolerations=[TAINT_SPOT]))
    assert spec.environment.node_selector == {GPU_PRODUCT: "T4"}
    assert spec.environment.tolerations == [TAINT_GPU]


def test_absent_placement_is_left_out():
    spec = pod_of(op())["spec"]
    assert not {"nodeSelector", "tolerations", "affinity", "volumes", "activeDeadlineSeconds"} & set(spec)


def test_the_pod_never_restarts_and_does_not_mount_the_api_token():
    spec = pod_of(op())["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False


@pytest.mark.parametrize("c", [
    case("a timeout becomes the active deadline", timeout=600, deadline=600),
    case("no timeout means no active deadline", timeout=None, deadline=None),
], ids=case_name)
def test_active_deadline_from_termination_timeout(c):
    assert pod_of(op().timeout(c.timeout))["spec"].get("activeDeadlineSeconds") == c.deadline


def test_the_container_carries_image_command_args_and_env():
    container = main_container(pod_of(op().image("pytorch:2").command("python", "train.py")
                                      .args("--lr", "0.1").env("SEED", "42")))
    assert container["image"] == "pytorch:2"
    assert container["command"] == ["python", "train.py"]
    assert container["args"] == ["--lr", "0.1"]
    assert container["env"] == [{"name": "SEED", "value": "42"}, VOID]


# ---- violations -------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("NVIDIA_VISIBLE_DEVICES in env bypasses gpu accounting",
         builder=op().env("NVIDIA_VISIBLE_DEVICES", "all"), says="NVIDIA_VISIBLE_DEVICES"),
    case("a privileged container sees every gpu",
         builder=op().privileged(), says="privileged"),
    case("a gpu requested without a limit",
         builder=op().requests(**{GPU: "1"}), says="without a limit"),
    case("a gpu request that differs from its limit",
         builder=op().gpus(2).requests(**{GPU: "1"}), says="differs from limit"),
    case("a hostPath mount of the nvidia driver libraries",
         builder=op().volume("drivers", host_path="/usr/local/nvidia/lib64", mount_path="/drivers"),
         says="mounts driver files"),
    case("a hostPath mount of libcuda",
         builder=op().volume("cuda", host_path="/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
         says="mounts driver files"),
], ids=case_name)
def test_specs_that_bypass_gpu_accounting_are_refused(c):
    problems = violations(c.builder.build())
    assert len(problems) == 1, problems
    assert c.says in problems[0]


@pytest.mark.parametrize("c", [
    case("gpus as a limit with cpu and memory requests", builder=op().gpus(2).cpu("4").memory("16Gi")),
    case("gpus as a limit with an equal request", builder=op().gpus(2).requests(**{GPU: "2"})),
    case("a cpu-only op", builder=op().cpu("500m")),
    case("privileged explicitly false", builder=op().privileged(False)),
    case("ordinary env vars and a hostPath outside the driver paths",
         builder=op().env("CUDA_LAUNCH_BLOCKING", "1").volume("data", host_path="/mnt/data")),
    case("an emptyDir volume", builder=op().volume("scratch", emptyDir={})),
], ids=case_name)
def test_an_acceptable_spec_has_no_violations(c):
    assert violations(c.builder.build()) == []


def test_every_problem_is_reported_at_once():
    spec = op().env("NVIDIA_VISIBLE_DEVICES", "0").privileged().gpus(2).requests(**{GPU: "1"}).build()
    assert len(violations(spec)) == 3


def test_a_tpu_op_needs_the_tensorflow_version_annotation_and_keeps_it_on_the_pod():
    from opsched.proto.spec import Environment, OpSpec
    from opsched.rules.gpu_accounting import violations
    from opsched.rules.podspec import build_pod
    from tests.builders import admitted, op

    bare = op("tpu").limits(**{"cloud-tpus.google.com/v2": "8"}).build()
    assert any("tf-version.cloud-tpus.google.com" in p for p in violations(bare))
    annotated = OpSpec(**{f: getattr(bare, f) for f in bare.__struct_fields__ if f != "environment"},
                       environment=Environment(annotations={"tf-version.cloud-tpus.google.com": "2.12"}))
    assert violations(annotated) == []
    pod = build_pod(admitted(annotated, op_id="t1"))
    assert pod["metadata"]["annotations"]["tf-version.cloud-tpus.google.com"] == "2.12"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cloud-tpus.google.com/v2": "8"}


# ---- gangs: the main pod plus replica groups ----------------------------------------------------

def gang(**kw):
    """A 1-GPU master with 2 workers (their own image and command) and 1 parameter server."""
    from opsched.proto.spec import Container, ReplicaGroup, Resources

    worker = Container(image="trainer:2", command=["python", "worker.py"],
                       resources=Resources(limits={GPU: "1"}))
    ps = Container(image="ps:1", name="ps", resources=Resources(requests={"cpu": "1"}))
    spec = op("dist").gpus(1).label("team", "vision").toleration(**TAINT_GPU).build()
    spec.replicas = [ReplicaGroup(name="worker", count=2, container=worker),
                     ReplicaGroup(name="ps", count=1, container=ps)]
    return msgspec.structs.replace(admitted(spec, op_id="g1", attempt=1, **kw),
                                   node_selector={GPU_PRODUCT: "A100"}, tolerations=[TAINT_SPOT])


def test_every_pod_of_a_gang_is_built_with_names_from_proto_naming():
    from opsched.rules.naming import pod_names

    event = gang()
    pods = build_pods(event)
    assert [p["metadata"]["name"] for p in pods] == pod_names("g1", 1, event.spec) == [
        "op-g1-1", "op-g1-1-worker-0", "op-g1-1-worker-1", "op-g1-1-ps-0"]
    alone = build_pod(event)
    rendezvous.apply([alone, *copy.deepcopy(pods[1:])], event.spec, event.namespace)
    assert pods[0] == alone  # the main pod is the pod of a one-pod op, with its gang labels and rendezvous
    assert build_pods(event) == pods


def test_replica_pods_run_their_own_container():
    pods = build_pods(gang())
    images = [main_container(p)["image"] for p in pods]
    assert images == ["python:3.11-slim", "trainer:2", "trainer:2", "ps:1"]
    assert main_container(pods[1])["command"] == ["python", "worker.py"]
    assert main_container(pods[1])["resources"] == {"limits": {GPU: "1"}, "requests": {GPU: "1"}}
    assert main_container(pods[3]) == {"name": "ps", "image": "ps:1", "resources": {"requests": {"cpu": "1"}},
                                       "env": [VOID, *rendezvous_env(rank=3, size=4)]}


def test_replica_pods_share_the_main_pods_labels_annotations_and_placement():
    pods = build_pods(gang())
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {GPU_PRODUCT: "A100"}
        assert pod["spec"]["tolerations"] == [TAINT_GPU, TAINT_SPOT]
        assert pod["metadata"]["annotations"] == pods[0]["metadata"]["annotations"]
        labels = {k: v for k, v in pod["metadata"]["labels"].items() if k != LABEL_REPLICA}
        assert labels == {k: v for k, v in pods[0]["metadata"]["labels"].items() if k != LABEL_REPLICA}
        assert pod["metadata"]["labels"][LABEL_GANG_SIZE] == "4"
        assert pod["metadata"]["labels"]["team"] == "vision"
        assert pod["metadata"]["namespace"] == pods[0]["metadata"]["namespace"]
    assert [p["metadata"]["labels"][LABEL_REPLICA] for p in pods] == ["main", "worker-0", "worker-1", "ps-0"]


def test_a_single_pod_op_builds_one_pod():
    (pod,) = build_pods(admitted(op().gpus(1).build(), op_id="solo"))
    assert pod["metadata"]["name"] == "op-solo-0"
    assert pod["metadata"]["labels"][LABEL_GANG_SIZE] == "1"


@pytest.mark.parametrize("c", [
    case("a replica with NVIDIA_VISIBLE_DEVICES bypasses gpu accounting",
         container=dict(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]), says="NVIDIA_VISIBLE_DEVICES"),
    case("a privileged replica sees every gpu",
         container={"securityContext": {"privileged": True}}, says="privileged"),
    case("a replica requesting a gpu without a limit",
         container=dict(resources={"requests": {GPU: "1"}}), says="without a limit"),
], ids=case_name)
def test_replica_containers_are_checked_for_gpu_accounting_too(c):
    from opsched.proto.spec import Container, ReplicaGroup

    spec = op().gpus(1).build()
    spec.replicas = [ReplicaGroup(name="worker", count=2,
                                  container=msgspec.convert({"image": "w", **c.container}, Container))]
    problems = violations(spec)
    assert len(problems) == 1, problems
    assert problems[0].startswith("replica 'worker': ") and c.says in problems[0]


def test_a_tpu_replica_needs_the_tensorflow_version_annotation():
    from opsched.proto.spec import Container, ReplicaGroup, Resources

    spec = op().build()
    spec.replicas = [ReplicaGroup(name="tpu", container=Container(
        image="t", resources=Resources(limits={"cloud-tpus.google.com/v2": "8"})))]
    assert any("tf-version.cloud-tpus.google.com" in p for p in violations(spec))


def rendezvous_env(rank: int, size: int, main: str = "op-g1-1") -> list[dict[str, str]]:
    """PyTorch's env://, which a gang of a kind without its own rendezvous (a ``job`` with groups) gets."""
    return [{"name": "MASTER_ADDR", "value": f"main-0.{main}"}, {"name": "MASTER_PORT", "value": "29500"},
            {"name": "WORLD_SIZE", "value": str(size)}, {"name": "RANK", "value": str(rank)}]


def test_a_gang_s_pods_find_each_other_through_a_headless_service_and_a_one_pod_op_gets_none():
    from opsched.rules.podspec import rendezvous_service

    event = gang()
    pods = build_pods(event)
    assert [(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in pods] == [
        ("main-0", "op-g1-1"), ("worker-0", "op-g1-1"), ("worker-1", "op-g1-1"), ("ps-0", "op-g1-1")]
    for rank, pod in enumerate(pods):
        env = {e["name"]: e["value"] for c in pod["spec"]["containers"] for e in c["env"]}
        assert env["MASTER_ADDR"] == "main-0.op-g1-1" and env["MASTER_PORT"] == "29500"
        assert (env["WORLD_SIZE"], env["RANK"]) == ("4", str(rank))
    service = rendezvous_service(event)
    assert service["metadata"]["name"] == "op-g1-1" and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == service["metadata"]["labels"]  # every pod of the attempt
    assert service["metadata"]["labels"][LABEL_OP] == "g1" and service["spec"]["publishNotReadyAddresses"]
    assert rendezvous_service(admitted(op("one").gpus(1).build())) is None
    assert "hostname" not in build_pods(admitted(op("one").gpus(1).build()))[0]["spec"]


def test_a_rendezvous_variable_the_op_sets_keeps_its_value():
    event = gang()
    from opsched.proto.spec import EnvVar

    event.spec.container.env.append(EnvVar(name="MASTER_PORT", value="23456"))
    main = build_pods(event)[0]
    values = [e["value"] for e in main_container(main)["env"] if e["name"] == "MASTER_PORT"]
    assert values == ["23456"]


def test_a_service_name_stays_a_dns_label_however_long_the_op_id():
    long_pod = "op-" + "x" * 63 + "-12"
    name = rendezvous.service_name(long_pod)
    assert len(name) <= 63 and name == rendezvous.service_name(long_pod) and name[0].isalpha()
    assert rendezvous.config_map_name(long_pod) == f"{name}-hostfile"
