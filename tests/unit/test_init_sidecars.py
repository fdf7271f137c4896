"""Polyaxon's ``init`` steps, ``sidecars`` and admin-declared ``connections``: the contract's rules, the pods the
dispatcher builds from them (``rules.podspec``, ``rules.init_steps``), what each pod asks for as Kubernetes counts it
(``proto.pod_resources``), the pod security and GPU-accounting rules on every container, and the one rule of which
connections an op may name (``rules.connections``) as admission, the dispatcher and the CLI apply it."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto import codec
from opsched.proto.pod_resources import gpus_of, pod_requests
from opsched.proto.resources import effective
from opsched.proto.spec import (
    Container,
    EnvVar,
    FileInit,
    GitInit,
    InitStep,
    OpSpec,
    ReplicaGroup,
    Resources,
    repo_name,
)
from opsched.rules import connections, reserved_keys
from opsched.rules.gpu_accounting import violations
from opsched.rules.init_steps import GIT_CREDENTIALS
from opsched.rules.pod_security import check_pods, policy_for, policy_of
from opsched.rules.podspec import build_pods
from opsched.rules.queues_file import QueuesConfigError, parse_queues
from opsched.services.admission.model.records import requests_of
from opsched.services.cost.estimator import Prices, estimate, gpu_count
from tests.builders import admitted

CONFIG = parse_queues("""
queues: [{name: default}, {name: other}, {name: own-image, initImage: "registry.local/git:2"}]
connections:
  - {name: repo, kind: git, schema: {url: "https://git.example/ml/models.git", revision: main, flags: ["--depth 1"]},
     secret: {name: repo-token}, env: [{name: GIT_HOST, value: git.example}]}
  - {name: mounted, kind: custom, secret: {name: db-creds, mountPath: /etc/db}}
  - {name: items, kind: custom, secret: {name: api-keys, items: [API_KEY]}}
  - {name: plain, kind: custom, env: [{name: REGION, value: eu}]}
  - {name: only-other, kind: custom, queues: [other]}
