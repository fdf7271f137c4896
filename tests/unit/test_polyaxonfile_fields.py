"""No field of a polyaxonfile is silently dropped: every field of every model of the parser is honoured
(taking it out of a full file changes the op's spec, and the pod for what belongs to the pod, or makes
the file invalid), only checked (a bad value is refused), refused, or warned and recorded on the op.
A new field added to a model without a place here makes this test fail."""
from __future__ import annotations

import copy
import typing
import warnings
from datetime import datetime, timezone

import msgspec
import pytest
import yaml
from pydantic import BaseModel

from opsched.polyaxonfile import (
    SpecError,
    SpecWarning,
    parse_polyaxonfile,
    parse_polyaxonfile_batch,
)
from opsched.polyaxonfile.models_matrix import MATRIX_MODELS
from opsched.polyaxonfile.models_operation import MODELS_BY_RUN_KIND
from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import QueuesConfig
from opsched.rules import connections
from opsched.rules.podspec import build_pods
from opsched.rules.queues_file import parse_queues
from opsched.rules.templating import Globals, render_spec

K8S = {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                                   "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}}
POD_TERM = {"labelSelector": {"matchLabels": {"app": "db"},
                              "matchExpressions": [{"key": "tier", "operator": "Exists"},
                                                   {"key": "role", "operator": "In", "values": ["main"]}]},
            "namespaceSelector": {"matchLabels": {"team": "a"}}, "namespaces": ["ns"], "topologyKey": "zone"}
HANDLER_HTTP = {"httpGet": {"path": "/ok", "port": 8080, "host": "h", "scheme": "HTTPS",
                            "httpHeaders": [{"name": "X", "value": "1"}]}}
PROBE = {"initialDelaySeconds": 1, "timeoutSeconds": 2, "periodSeconds": 3, "successThreshold": 1,
         "failureThreshold": 4, "terminationGracePeriodSeconds": 5}
CONTAINER = {
    "image": "trainer:{{ tag }}", "name": "trainer", "command": ["python", "train.py"], "args": ["--lr={{ lr }}"],
    "env": [{"name": "SEED", "value": "7"}], "workingDir": "/w",
    "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "8Gi"}, "requests": {"cpu": "500m"}},
    "securityContext": {"runAsUser": 1000}, "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    "imagePullPolicy": "Always",
    "lifecycle": {"postStart": {"exec": {"command": ["hello"]}}, "preStop": HANDLER_HTTP},
    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP", "hostPort": 9090, "hostIP": "0.0.0.0"}],
    "livenessProbe": {"exec": {"command": ["check"]}, **PROBE},
    "readinessProbe": copy.deepcopy(HANDLER_HTTP), "startupProbe": {"tcpSocket": {"port": 8080, "host": "h"}},
    "terminationMessagePath": "/dev/msg", "terminationMessagePolicy": "FallbackToLogsOnError",
    "stdin": True, "stdinOnce": True, "tty": True,
}
ENVIRONMENT = {
    "nodeSelector": {"pool": "gpu"},
    "tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoExecute", "tolerationSeconds": 9}],
    "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [K8S["preference"]]},
                         "preferredDuringSchedulingIgnoredDuringExecution": [K8S]},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [POD_TERM],
                        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": POD_TERM}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [POD_TERM]},
    },
    "labels": {"team": "a"}, "annotations": {"note": "n"}, "priorityClassName": "high",
    "serviceAccountName": "trainer", "automountServiceAccountToken": True,
    "volumes": [{"name": "data", "emptyDir": {}}], "imagePullSecrets": [{"name": "regcred"}],
    "securityContext": {"runAsUser": 1, "runAsGroup": 2, "runAsNonRoot": True, "fsGroup": 3,
                        "supplementalGroups": [4], "fsGroupChangePolicy": "OnRootMismatch",
                        "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
                        "seLinuxOptions": {"user": "u", "role": "r", "type": "t", "level": "l"},
                        "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
    "dnsPolicy": "None", "dnsConfig": {"nameservers": ["10.0.0.10"], "searches": ["svc"],
                                       "options": [{"name": "ndots", "value": "2"}]},
    "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db"]}], "restartPolicy": "OnFailure",
}
INIT = [{"git": {"url": "https://git.example/ml/models.git", "revision": "v1", "flags": ["--depth 1"]},
         "path": "/plx-context/code"},
        {"connection": "repo"},
        {"file": {"content": "echo {{ lr }}", "filename": "run.sh", "chmod": "+x"}, "path": "/scripts"},
        {"container": {"image": "busybox:1.36", "name": "prepare", "command": ["sh", "-c", "true"]}, "connection": "db"}]
