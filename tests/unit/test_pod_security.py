"""A queue's pod security level, checked on the pods the dispatcher builds: every Pod Security Standards rule
at the levels that refuse it (and only there), opsched's own refusals, the system namespaces at every level,
the messages (field, value, queue, level), and the levels of the namespaces opsched labels."""
from __future__ import annotations

import copy

import msgspec
import pytest

from opsched.proto.queues import Queue
from opsched.rules.gpu_accounting import violations
from opsched.rules.pod_security import (
    CARRIED,
    LEVELS,
    Policy,
    carried,
    check_pod,
    check_pods,
    namespace_levels,
    policy_for,
    policy_of,
)
from opsched.rules.podspec import build_pods
from opsched.rules.queues_file import QueuesConfigError, parse_queues
from tests.builders import admitted, case, case_name, op

BASE = ("baseline", "restricted")  # what every level but privileged refuses
RESTRICTED = ("restricted",)
EVERY = LEVELS
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
HARDENED = dict(runAsNonRoot=True, allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]},
                seccompProfile={"type": "RuntimeDefault"})


def pods(builder, namespace: str = "ml") -> list[dict]:
    return build_pods(admitted(builder.build(), queue="gpu", namespace=namespace))


def raw(**spec) -> list[dict]:
    """A pod of a plain op with fields of its spec set directly (what no polyaxonfile can write)."""
    pod = copy.deepcopy(pods(op())[0])
    for path, value in spec.items():
        *parents, leaf = path.split("__")
        node = pod["spec"]
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[leaf] = value
    return [pod]


def problems(built: list[dict], level: str, secret_volumes: bool = False) -> list[str]:
    return check_pods(built, Policy("gpu", level, secret_volumes))  # type: ignore[arg-type]