""")
GPU = "nvidia.com/gpu"


def spec(**pod) -> OpSpec:
    return OpSpec(name="train", container=Container(image="trainer:1"), **pod)


def step(**fields) -> InitStep:
    return InitStep(**fields)


def pods_of(s: OpSpec, queue: str = "default") -> list[dict]:
    fields, problems = connections.admitted_fields(s, CONFIG, queue)
    assert problems == []
    return build_pods(msgspec.structs.replace(admitted(s, op_id="a", queue=queue), **fields))


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# ---- the contract ---------------------------------------------------------------------------------

@pytest.mark.parametrize("pod, message", [
    ({"init": [step()]}, "init[0]: an init step is exactly one of git, file or container, not none"),
    ({"init": [step(git=GitInit(url="https://h/r.git"), file=FileInit(content="x"))]},
     "init[0]: an init step is exactly one of git, file or container, not git and file"),
    ({"init": [step(git=GitInit())]}, "init[0].git: a git step needs a url, or a connection"),
    ({"init": [step(git=GitInit(url="https://host/.git"))]}, "init[0].git.url: 'https://host/.git' names no repository"),
    ({"init": [step(git=GitInit(url="https://h/r.git", flags=["'--depth"]))]},
     "init[0].git.flags[0]: \"'--depth\" cannot be split into arguments"),
    ({"init": [step(file=FileInit(content="x"), connection="repo")]},
     "init[0].connection: a file step uses no connection"),
    ({"init": [step(file=FileInit(content="x", filename="a/b"))]}, "init[0].file.filename: 'a/b' must be a file name"),
    ({"init": [step(file=FileInit(content="x", chmod="777; rm -rf /"))]}, "init[0].file.chmod: '777; rm -rf /' is not"),
    ({"init": [step(file=FileInit(content="x" * 70_000))]}, "init[0].file.content: 70000 bytes is above the limit"),
    ({"init": [step(file=FileInit(content="x"), path="data")]}, "init[0].path: 'data' must be an absolute, normalized"),
    ({"init": [step(file=FileInit(content="x"), path="/a/../etc")]}, "init[0].path: '/a/../etc' must be an absolute"),
    ({"init": [step(git=GitInit(url="https://a/models.git")), step(git=GitInit(url="https://b/models"))]},
     "init[1]: writes to /plx-context/artifacts/models, as init[0] does"),
    ({"sidecars": [Container(image="x")]}, "sidecars[0]: the container name 'main' is also container's"),
    ({"init": [step(container=Container(image="x", name="logs"))], "sidecars": [Container(image="y", name="logs")]},
     "sidecars[0]: the container name 'logs' is also init[0]'s"),
    ({"init": [step(git=GitInit(url="https://h/r.git")), step(container=Container(image="x", name="init-git-0"))]},
     "init[1]: the container name 'init-git-0' is also init[0]'s"),
    ({"connections": ["repo", "repo"]}, "connections[1]: 'repo' is named twice"),
    ({"connections": ["Repo"]}, "connections[0]: 'Repo' is not a DNS label"),
    ({"connections": ["x" * 51]}, "is longer than 50 characters"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_the_contract_refuses_an_init_step_sidecar_or_connection_it_cannot_run_naming_the_field(pod, message):
    with pytest.raises(ValueError, match=r".*" + message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)").replace("*", r"\*").replace("+", r"\+")):
        spec(**pod)


def test_a_replica_groups_pods_are_checked_as_the_main_pods_are():
    with pytest.raises(ValueError, match=r"replicas\[0\]\.sidecars\[0\]: the container name 'w'"):
        spec(replicas=[ReplicaGroup(name="worker", container=Container(image="x", name="w"),
                                    sidecars=[Container(image="y", name="w")])])


def test_the_counts_are_bounded_on_decode():
    body = msgspec.to_builtins(spec())
    for field, item, bound in (("init", {"file": {"content": "x"}}, 16), ("sidecars", {"image": "y"}, 8),
                               ("connections", "c", 16)):
        with pytest.raises(msgspec.ValidationError, match=f"length <= {bound}"):
            codec.decode_spec(msgspec.json.encode({**body, field: [item] * (bound + 1)}))


def test_a_repository_is_named_as_polyaxon_names_a_clone():
    assert [repo_name(u) for u in ("https://github.com/org/models.git", "git@github.com:org/models.git",
                                   "https://host/org/models/", "git@host:models.git")] == ["models"] * 4


# ---- the pods ---------------------------------------------------------------------------------------

def test_a_pod_without_init_steps_or_sidecars_is_built_as_before():
    pod = pods_of(spec())[0]["spec"]
    assert "initContainers" not in pod and "volumes" not in pod and [c["name"] for c in pod["containers"]] == ["main"]
    assert "volumeMounts" not in pod["containers"][0]


def test_init_steps_run_in_order_before_the_containers_and_every_container_mounts_the_context():
    s = spec(init=[step(git=GitInit(url="https://github.com/org/models.git", revision="v2", flags=["--depth 1"])),
                   step(file=FileInit(content="echo hi", filename="run.sh", chmod="+x"), path="/scripts/"),
                   step(container=Container(image="busybox", name="prepare", command=["true"]))],
             sidecars=[Container(image="fluentd", name="logs")])
    pod = pods_of(s)[0]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["init-git-0", "init-file-1", "prepare"]
    assert [c["name"] for c in pod["containers"]] == ["main", "logs"]
    assert pod["volumes"] == [{"name": "opsched-context", "emptyDir": {}}, {"name": "opsched-init-0", "emptyDir": {}}]
    shared = [{"name": "opsched-context", "mountPath": "/plx-context"}, {"name": "opsched-init-0", "mountPath": "/scripts"}]
    for container in pod["initContainers"] + pod["containers"]:
        assert container["volumeMounts"] == shared, container["name"]
        assert env_of(container).get("NVIDIA_VISIBLE_DEVICES") == "void"  # none of them asks for a GPU
    git, file, _ = pod["initContainers"]
    assert (git["image"], git["command"][:2], git["command"][3:]) == ("alpine/git:v2.36.1", ["sh", "-c"],
                                                                      ["opsched-git", "--depth", "1"])
    assert env_of(git) | {"NVIDIA_VISIBLE_DEVICES": None} == {
        "HOME": "/tmp", "OPSCHED_GIT_URL": "https://github.com/org/models.git", "NVIDIA_VISIBLE_DEVICES": None,
        "OPSCHED_GIT_DEST": "/plx-context/artifacts/models", "OPSCHED_GIT_REVISION": "v2"}
    assert {k: v for k, v in env_of(file).items() if k.startswith("OPSCHED")} == {
        "OPSCHED_FILE_DEST": "/scripts/run.sh", "OPSCHED_FILE_CONTENT": "echo hi", "OPSCHED_FILE_CHMOD": "+x"}
    assert git["securityContext"] == file["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def test_a_connection_gives_its_container_its_env_and_its_secret_by_name_only():
    s = spec(init=[step(connection="repo", git=GitInit(revision="v3")),
                   step(container=Container(image="busybox", name="migrate"), connection="items")],
             connections=["mounted", "plain", "repo"])
    pod = pods_of(s)[0]["spec"]
    git, migrate = pod["initContainers"]
    main = pod["containers"][0]
    assert env_of(git)["OPSCHED_GIT_URL"] == "https://git.example/ml/models.git"  # the connection's repository
    assert env_of(git)["OPSCHED_GIT_REVISION"] == "v3" and git["command"][3:] == ["opsched-git", "--depth", "1"]
    assert env_of(git)["OPSCHED_GIT_DEST"] == "/plx-context/artifacts/repo"  # named after the connection
    assert {"name": "opsched-conn-repo", "mountPath": GIT_CREDENTIALS, "readOnly": True} in git["volumeMounts"]
    assert env_of(git)["OPSCHED_GIT_CREDENTIALS"] == GIT_CREDENTIALS and env_of(git)["GIT_HOST"] == "git.example"
    assert env_of(migrate)["API_KEY"] == {"secretKeyRef": {"name": "api-keys", "key": "API_KEY"}}
    assert env_of(main)["REGION"] == "eu" and env_of(main)["GIT_HOST"] == "git.example"
    assert {"name": "opsched-conn-mounted", "mountPath": "/etc/db", "readOnly": True} in main["volumeMounts"]
    assert main["envFrom"] == [{"secretRef": {"name": "repo-token"}}]  # neither items nor a mountPath: every key
    assert [v for v in pod["volumes"] if "secret" in v] == [
        {"name": "opsched-conn-repo", "secret": {"secretName": "repo-token"}},
        {"name": "opsched-conn-mounted", "secret": {"secretName": "db-creds"}}]
    assert "opsched-conn-repo" not in str(pod["containers"])  # the git credentials: in the git container only
    assert env_of(main)["NVIDIA_VISIBLE_DEVICES"] == "void" and main["env"][-1]["name"] == "NVIDIA_VISIBLE_DEVICES"


def test_a_queue_may_run_its_git_and_file_steps_with_its_own_image():
    s = spec(init=[step(file=FileInit(content="x"))])
    assert pods_of(s, "own-image")[0]["spec"]["initContainers"][0]["image"] == "registry.local/git:2"
    assert connections.admitted_fields(spec(), CONFIG, "own-image")[0]["init_image"] == ""  # no step: no image


def test_a_replica_groups_pods_have_its_own_init_steps_sidecars_and_connections():
    s = spec(init=[step(file=FileInit(content="x"))],
             replicas=[ReplicaGroup(name="worker", count=2, container=Container(image="w"),
                                    init=[step(connection="repo", git=GitInit())],
                                    sidecars=[Container(image="s", name="side")],
                                    connections=["plain"])])
    main, *workers = pods_of(s)
    assert [c["name"] for c in main["spec"]["initContainers"]] == ["init-file-0"]
    assert [c["name"] for c in main["spec"]["containers"]] == ["main"]
    for worker in workers:
        assert [c["name"] for c in worker["spec"]["initContainers"]] == ["init-git-0"]
        assert [c["name"] for c in worker["spec"]["containers"]] == ["main", "side"]
        assert env_of(worker["spec"]["containers"][0])["REGION"] == "eu"


def test_the_pod_builder_refuses_a_connection_its_event_does_not_declare():
    with pytest.raises(ValueError, match="connection 'repo' is named by the op but not declared on its admitted"):
        build_pods(admitted(spec(connections=["repo"]), op_id="a"))


# ---- the init scripts, run (git and sh as the init image has them) ------------------------------

@pytest.fixture
def repository(tmp_path):
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("no git here")
    src = tmp_path / "src"
    run = {"check": True, "capture_output": True, "env": {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}}
    subprocess.run(["git", "init", "-q", str(src)], **run)
    for message in ("one", "two"):
        subprocess.run(["git", "-C", str(src), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                        "--allow-empty", "-m", message], **run)
        if message == "one":
            subprocess.run(["git", "-C", str(src), "tag", "v1"], **run)
    return src


def run_init(container: dict, tmp_path, **env) -> str:
    import subprocess

    values = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    values.update(env, HOME=str(tmp_path / "home"), PATH="/usr/bin:/bin")
    done = subprocess.run(container["command"], env=values, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_git_step_clones_its_revision_and_the_file_step_writes_its_file(repository, tmp_path):
    import subprocess

    dest = tmp_path / "ctx"
    s = spec(init=[step(git=GitInit(url=f"file://{repository}", revision="v1", flags=["--no-single-branch"]),
                        path=str(dest)),
                   step(file=FileInit(content="echo '$HOME' `x`\n", filename="run.sh", chmod="+x"), path=str(dest))])
    git, file = pods_of(s)[0]["spec"]["initContainers"]
    run_init(git, tmp_path)
    log = subprocess.run(["git", "-C", str(dest / "src"), "log", "--format=%s", "-1"], capture_output=True, text=True)
    assert log.stdout.strip() == "one"
    assert "cloned already" in run_init(git, tmp_path)  # the init container run again keeps the clone
    run_init(file, tmp_path)
    assert (dest / "run.sh").read_text() == "echo '$HOME' `x`\n"  # written as is: nothing of it ran
    assert (dest / "run.sh").stat().st_mode & 0o111


def test_the_git_step_gives_git_the_connections_credentials_from_the_mounted_secret(repository, tmp_path):
    import subprocess

    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "username").write_text("alice")
    (creds / "password").write_text("s3cr3t")
    s = spec(init=[step(git=GitInit(url=f"file://{repository}", revision="v1", flags=["--quiet"]), connection="repo",
                        path=str(tmp_path / "ctx"))])
    [git] = pods_of(s)[0]["spec"]["initContainers"]
    assert "s3cr3t" not in str(git)  # only the Secret's name is in the pod
    run_init(git, tmp_path, OPSCHED_GIT_CREDENTIALS=str(creds))
    asked = subprocess.run(["git", "credential", "fill"], input="protocol=https\nhost=git.example\n\n",
                           capture_output=True, text=True, env={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin",
                                                                "OPSCHED_GIT_CREDENTIALS": str(creds)})
    assert "username=alice\npassword=s3cr3t" in asked.stdout


# ---- what a pod asks for, as Kubernetes counts it -----------------------------------------------------

def gpus(n: int, cpu: str = "1") -> Resources:
    return Resources(limits={GPU: str(n)}, requests={"cpu": cpu})


def test_a_pod_asks_the_larger_of_its_largest_init_container_and_the_sum_of_its_containers():
    assert effective([{GPU: 1, "cpu": 1}, {GPU: 1}], [{GPU: 3}, {"cpu": 4}]) == {GPU: 3, "cpu": 4}
    assert effective([{GPU: 2}, {GPU: 1}], [{GPU: 2}]) == {GPU: 3}


def test_admission_cost_and_the_gpus_column_count_init_containers_and_sidecars_as_kubernetes_does():
    s = OpSpec(name="t", container=Container(image="m", resources=gpus(1)),
               init=[step(container=Container(image="i", name="warm", resources=gpus(2, "4")))],
               sidecars=[Container(image="s", name="side", resources=gpus(1, "500m"))],
               replicas=[ReplicaGroup(name="worker", count=2, container=Container(image="w", resources=gpus(1)),
                                      sidecars=[Container(image="s", name="side", resources=gpus(1))])])
    pods, total = requests_of(s)
    assert pods == [{GPU: 2.0, "cpu": 4.0}, {GPU: 2.0, "cpu": 2.0}, {GPU: 2.0, "cpu": 2.0}]
    assert total == {GPU: 6.0, "cpu": 8.0}
    assert pod_requests(s)[1] == ({GPU: 2.0, "cpu": 2.0}, 2)
    assert gpus_of(s) == "6" and gpu_count(s) == 6
    priced = estimate(s, Prices(cpu_hour=1.0, accelerators={GPU: {"*": 10.0}}), 3600.0)
    assert priced.breakdown == {GPU: 60.0, "cpu": 8.0}


# ---- GPU accounting and pod security on every container ------------------------------------------------

def test_gpu_accounting_refuses_what_bypasses_it_in_an_init_container_or_a_sidecar():
    s = spec(init=[step(container=Container(image="i", name="i", env=[EnvVar(name="NVIDIA_VISIBLE_DEVICES",
                                                                             value="all")]))],
             sidecars=[Container(image="s", name="s", security_context={"privileged": True})],
             replicas=[ReplicaGroup(name="worker", container=Container(image="w"),
                                    sidecars=[Container(image="s", name="s", resources=Resources(
                                        requests={GPU: "1"}))])])
    assert violations(s) == [
        "init[0]: env NVIDIA_VISIBLE_DEVICES bypasses GPU accounting; request GPUs with resources.limits "
        "(e.g. nvidia.com/gpu: 1) instead",
        "sidecars[0]: securityContext.privileged: true exposes every GPU on the node; it is refused",
        "replica 'worker': sidecars[0]: nvidia.com/gpu is requested without a limit; accelerators must be set in "
        "resources.limits (requests, if given, must equal limits)"]


def test_an_admin_declared_connections_secret_is_allowed_where_a_users_own_secret_volume_is_not():
    s = spec(init=[step(connection="repo", git=GitInit())], connections=["mounted"])
    fields = connections.admitted_fields(s, CONFIG, "default")[0]
    event = msgspec.structs.replace(admitted(s, op_id="a"), **fields)
    assert check_pods(build_pods(event), policy_of("default", event)) == []
    assert check_pods(build_pods(event), policy_for(CONFIG, "default", fields["connections"])) == []
    forged = [{**p, "spec": {**p["spec"], "volumes": [*p["spec"]["volumes"], {
        "name": "opsched-conn-repo", "secret": {"secretName": "someone-elses"}}]}} for p in build_pods(event)]
    assert check_pods(forged, policy_of("default", event)) == [
        "spec.volumes[3].secret: {\"secretName\": \"someone-elses\"} is not allowed by queue default's pod security "
        "level baseline (the queue does not set allowSecretVolumes)"]
    own = spec(environment=msgspec.structs.replace(spec().environment, volumes=[
        {"name": "creds", "secret": {"secretName": "repo-token"}}]))
    assert len(check_pods(build_pods(admitted(own, op_id="a")), policy_of("default", event))) == 1


def test_init_containers_and_sidecars_are_held_to_the_queues_pod_security_level():
    s = spec(init=[step(container=Container(image="i", name="i", security_context={"privileged": True}))],
             sidecars=[Container(image="s", name="s", ports=[{"containerPort": 80, "hostPort": 80}])])
    found = check_pods(pods_of(s), policy_for(CONFIG, "default"))
    assert any(p.startswith("spec.initContainers[0].securityContext.privileged") for p in found)
    assert any(p.startswith("spec.containers[1].ports[0].hostPort") for p in found)


def test_opsched_init_containers_pass_the_restricted_level_under_a_pod_that_does():
    config = parse_queues("queues: [{name: default, podSecurity: restricted}]")
    safe = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    s = OpSpec(name="t", container=Container(image="m", security_context=safe),
               environment=msgspec.structs.replace(spec().environment, security_context={
                   "runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}),
               init=[step(git=GitInit(url="https://h/r.git")), step(file=FileInit(content="x"))])
    assert check_pods(pods_of(s), policy_for(config, "default")) == []


def test_a_users_volume_or_mount_where_opsched_puts_its_own_is_refused():
    mount = {"name": "v", "mountPath": "/plx-context"}
    s = spec(sidecars=[Container(image="s", name="s", volume_mounts=[mount])],
             environment=msgspec.structs.replace(spec().environment, volumes=[{"name": "opsched-context",
                                                                               "emptyDir": {}}]))
    assert reserved_keys.problems(s) == [
        "environment.volumes[0].name: 'opsched-context' is opsched's (its context, init paths and connections' "
        "Secrets are 'opsched-context', 'opsched-init-'…, 'opsched-conn-'…, an mpijob's hostfile "
        "'opsched-mpi-hostfile'); rename it",
        "sidecars[0].volumeMounts[0].mountPath: '/plx-context' is where opsched mounts the pod's context (or an init "
        "step's path); mount elsewhere"]
    alone = OpSpec(name="t", container=Container(image="m", volume_mounts=[mount]))
    assert reserved_keys.problems(alone) == []  # a pod without init steps or sidecars has no context


# ---- which connections an op may name ---------------------------------------------------------------

def test_an_op_may_name_only_the_connections_its_queue_declares_for_it():
    s = spec(connections=["repo", "nope"], init=[step(connection="plain", git=GitInit()), step(connection="only-other",
                                                                                container=Container(image="x", name="x"))])
    found, problems = connections.resolve(s, CONFIG, "default")
    assert [c.name for c in found] == ["repo"]
    assert problems == [
        "connections[1]: connection 'nope' is not declared in the queue configuration (declared: items, mounted, "
        "only-other, plain, repo)",
        "init[0].connection: connection 'plain' is a custom connection; a git step clones the repository of a git "
        "connection (give a custom one's credentials to a container step)",
        "init[1].connection: connection 'only-other' is not available to queue default (only to other)"]
    assert connections.resolve(spec(init=[step(connection="only-other", container=Container(image="x", name="x"))]),
                               CONFIG, "other")[1] == []


def test_the_dispatcher_refuses_connections_or_an_init_image_its_configuration_does_not_give():
    s = spec(init=[step(connection="repo", git=GitInit())])
    fields = connections.admitted_fields(s, CONFIG, "default")[0]
    assert connections.carried_problems(s, "default", fields, CONFIG) == []
    forged = msgspec.structs.replace(fields["connections"][0], secret=msgspec.structs.replace(
        fields["connections"][0].secret, name="cluster-admin-token"))
    assert connections.carried_problems(s, "default", {"connections": [forged], "init_image": "evil:1"}, CONFIG) == [
        "connections ['repo'] are not those the configuration declares for the op in queue default (['repo']), or "
        "not as it declares them",
        "init image 'evil:1' is not queue default's ('alpine/git:v2.36.1')"]


@pytest.mark.parametrize("text, message", [
    ("connections: [{name: r, kind: git}]", "connections[0].schema.url: a git connection names its repository"),
    ("connections: [{name: r, kind: custom, schema: {url: x}}]", "connections[0].schema: only a git connection"),
    ("connections: [{name: r, kind: s3}]", "Invalid enum value 's3'"),
    ("connections: [{name: r, kind: custom}, {name: r, kind: custom}]", "connections: the name 'r' is used twice"),
    ("connections: [{name: R, kind: custom}]", "connections[0].name: 'R' is not a DNS label"),
    ("connections: [{name: r, kind: custom, queues: [gpu]}]", "connections[0].queues[0]: 'gpu' is not one of"),
    ("connections: [{name: r, kind: custom, secret: {name: s, items: ['1x']}}]", "secret.items[0]: '1x' is not"),
    ("connections: [{name: r, kind: custom, secret: {name: s, mountPath: etc}}]", "secret.mountPath: 'etc' must be"),
    ("initImage: ' '", "initImage: an image name is needed"),
])
def test_a_connection_or_init_image_the_configuration_cannot_use_is_refused_when_it_is_loaded(text, message):
    with pytest.raises(QueuesConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_queues("queues: [{name: default}]\n" + text)