SIDECARS = [{"image": "fluentd:1", "name": "logs", "resources": {"limits": {"cpu": "100m"}}}]
COMMON = {"description": "c", "tags": ["x"], "queue": "gpu-a", "priority": 3, "isApproved": False, "cost": 2.5,
          "priorityClass": "high", "preemptible": False, "termination": {"maxRetries": 2, "timeout": 600, "ttl": 60},
          "cache": {"disable": False, "ttl": 3600, "io": ["lr"], "sections": ["containers"]},
          "plugins": {"notifications": [{"connections": ["ops"], "trigger": "failed"}]}}
JOB = {
    "version": 1.1, "kind": "operation", "project": "p1", "patchStrategy": "pre_merge",
    "runPatch": {"container": {"env": [{"name": "PATCHED", "value": "1"}]}},
    "params": {"lr": {"value": 0.5, "toEnv": "LR"}, "tag": {"value": "v2", "contextOnly": True}},
    "conditions": "{{ lr > 0 }}",
    "component": {"kind": "component", "name": "comp", **COMMON,
                  "inputs": [{"name": "lr", "type": "float", "toEnv": "LR2"},
                             {"name": "n", "type": "int", "value": "x", "delayValidation": True},
                             {"name": "layers", "type": "int", "isList": True, "options": [1, 2], "value": [1]},
                             {"name": "note", "type": "str", "isOptional": True}],
                  "outputs": [{"name": "model", "type": "str", "value": "m.pt"}],
                  "run": {"kind": "job", "container": CONTAINER, "environment": ENVIRONMENT,
                          "volumes": [{"name": "cache", "emptyDir": {}}], "init": INIT, "sidecars": SIDECARS,
                          "connections": ["repo"]}},
    "hooks": [{"trigger": "succeeded", "params": {"who": {"value": "{{ globals.name }} {{ globals.status }}"}},
               "conditions": "{{ lr > 0.1 }}", "queue": "notify",
               "component": {"name": "notify", "inputs": [{"name": "who", "type": "str"}],
                             "run": {"kind": "job", "container": {"image": "alpine:3.20", "args": ["{{ who }}"]}}}}],
}
PYTORCH = {"version": 1.1, "kind": "component", "name": "ddp",
           "hooks": [{"trigger": "done", "component": {"run": {"kind": "job", "container": {"image": "alpine:3.20"}}}}],
           "run": {"kind": "pytorchjob", "cleanPodPolicy": "All",
                   "master": {"replicas": 1, "container": {"image": "t:1", "resources": {"limits": {"nvidia.com/gpu": 1}}},
                              "init": [{"connection": "repo"}], "connections": ["db"]},
                   "worker": {"replicas": 3, "container": {"image": "t:1", "command": ["w"]},
                              "init": [{"file": {"content": "x"}}], "sidecars": [{"image": "fluentd:1"}],
                              "connections": ["repo"]}}}
TF = {"version": 1.1, "kind": "component", "name": "tf",
      "run": {"kind": "tfjob", "cleanPodPolicy": "All", "schedulingPolicy": {"minAvailable": 6},
              "chief": {"replicas": 1, "container": {"image": "tf:2", "resources": {"limits": {"nvidia.com/gpu": 1}}},
                        "environment": {"restartPolicy": "OnFailure"}},
              "ps": {"replicas": 2, "container": {"image": "tf:2", "command": ["ps"]}},
              "worker": {"replicas": 2, "container": {"image": "tf:2", "command": ["w"]},
                         "environment": {"restartPolicy": "OnFailure"}},
              "evaluator": {"container": {"image": "tf:2", "command": ["eval"]}}}}