RULES = [
    # the review's findings (issue 15)
    case("a hostPath volume of the node's root", pods=pods(op().volume("root", host_path="/")),
         field="spec.volumes[0].hostPath", refused_at=BASE),
    case("a hostPath volume of /dev", pods=pods(op().volume("dev", host_path="/dev")),
         field="spec.volumes[0].hostPath", refused_at=BASE),
    case("a hostPath volume of the containerd socket", pods=pods(op().volume("sock", host_path=CONTAINERD_SOCKET)),
         field="spec.volumes[0].hostPath", refused_at=BASE),
    case("capabilities.add SYS_ADMIN (with runAsUser 0 and seccomp Unconfined)",
         pods=pods(op().security_context(capabilities={"add": ["SYS_ADMIN"]}, runAsUser=0,
                                         seccompProfile={"type": "Unconfined"})),
         field="spec.containers[0].securityContext.capabilities.add[0]", refused_at=BASE),
    case("seccomp Unconfined (with SYS_ADMIN and runAsUser 0)",
         pods=pods(op().security_context(capabilities={"add": ["SYS_ADMIN"]}, runAsUser=0,
                                         seccompProfile={"type": "Unconfined"})),
         field="spec.containers[0].securityContext.seccompProfile.type", refused_at=BASE),
    case("capabilities.add ALL", pods=pods(op().security_context(capabilities={"add": ["ALL"]})),
         field="spec.containers[0].securityContext.capabilities.add[0]", refused_at=BASE),
    case("a capability spelt cap_sys_admin", pods=pods(op().security_context(capabilities={"add": ["cap_sys_admin"]})),
         field="spec.containers[0].securityContext.capabilities.add[0]", refused_at=BASE),
    case("capabilities.add NET_ADMIN", pods=pods(op().security_context(capabilities={"add": ["NET_ADMIN"]})),
         field="spec.containers[0].securityContext.capabilities.add[0]", refused_at=BASE),
    case("privileged written as the string \"true\"", pods=pods(op().security_context(privileged="true")),
         field="spec.containers[0].securityContext.privileged", refused_at=BASE),
    case("privileged written as 1", pods=pods(op().security_context(privileged=1)),
         field="spec.containers[0].securityContext.privileged", refused_at=BASE),
    case("a projected service-account token next to a serviceAccountName",
         pods=pods(op().environment(service_account_name="builder").volume(
             "token", projected={"sources": [{"serviceAccountToken": {"path": "token"}}]})),
         field="spec.volumes[0].projected.sources[0].serviceAccountToken", refused_at=BASE),
    case("a secret volume", pods=pods(op().volume("creds", secret={"secretName": "cloud"})),
         field="spec.volumes[0].secret", refused_at=BASE),
    case("a projected secret", pods=pods(op().volume("creds", projected={"sources": [{"secret": {"name": "c"}}]})),
         field="spec.volumes[0].projected.sources[0].secret", refused_at=BASE),
    case("a gitRepo volume", pods=pods(op().volume("src", gitRepo={"repository": "https://example.com/x.git"})),
         field="spec.volumes[0].gitRepo", refused_at=BASE),
    case("a toleration of every taint", pods=pods(op().toleration(operator="Exists")),
         field="spec.tolerations[0]", refused_at=BASE),
    case("priorityClassName system-node-critical", pods=pods(op().environment(priority_class_name="system-node-critical")),
         field="spec.priorityClassName", refused_at=BASE),
    case("priorityClassName system-cluster-critical",
         pods=pods(op().environment(priority_class_name="system-cluster-critical")),
         field="spec.priorityClassName", refused_at=BASE),
    case("the kube-system namespace", pods=pods(op(), namespace="kube-system"), field="metadata.namespace",
         refused_at=EVERY),
    case("the kube-node-lease namespace", pods=pods(op(), namespace="kube-node-lease"), field="metadata.namespace",
         refused_at=EVERY),
    # the rest of baseline
    case("hostNetwork", pods=raw(hostNetwork=True), field="spec.hostNetwork", refused_at=BASE),
    case("hostPID", pods=raw(hostPID=True), field="spec.hostPID", refused_at=BASE),
    case("hostIPC as the string \"yes\"", pods=raw(hostIPC="yes"), field="spec.hostIPC", refused_at=BASE),
    case("a host port", pods=raw(containers__0__ports=[{"containerPort": 80, "hostPort": 8080}]),
         field="spec.containers[0].ports[0].hostPort", refused_at=BASE),
    case("an unsafe sysctl", pods=pods(op().environment(security_context={"sysctls": [{"name": "kernel.msgmax",
                                                                                        "value": "1"}]})),
         field="spec.securityContext.sysctls[0].name", refused_at=BASE),
    case("procMount Unmasked", pods=pods(op().security_context(procMount="Unmasked")),
         field="spec.containers[0].securityContext.procMount", refused_at=BASE),
    case("an SELinux user", pods=pods(op().security_context(seLinuxOptions={"user": "system_u"})),
         field="spec.containers[0].securityContext.seLinuxOptions.user", refused_at=BASE),
    case("an SELinux type outside the container types",
         pods=pods(op().environment(security_context={"seLinuxOptions": {"type": "spc_t"}})),
         field="spec.securityContext.seLinuxOptions.type", refused_at=BASE),
    case("AppArmor unconfined by annotation",
         pods=pods(op().environment(annotations={"container.apparmor.security.beta.kubernetes.io/main": "unconfined"})),
         field="metadata.annotations[container.apparmor.security.beta.kubernetes.io/main]", refused_at=BASE),
    case("AppArmor Unconfined by field", pods=pods(op().security_context(appArmorProfile={"type": "Unconfined"})),
         field="spec.containers[0].securityContext.appArmorProfile.type", refused_at=BASE),
    case("pod-level seccomp Unconfined", pods=pods(op().environment(security_context={"seccompProfile": {
        "type": "Unconfined"}})), field="spec.securityContext.seccompProfile.type", refused_at=BASE),
    case("a Windows HostProcess container", pods=pods(op().security_context(windowsOptions={"hostProcess": True})),
         field="spec.containers[0].securityContext.windowsOptions.hostProcess", refused_at=BASE),
    case("a privileged init container", pods=raw(initContainers=[{"name": "i", "image": "busybox",
                                                                  "securityContext": {"privileged": True}}]),
         field="spec.initContainers[0].securityContext.privileged", refused_at=BASE),
    case("a replica group's container adding SYS_ADMIN",
         pods=pods(op().security_context(capabilities={"add": ["SYS_ADMIN"]}).replicas("worker", 2)),
         field="replica 'worker': spec.containers[0].securityContext.capabilities.add[0]", refused_at=BASE),
    # restricted only
    case("allowPrivilegeEscalation unset", pods=pods(op()),
         field="spec.containers[0].securityContext.allowPrivilegeEscalation", refused_at=RESTRICTED),
    case("runAsNonRoot unset", pods=pods(op()), field="spec.containers[0].securityContext.runAsNonRoot",
         refused_at=RESTRICTED),
    case("capabilities not dropping ALL", pods=pods(op().security_context(capabilities={"drop": ["NET_RAW"]})),
         field="spec.containers[0].securityContext.capabilities.drop", refused_at=RESTRICTED),
    case("an added baseline capability (CHOWN)", pods=pods(op().security_context(capabilities={"add": ["CHOWN"]})),
         field="spec.containers[0].securityContext.capabilities.add[0]", refused_at=RESTRICTED),
    case("seccomp unset", pods=pods(op()), field="spec.containers[0].securityContext.seccompProfile.type",
         refused_at=RESTRICTED),
    case("runAsUser 0 on the pod", pods=pods(op().security_context(**HARDENED).environment(
        security_context={"runAsUser": 0})), field="spec.securityContext.runAsUser", refused_at=RESTRICTED),
    case("runAsUser \"0\" on the container", pods=pods(op().security_context(**HARDENED, runAsUser="0")),
         field="spec.containers[0].securityContext.runAsUser", refused_at=RESTRICTED),
    case("an nfs volume", pods=pods(op().volume("data", nfs={"server": "nas", "path": "/x"})),
         field="spec.volumes[0].nfs", refused_at=BASE),
    # what the queue does not list (issue 28, part 5)
    case("a serviceAccountName", pods=pods(op().environment(service_account_name="trainer",
                                                            automount_service_account_token=False)),
         field="spec.serviceAccountName", refused_at=BASE),
    case("automountServiceAccountToken true", pods=pods(op().environment(automount_service_account_token=True)),
         field="spec.automountServiceAccountToken", refused_at=BASE),
    case("automountServiceAccountToken unset with a service account named",
         pods=pods(op().environment(service_account_name="trainer")),
         field="spec.automountServiceAccountToken", refused_at=BASE),
    case("a priorityClassName", pods=pods(op().environment(priority_class_name="high")),
         field="spec.priorityClassName", refused_at=BASE),
    case("a persistentVolumeClaim volume", pods=pods(op().volume("data", persistentVolumeClaim={"claimName": "d"})),
         field="spec.volumes[0].persistentVolumeClaim", refused_at=BASE),
    case("an image pull secret", pods=pods(op().environment(image_pull_secrets=["regcred"])),
         field="spec.imagePullSecrets[0].name", refused_at=BASE),
    case("a liveness probe of the metadata server",
         pods=raw(containers__0__livenessProbe={"httpGet": {"host": "169.254.169.254", "path": "/", "port": 80}}),
         field="spec.containers[0].livenessProbe.httpGet.host", refused_at=EVERY),
    case("a readiness probe of another host", pods=raw(containers__0__readinessProbe={"tcpSocket": {
        "host": "kubernetes.default", "port": 443}}), field="spec.containers[0].readinessProbe.tcpSocket.host",
         refused_at=EVERY),
    case("a startup probe of a link-local IPv6 host", pods=raw(containers__0__startupProbe={"httpGet": {
        "host": "fe80::1", "port": 80}}), field="spec.containers[0].startupProbe.httpGet.host", refused_at=EVERY),
    case("a preStop hook of another host", pods=raw(containers__0__lifecycle={"preStop": {"httpGet": {
        "host": "10.0.0.1", "port": 80}}}), field="spec.containers[0].lifecycle.preStop.httpGet.host",
         refused_at=EVERY),
    case("an init container's probe of another host", pods=raw(initContainers=[{
        "name": "i", "image": "busybox", "livenessProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 22}}}]),
         field="spec.initContainers[0].livenessProbe.tcpSocket.host", refused_at=EVERY),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rule", RULES, ids=case_name)
def test_each_rule_refuses_its_field_at_the_levels_that_forbid_it_and_only_there(rule, level):
    found = [p for p in problems(rule.pods, level) if p.startswith(rule.field + ":")]
    if level in rule.refused_at:
        assert found, f"{rule.field} passed at level {level}"
        every_level = rule.refused_at == EVERY
        assert all(("any pod security level (queue gpu)" if every_level else
                    f"queue gpu's pod security level {level}") in p for p in found)
    else:
        assert found == []


def test_the_message_names_the_field_its_value_the_queue_and_the_level():
    assert problems(raw(hostNetwork=True), "baseline") == [
        "spec.hostNetwork: true is not allowed by queue gpu's pod security level baseline "
        "(it shares the node's namespaces)"]
    (message,) = problems(pods(op().security_context(privileged="true")), "baseline")
    assert message.startswith('spec.containers[0].securityContext.privileged: "true" is not allowed by queue gpu')


def test_a_plain_op_passes_baseline_and_a_hardened_one_passes_restricted():
    assert problems(pods(op().gpus(1)), "baseline") == []
    hardened = op().gpus(1).security_context(**HARDENED).volume("scratch", emptyDir={}).replicas("worker", 2)
    assert problems(pods(hardened), "restricted") == []


def test_a_queue_that_allows_secret_volumes_gets_them_at_every_level():
    spec = op().volume("creds", secret={"secretName": "c"}).volume("p", projected={"sources": [{"secret": {}}]})
    for level in LEVELS:
        assert [p for p in problems(pods(spec.security_context(**HARDENED)), level, secret_volumes=True)] == []


@pytest.mark.parametrize("allowed", [
    case("a toleration of one key with Exists", builder=op().toleration(key="nvidia.com/gpu", operator="Exists")),
    case("a safe sysctl", builder=op().environment(security_context={"sysctls": [
        {"name": "net.ipv4.tcp_syncookies", "value": "1"}]})),
    case("seccomp Localhost and AppArmor runtime/default", builder=op().security_context(
        seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}).environment(
        annotations={"container.apparmor.security.beta.kubernetes.io/main": "runtime/default"})),
    case("the container SELinux type", builder=op().security_context(seLinuxOptions={"type": "container_t"})),
    case("privileged false and procMount Default", builder=op().security_context(privileged=False,
                                                                                 procMount="Default")),
    case("a listed service account without a projected token",
         builder=op().environment(service_account_name="trainer")),
    case("a listed ordinary priority class", builder=op().environment(priority_class_name="high")),
], ids=case_name)
def test_baseline_allows(allowed):
    assert check_pods(pods(allowed.builder), LISTING) == []  # a queue listing what these name


def test_a_malformed_security_context_is_refused_not_read_as_unset():
    (message,) = problems(pods(op().security_context(capabilities=["SYS_ADMIN"])), "baseline")
    assert message.startswith("spec.containers[0].securityContext.capabilities: [\"SYS_ADMIN\"]")
    assert "it must be an object" in message


def test_a_gang_reports_a_group_problem_once():
    found = problems(pods(op().replicas("worker", 3).volume("root", host_path="/")), "baseline")
    assert len(found) == 2 and all("hostPath" in p for p in found)  # the main pod's, the group's once
    assert found[1].startswith("replica 'worker': spec.volumes[0].hostPath")
    spec = op().security_context(privileged="true").replicas("worker", 3)
    assert len(problems(pods(spec), "baseline")) == 2  # the main pod's, the group's once


def test_check_pod_of_the_privileged_level_refuses_only_the_system_namespaces():
    built = pods(op().security_context(privileged=True, capabilities={"add": ["ALL"]}).volume("r", host_path="/"))
    assert check_pod(built[0], Policy("gpu", "privileged")) == []


# ---- what each queue lists (issue 28, part 5) ------------------------------------------------------

LISTING = Policy("gpu", "baseline", service_accounts=("trainer",), service_account_token=True,
                 priority_class_names=("high",), volumes=("persistentVolumeClaim", "nfs"), pull_secrets=("regcred",))
EVERYTHING_LISTED = op().environment(service_account_name="trainer", automount_service_account_token=True,
                                     priority_class_name="high", image_pull_secrets=["regcred"]).volume(
    "data", persistentVolumeClaim={"claimName": "d"}).volume("share", nfs={"server": "nas", "path": "/x"})


def test_what_the_queue_lists_is_allowed_and_only_that():
    assert check_pods(pods(EVERYTHING_LISTED), LISTING) == []
    assert sorted(p.split(":")[0] for p in problems(pods(EVERYTHING_LISTED), "baseline")) == [
        "spec.automountServiceAccountToken", "spec.imagePullSecrets[0].name", "spec.priorityClassName",
        "spec.serviceAccountName", "spec.volumes[0].persistentVolumeClaim", "spec.volumes[1].nfs"]
    other = op().environment(service_account_name="admin", automount_service_account_token=False,
                             priority_class_name="urgent", image_pull_secrets=["regcred", "prod"])
    assert check_pods(pods(other), LISTING) == [
        'spec.priorityClassName: "urgent" is not allowed by queue gpu\'s pod security level baseline '
        "(the queue's priorityClassNames [high] does not list it)",
        'spec.serviceAccountName: "admin" is not allowed by queue gpu\'s pod security level baseline '
        "(the queue's serviceAccounts [trainer] does not list it)",
        'spec.imagePullSecrets[1].name: "prod" is not allowed by queue gpu\'s pod security level baseline '
        "(the queue's imagePullSecrets [regcred] does not list it)"]


def test_the_refusals_name_the_field_its_value_and_what_the_queue_allows_unset_none():
    found = problems(pods(op().environment(service_account_name="trainer", image_pull_secrets=["regcred"])),
                     "baseline")
    assert found == [
        'spec.serviceAccountName: "trainer" is not allowed by queue gpu\'s pod security level baseline '
        "(the queue's serviceAccounts (unset: none) does not list it)",
        "spec.automountServiceAccountToken: unset is not allowed by queue gpu's pod security level baseline "
        "(unset, the service account's own setting holds, which mounts a token by default; set it false; "
        "the queue does not set allowServiceAccountToken)",
        'spec.imagePullSecrets[0].name: "regcred" is not allowed by queue gpu\'s pod security level baseline '
        "(the queue's imagePullSecrets (unset: none) does not list it)"]
    (pvc,) = problems(pods(op().volume("d", persistentVolumeClaim={"claimName": "d"})), "baseline")
    assert pvc.endswith("(the queue's allowVolumes (unset: none) does not list persistentVolumeClaim)")


def test_a_listed_service_account_still_needs_the_token_allowed_or_automount_false():
    policy = Policy("gpu", "baseline", service_accounts=("trainer",))
    assert check_pods(pods(op().environment(service_account_name="trainer", automount_service_account_token=False)),
                      policy) == []
    (token,) = check_pods(pods(op().environment(service_account_name="trainer")), policy)
    assert token.startswith("spec.automountServiceAccountToken: unset")
    (token,) = check_pods(pods(op().environment(automount_service_account_token=True)), policy)
    assert token.startswith("spec.automountServiceAccountToken: true") and "allowServiceAccountToken" in token


def test_a_system_priority_class_is_refused_even_when_listed():
    policy = Policy("gpu", "baseline", priority_class_names=("system-node-critical",))
    (found,) = check_pods(pods(op().environment(priority_class_name="system-node-critical")), policy)
    assert "system priority classes" in found
    with pytest.raises(QueuesConfigError, match=r"queues\[1\]\.priorityClassNames\[0\]: 'system-cluster-critical' "
                                                r"is a system priority class"):
        parse_queues("queues: [{name: default}, {name: gpu, priorityClassNames: [system-cluster-critical]}]")


def test_restricted_refuses_nfs_even_when_the_queue_allows_it_and_allows_a_listed_claim():
    policy = LISTING._replace(level="restricted")
    hardened = op().security_context(**HARDENED)
    assert check_pods(pods(hardened.volume("d", persistentVolumeClaim={"claimName": "d"})), policy) == []
    (nfs,) = check_pods(pods(op().security_context(**HARDENED).volume("s", nfs={"server": "n", "path": "/"})),
                        policy)
    assert nfs.startswith("spec.volumes[0].nfs:") and "restricted allows only" in nfs
    (nfs,) = problems(pods(op().security_context(**HARDENED).volume("s", nfs={"server": "n", "path": "/"})),
                      "restricted")
    assert "allowVolumes (unset: none) does not list nfs" in nfs  # once, not twice


def test_the_privileged_level_checks_no_allow_list_but_probe_hosts():
    assert problems(pods(EVERYTHING_LISTED), "privileged") == []
    found = problems(raw(containers__0__livenessProbe={"httpGet": {"host": "169.254.169.254", "port": 80}}),
                     "privileged")
    assert found == ['spec.containers[0].livenessProbe.httpGet.host: "169.254.169.254" is not allowed by any pod '
                     "security level (queue gpu) (it is link-local (the cloud metadata server is 169.254.169.254))"]


def test_a_probe_of_the_pod_itself_is_allowed():
    probe = {"httpGet": {"path": "/healthz", "port": 8080, "httpHeaders": [{"name": "Host", "value": "x"}]}}
    empty = {"tcpSocket": {"host": "", "port": 22}}
    assert problems(raw(containers__0__livenessProbe=probe, containers__0__readinessProbe=empty), "baseline") == []


def test_the_gpu_bypass_rules_hold_at_every_level_privileged_included():
    spec = op().security_context(privileged="true").build()  # gpu_accounting: what a runtime reads as true
    assert any("privileged" in p for p in violations(spec))


# ---- the queue configuration -----------------------------------------------------------------------

def test_a_queue_config_gives_each_queue_its_level_and_the_default_is_baseline():
    config = parse_queues("queues: [{name: default}, {name: gpu, podSecurity: restricted, allowSecretVolumes: true}]")
    assert policy_for(config, "gpu") == Policy("gpu", "restricted", True)
    assert policy_for(config, "default") == Policy("default", "baseline", False)
    assert policy_for(config, "unknown") == Policy("unknown", "baseline", False)


def test_a_queue_config_gives_each_queue_its_allow_lists_and_the_defaults_list_nothing():
    config = parse_queues("""
queues:
- {name: default}
- name: gpu
  serviceAccounts: [trainer]
  allowServiceAccountToken: true
  priorityClassNames: [high]
  allowVolumes: [persistentVolumeClaim, nfs]
  imagePullSecrets: [regcred]
""")
    assert policy_for(config, "gpu") == LISTING
    assert policy_for(config, "default") == Policy("default")


def test_every_allowance_goes_from_the_queue_into_the_admitted_event_and_back():
    # (connection_secrets: from the event's connections, which the dispatcher checks apart: rules.connections)
    assert set(Policy._fields) == {"queue", "level", "connection_secrets", *CARRIED}
    event = msgspec.structs.replace(admitted(op().build(), queue="gpu"), **carried(LISTING))
    assert policy_of("gpu", event) == LISTING
    assert policy_of("gpu", Queue(name="gpu", **{k: v for k, v in carried(LISTING).items()})) == LISTING


def test_an_unknown_volume_kind_to_allow_is_refused_naming_the_field():
    with pytest.raises(QueuesConfigError, match=r"hostPath.*queues\[1\]\.allowVolumes\[0\]"):
        parse_queues("queues: [{name: default}, {name: gpu, allowVolumes: [hostPath]}]")


def test_an_unknown_level_is_refused_naming_the_field():
    with pytest.raises(QueuesConfigError, match=r"lax.*queues\[1\]\.podSecurity"):
        parse_queues("queues: [{name: default}, {name: gpu, podSecurity: lax}]")


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease"])
def test_a_queue_in_a_system_namespace_is_refused_when_the_config_is_loaded(namespace):
    with pytest.raises(QueuesConfigError, match=rf"queues\[1\]\.namespace: '{namespace}' is a system namespace"):
        parse_queues(f"queues: [{{name: default}}, {{name: gpu, namespace: {namespace}, podSecurity: privileged}}]")


def test_a_namespace_gets_the_least_restrictive_level_of_the_queues_sharing_it():
    config = parse_queues("""
queues:
- {name: default}
- {name: a, namespace: ml, podSecurity: restricted}
- {name: b, namespace: ml, podSecurity: privileged}
- {name: c, namespace: secure, podSecurity: restricted}
""")
    assert namespace_levels(config, "opsched") == {"opsched": "baseline", "ml": "privileged", "secure": "restricted"}
    assert namespace_levels(parse_queues("queues: [{name: default, namespace: x}]"), "opsched") == {
        "x": "baseline", "opsched": "baseline"}


def test_the_cli_dry_run_refuses_what_the_queue_does_not_list_and_takes_what_it_does():
    from opsched import dryrun

    spec = op().queue("gpu").environment(service_account_name="trainer", image_pull_secrets=["regcred"]).build()
    config = parse_queues("queues: [{name: default}, {name: gpu}]")
    refused = dryrun.refusals([spec], [spec], ["x"], config)
    assert [p.split(":")[0] for p in refused] == [
        "spec.serviceAccountName", "spec.automountServiceAccountToken", "spec.imagePullSecrets[0].name"]
    config = parse_queues("queues: [{name: default}, {name: gpu, serviceAccounts: [trainer], "
                          "allowServiceAccountToken: true, imagePullSecrets: [regcred]}]")
    assert dryrun.refusals([spec], [spec], ["x"], config) == []
