"""What a polyaxonfile says of its pod reaches the pod exactly, and what would make it misbehave is refused
with a message naming the field."""
from __future__ import annotations

import textwrap

import pytest

from opsched.polyaxonfile import SpecWarning
from opsched.proto.queries import WhyAnswer
from opsched.rules.podspec import build_pods
from opsched.tables import why_text
from opsched.view import OpRow, _reason
from tests.builders import admitted, case, case_name
from tests.unit.polyaxonfile_texts import component, errors_of, parse, pytorchjob

ENV = "    resources:\n      limits: {nvidia.com/gpu: 1}\n"


def with_environment(lines: str) -> str:
    return component(**{ENV: ENV + "  environment:\n" + textwrap.indent(textwrap.dedent(lines), "    ")})


def pod_of(text: str) -> dict:
    return build_pods(admitted(parse(text), op_id="a"))[0]


def test_pod_level_fields_reach_the_pod():
    pod = pod_of(with_environment("""
        imagePullSecrets: [regcred, {name: other}]
        serviceAccountName: trainer
        securityContext: {runAsUser: 1000, runAsNonRoot: true, fsGroup: 100}
        dnsPolicy: ClusterFirst
        dnsConfig: {searches: [svc.local]}
        hostAliases: [{ip: 10.0.0.1, hostnames: [db]}]
        restartPolicy: OnFailure
    """))["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    assert pod["securityContext"] == {"runAsUser": 1000, "runAsNonRoot": True, "fsGroup": 100}
    assert (pod["dnsPolicy"], pod["dnsConfig"], pod["restartPolicy"]) == \
        ("ClusterFirst", {"searches": ["svc.local"]}, "OnFailure")
    assert pod["hostAliases"] == [{"ip": "10.0.0.1", "hostnames": ["db"]}]
    assert pod["serviceAccountName"] == "trainer" and "automountServiceAccountToken" not in pod


@pytest.mark.parametrize("c", [
    case("no service account and no choice: no token", env="labels: {a: b}", token=False),
    case("a named service account keeps its own setting", env="serviceAccountName: sa", token=None),
    case("the user's choice wins", env="serviceAccountName: sa\nautomountServiceAccountToken: true", token=True),
], ids=case_name)
def test_the_service_account_token_is_mounted_as_the_user_sets_it(c):
    assert pod_of(with_environment(c.env))["spec"].get("automountServiceAccountToken") == c.token


def test_container_fields_reach_the_container_and_a_pre_stop_hook_is_kept():
    text = component(**{ENV: ENV + textwrap.indent(textwrap.dedent("""\
        imagePullPolicy: IfNotPresent
        lifecycle: {preStop: {exec: {command: [python, checkpoint.py]}}}
        ports: [{containerPort: 6006, name: tb}]
        readinessProbe: {httpGet: {path: /ready, port: 6006}, periodSeconds: 5}
        tty: true
    """), "    ")})
    container = pod_of(text)["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["lifecycle"] == {"preStop": {"exec": {"command": ["python", "checkpoint.py"]}}}
    assert container["ports"] == [{"containerPort": 6006, "name": "tb"}]
    assert container["readinessProbe"] == {"httpGet": {"path": "/ready", "port": 6006}, "periodSeconds": 5}
    assert container["tty"] is True


@pytest.mark.parametrize("c", [
    case("restartPolicy Always never lets a job end", env="restartPolicy: Always",
         loc="run.environment.restartPolicy", msg="never lets a job end"),
    case("the node's network namespace is refused", env="hostNetwork: true",
         loc="run.environment.hostNetwork", msg="security policy"),
    case("the node's PID namespace is refused", env="hostPID: true", loc="run.environment.hostPID", msg="isolation"),
    case("an In requirement without values is refused",
         env="affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
             "{nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In}]}]}}}",
         loc="run.environment.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
             "nodeSelectorTerms.0.matchExpressions.0", msg="needs at least one value"),
    case("a Gt requirement needs one integer",
         env="affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
             "{nodeSelectorTerms: [{matchExpressions: [{key: gpus, operator: Gt, values: [a]}]}]}}}",
         loc="run.environment.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
             "nodeSelectorTerms.0.matchExpressions.0", msg="exactly one integer"),
    case("an unknown affinity key is refused", env="affinity: {nodeAfinity: {}}",
         loc="run.environment.affinity.nodeAfinity", msg="unknown field"),
], ids=case_name)
def test_what_would_misbehave_is_refused_naming_the_field(c):
    errors = errors_of(with_environment(c.env))
    assert c.loc in errors, list(errors)
    assert c.msg in errors[c.loc].msg


def test_clean_pod_policy_none_is_refused_and_all_deletes_every_finished_pod_of_the_gang():
    errors = errors_of(pytorchjob(**{"cleanPodPolicy: All": "cleanPodPolicy: None"}))
    assert "would leave the workers" in errors["run.cleanPodPolicy"].msg
    pods = build_pods(admitted(parse(pytorchjob()), op_id="d"))
    assert {p["metadata"]["annotations"]["opsched.io/ttl-seconds"] for p in pods} == {"0"}
    running = build_pods(admitted(parse(pytorchjob(**{"cleanPodPolicy: All": "cleanPodPolicy: Running"})), op_id="d"))
    assert not any("opsched.io/ttl-seconds" in p["metadata"]["annotations"] for p in running)


def test_a_description_is_put_on_the_pods():
    pod = pod_of(component(**{"name: train": "name: train\ndescription: trains the model"}))
    assert pod["metadata"]["annotations"]["opsched.io/description"] == "trains the model"


def test_warned_fields_are_recorded_and_shown_by_ops_and_why():
    text = component(**{"name: train": "name: train\nplugins: {collectLogs: true, logLevel: DEBUG}"})
    with pytest.warns(SpecWarning, match="ignoring plugins.collectLogs, plugins.logLevel"):
        spec = parse(text)
    assert spec.ignored == ["plugins.collectLogs", "plugins.logLevel"]
    assert "ignored: plugins.collectLogs" in _reason(OpRow(op_id="a", ignored=spec.ignored))
    answer = WhyAnswer(op_id="a", found=True, status="running", queue="q", ignored=spec.ignored)
    assert "ignored (no effect in opsched): plugins.collectLogs, plugins.logLevel" in why_text(answer)


def test_plugins_that_change_the_pod_are_refused_and_false_is_honoured():
    errors = errors_of(component(**{"name: train": "name: train\nplugins: {shm: true}"}))
    assert "changes the pod" in errors["plugins.shm"].msg
    assert parse(component(**{"name: train": "name: train\nplugins: {shm: false, collectLogs: false}"})).ignored == []