MPI = {"version": 1.1, "kind": "component", "name": "mpi",
       "run": {"kind": "mpijob", "slotsPerWorker": 2, "cleanPodPolicy": "Running",
               "launcher": {"container": {"image": "mpi:1", "command": ["mpirun", "python", "t.py"]}},
               "worker": {"replicas": 2, "container": {"image": "mpi:1"}}}}
XGB = {"version": 1.1, "kind": "component", "name": "xgb",
       "run": {"kind": "xgbjob", "master": {"container": {"image": "xgb:1"}},
               "worker": {"replicas": 2, "container": {"image": "xgb:1", "command": ["w"]}}}}
PADDLE = {"version": 1.1, "kind": "component", "name": "paddle",
          "run": {"kind": "paddlejob", "master": {"replicas": 2, "container": {"image": "paddle:2"}},
                  "worker": {"replicas": 2, "container": {"image": "paddle:2", "command": ["w"]}}}}
MX = {"version": 1.1, "kind": "component", "name": "mx",
      "run": {"kind": "mxjob", "mode": "MXTrain", "scheduler": {"container": {"image": "mx:1"}},
              "server": {"replicas": 1, "container": {"image": "mx:1", "command": ["s"]}},
              "worker": {"replicas": 2, "container": {"image": "mx:1", "command": ["w"]}}}}
DISTRIBUTED = {"tfjob": TF, "mpijob": MPI, "xgbjob": XGB, "paddlejob": PADDLE, "mxjob": MX, "pytorchjob": PYTORCH}
SERVICE = {"version": 1.1, "kind": "component", "name": "nb", "termination": {"culling": {"timeout": 3600}},
           "run": {"kind": "service", "ports": [8888, 6006], "replicas": 2, "isExternal": False,
                   "environment": {"restartPolicy": "Always", "labels": {"team": "a"}},
                   "container": {"image": "jupyter:1", "readinessProbe": {"tcpSocket": {"port": 8888}}}}}
SWEEP = {"version": 1.1, "kind": "operation", "name": "s",
         "matrix": {"kind": "random", "numRuns": 3, "seed": 7, "concurrency": 2,
                    "params": {"lr": {"kind": "choice", "value": [i / 100 for i in range(1, 41)]}}},
         "component": {"inputs": [{"name": "lr", "type": "float"}],
                       "run": {"kind": "job", "container": {"image": "t", "args": ["{{ lr }}"]}}}}
GRID = {**SWEEP, "matrix": {"kind": "grid", "numRuns": 2, "params": {"lr": {"kind": "choice", "value": [0.1, 0.2, 0.3]}}}}
MAPPING = {**SWEEP, "matrix": {"kind": "mapping", "concurrency": 2, "values": [{"lr": 0.1}, {"lr": 0.2}]}}

# Fields whose only job is to check a value: a bad value is refused (path, bad value).
CHECKED = {
    ("NotificationModel", "trigger"): ("plugins.notifications", [{"connections": ["ops"], "trigger": "finished"}]),
    ("NotificationModel", "connections"): ("plugins.notifications", [{"connections": "ops"}]),
    ("IOModel", "type"): ("component.outputs.0.value", 5),
    ("IOModel", "isList"): ("component.inputs.2.value", 1),
    ("IOModel", "options"): ("component.inputs.2.value", [3]),
    ("_Common", "version"): ("version", 2),
    ("ComponentModel", "kind"): ("component.kind", "job"),
    ("KFReplicaModel", "replicas"): ("run.master.replicas", 2),
    ("SchedulingPolicyModel", "minAvailable"): ("run.schedulingPolicy.minAvailable", 3),  # the gang's pods: 4
    ("MXJobRunModel", "mode"): ("run.mode", "MXTune"),
    ("ServiceRunModel", "isExternal"): ("run.isExternal", "not a bool"),  # false: what opsched does; true: refused
    ("NodeSelectorTerm", "matchFields"): ("component.run.environment.affinity.nodeAffinity."
                                          "preferredDuringSchedulingIgnoredDuringExecution.0.preference.matchFields.0.key",
                                          "zone"),
}
# Refused when set: (where to set it, value).
REFUSED = {
    ("EnvironmentModel", "hostNetwork"): ("component.run.environment.hostNetwork", True),
    ("EnvironmentModel", "hostPID"): ("component.run.environment.hostPID", True),
    ("EnvironmentModel", "hostIPC"): ("component.run.environment.hostIPC", True),
    **{("PluginsModel", p): (f"plugins.{p}", True) for p in
       ("auth", "docker", "shm", "mountArtifactsStore", "sidecar", "autoResume")},
    ("KFReplicaModel", "environment"): ("run.master.environment", {"labels": {"a": "b"}}),
    ("KFReplicaModel", "volumes"): ("run.worker.volumes", [{"name": "v"}]),
    ("DistributedRunModel", "environment"): ("run.environment", {"labels": {"a": "b"}}),
    ("ServiceEnvironmentModel", "restartPolicy"): ("run.environment.restartPolicy", "Never"),  # Always: the default
    ("DistributedRunModel", "volumes"): ("run.volumes", [{"name": "v"}]),
    **{("DistributedRunModel", k): (f"run.{k}", v) for k, v in
       (("init", [{"connection": "repo"}]), ("sidecars", [{"image": "x"}]), ("connections", ["repo"]))},
    **{("SchedulingPolicyModel", k): (f"run.schedulingPolicy.{k}", v) for k, v in
       (("queue", "q"), ("minResources", 2), ("priorityClass", "high"), ("scheduleTimeoutSeconds", 60))},
    ("TFJobRunModel", "enableDynamicWorker"): ("run.enableDynamicWorker", True),
    ("TFJobRunModel", "successPolicy"): ("run.successPolicy", "AllWorkers"),
    **{("MXJobRunModel", k): (f"run.{k}", {"container": {"image": "mx:1"}}) for k in ("tuner", "tunerTracker",
                                                                                       "tunerServer")},
    **{("InitModel", k): ("component.run.init.0", {k: v}) for k, v in
       (("artifacts", {"dirs": ["d"]}), ("paths", ["d"]), ("dockerfile", {"image": "x"}), ("tensorboard", {}),
        ("lineageRef", "l"), ("modelRef", "m"), ("artifactRef", "a"))},
}
# Warned when set and recorded on the op: (where to set it, value).
WARNED = {
    **{("PluginsModel", p): (f"plugins.{p}", True) for p in
       ("collectArtifacts", "collectLogs", "collectResources", "syncStatuses", "externalHost")},
    ("PluginsModel", "logLevel"): ("plugins.logLevel", "DEBUG"),
    ("IOModel", "description"): ("component.inputs.0.description", "the learning rate"),
    ("HookModel", "disableDefaults"): ("hooks.0.disableDefaults", True),
    ("FileModel", "kind"): ("component.run.init.2.file.kind", "file"),
    ("ServiceRunModel", "rewritePath"): ("run.rewritePath", True),
}
SECTIONS = {("_Common", "plugins")}  # a section whose every field is refused or warned


def unchanged_by_removal(path: tuple) -> bool:
    """Fields that only check a value (CHECKED): taking them out of a valid file changes nothing."""
    checks = {"type", "isList", "options"}
    return path in {("version",), ("component", "kind"), ("run", "master", "replicas"), ("run", "mode"),
                    ("run", "schedulingPolicy"), ("run", "schedulingPolicy", "minAvailable"),
                    ("run", "chief", "replicas"), ("run", "server", "replicas"),
                    ("run", "isExternal"), ("run", "environment", "restartPolicy")} or (
        path[-1] in checks and any(p in ("inputs", "outputs") for p in path))


def fields_of(model: type[BaseModel], seen: dict | None = None) -> dict[tuple[str, str], type[BaseModel] | None]:
    """Every (model name, key as written) reachable from ``model``."""
    seen = {} if seen is None else seen
    for name, info in model.model_fields.items():
        key = (_owner(model, name), info.alias or name)
        if key in seen:
            continue
        seen[key] = None
        for nested in _models_in(info.annotation):
            fields_of(nested, seen)
    return seen


def _owner(model: type[BaseModel], field: str) -> str:
    """The class that declares a field (so a field of a base class is counted once)."""
    for cls in model.__mro__:
        if field in getattr(cls, "__annotations__", {}):
            return cls.__name__
    return model.__name__


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def used_fields(model: type[BaseModel], data, out: set) -> set:
    """The (model, key) pairs a document sets, walking it alongside the model."""
    if isinstance(data, list):
        for item in data:
            used_fields(model, item, out)
        return out
    if not isinstance(data, dict):
        return out
    by_alias = {(info.alias or name): (name, info) for name, info in model.model_fields.items()}
    for key, value in data.items():
        if key in by_alias:
            name, info = by_alias[key]
            out.add((_owner(model, name), key))
            keyed = _is_mapping_of_models(info.annotation) and isinstance(value, dict)
            for nested in _models_in(info.annotation):
                for item in (value.values() if keyed else [value]):
                    used_fields(nested, item, out)
    return out


def _is_mapping_of_models(annotation) -> bool:
    """``dict[str, SomeModel]`` (e.g. a matrix's params): the values are the models."""
    return typing.get_origin(annotation) is dict or any(_is_mapping_of_models(a) for a in typing.get_args(annotation))


ALL_MODELS = [m for models in MODELS_BY_RUN_KIND.values() for m in models] + [*MATRIX_MODELS.values()]


def documented() -> set:
    out: set = set()
    for kind, doc in DISTRIBUTED.items():
        used_fields(MODELS_BY_RUN_KIND[kind][0], doc, out)
        used_fields(MODELS_BY_RUN_KIND[kind][1], {"version": 1.1, "kind": "operation", "component": doc}, out)
    used_fields(MODELS_BY_RUN_KIND["job"][1], JOB, out)
    used_fields(MODELS_BY_RUN_KIND["service"][0], SERVICE, out)
    used_fields(MODELS_BY_RUN_KIND["service"][1], {"version": 1.1, "kind": "operation", "component": SERVICE}, out)
    for doc in (SWEEP, GRID, MAPPING):
        used_fields(MATRIX_MODELS[doc["matrix"]["kind"]], doc["matrix"], out)
    return out


def test_every_field_of_every_model_is_honoured_checked_refused_or_warned():
    every = {}
    for model in ALL_MODELS:
        fields_of(model, every)
    classified = documented() | set(CHECKED) | set(REFUSED) | set(WARNED) | SECTIONS
    missing = sorted(set(every) - classified)
    assert not missing, f"fields neither used by a full file, checked, refused nor warned: {missing}"


# ---- honoured: taking a field out of a full file changes the op (or the pod), or makes the file invalid --

CONNECTIONS: QueuesConfig = parse_queues("""
queues: [{name: q}]
defaultQueue: q
connections:
  - {name: repo, kind: git, schema: {url: "https://git.example/ml/private.git"}, secret: {name: git-creds}}
  - {name: db, kind: custom, secret: {name: db-creds, items: [DB_PASSWORD]}, env: [{name: DB_HOST, value: db}]}
""")


class Refused(Exception):
    """Admission would refuse the op (a connection its queue's configuration does not give it)."""


def admitted_fields(spec):
    fields, problems = connections.admitted_fields(spec, CONNECTIONS, "q")
    if problems:
        raise Refused(problems)
    return fields


def result(doc: dict):
    text = yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        specs = parse_polyaxonfile_batch(text, salt="s") if "matrix" in doc else [parse_polyaxonfile(text)]
    ran = [s for spec in specs for s in (spec, *(hook.spec for hook in spec.hooks))]  # a hook's op: its pods too
    rendered = [render_spec(s, Globals(uuid=f"op-{i}", name=s.name, project_name=s.project)) for i, s in enumerate(ran)]
    pods = [build_pods(OperationAdmitted(
        op_id=f"op-{i}", at=datetime(2026, 1, 1, tzinfo=timezone.utc), queue="q", namespace="ns", pod_name=f"op-op-{i}-0",
        spec=s, **admitted_fields(s))) for i, s in enumerate(rendered)]
    return [msgspec.to_builtins(s) for s in specs], pods


def key_paths(data, at=()) -> list[tuple]:
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in [at + (k,), *key_paths(v, at + (k,))]]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in key_paths(v, at + (i,))]
    return []


def without(doc: dict, path: tuple) -> dict:
    out = copy.deepcopy(doc)
    holder = out
    for part in path[:-1]:
        holder = holder[part]
    del holder[path[-1]]
    return out


POD_SECTIONS = ("container", "environment", "volumes", "master", "worker", "init", "sidecars", "connections",
                "chief", "ps", "evaluator", "launcher", "scheduler", "server", "slotsPerWorker")
CASES = [pytest.param(doc, path, id=f"{name}:{'.'.join(map(str, path))}")
         for name, doc in (("job", JOB), *DISTRIBUTED.items(), ("service", SERVICE), ("sweep", SWEEP), ("grid", GRID),
                           ("mapping", MAPPING))
         for path in key_paths(doc) if not unchanged_by_removal(path)]


@pytest.mark.parametrize("doc, path", CASES)
def test_taking_a_field_out_of_a_full_file_changes_what_runs_or_is_refused(doc, path):
    full_specs, full_pods = result(doc)
    try:
        specs, pods = result(without(doc, path))
    except (SpecError, Refused):
        return  # required: the file (or the op, to admission) is invalid without it
    if any(part in POD_SECTIONS for part in path):
        assert pods != full_pods, f"{'.'.join(map(str, path))} does not reach the pod"
    else:
        assert (specs, pods) != (full_specs, full_pods), f"{'.'.join(map(str, path))} changes nothing"


def with_value(doc: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(doc)
    holder = out
    parts = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    for part in parts[:-1]:
        holder = holder.setdefault(part, {}) if isinstance(holder, dict) else holder[part]
    holder[parts[-1]] = value
    return out


def base_for(dotted: str) -> dict:
    if dotted in ("run.isExternal", "run.environment.restartPolicy", "run.rewritePath"):
        return SERVICE
    if dotted.startswith(("run.enableDynamicWorker", "run.successPolicy")):
        return TF
    if dotted.startswith(("run.mode", "run.tuner")):
        return MX
    return PYTORCH if dotted.startswith("run.") else JOB


@pytest.mark.parametrize("key", sorted(CHECKED) + sorted(REFUSED), ids=lambda k: ".".join(k))
def test_a_checked_or_refused_field_refuses_the_file_at_its_path(key):
    dotted, value = (CHECKED | REFUSED)[key]
    with pytest.raises(SpecError) as raised:
        result(with_value(base_for(dotted), dotted, value))
    assert any(dotted.startswith(e.loc) or e.loc.startswith(dotted.rsplit(".", 1)[0]) for e in raised.value.errors), \
        raised.value.errors


@pytest.mark.parametrize("key", sorted(WARNED), ids=lambda k: ".".join(k))
def test_a_warned_field_is_warned_and_recorded_on_the_op(key):
    dotted, value = WARNED[key]
    text = yaml.dump(with_value(base_for(dotted), dotted, value), Dumper=yaml.CSafeDumper, sort_keys=False)
    with pytest.warns(SpecWarning, match="no effect in opsched"):
        spec = parse_polyaxonfile(text)
    assert dotted in spec.ignored
