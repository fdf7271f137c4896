"""The Kubernetes manifests keep the rules the services rely on: read statically from deploy/base (the files its
kustomization.yaml lists, and its opsched-config literals) and deploy/overlays/prod's patches. The overlays as
kubectl renders and applies them: tests/integration/test_deploy.py."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from opsched.proto import permissions
from opsched.rules.queue_resources import GROUP, KINDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE = DEPLOY / "base"


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kustomization(directory: Path) -> dict:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def manifests() -> list[dict]:
    """deploy/base's objects: the files its kustomization lists."""
    return [d for f in kustomization(BASE)["resources"] for d in documents(BASE / f)]


def config() -> dict[str, str]:
    """The opsched-config literals of deploy/base (every service's envFrom)."""
    (generator,) = kustomization(BASE)["configMapGenerator"]
    return dict(literal.split("=", 1) for literal in generator["literals"])


def deployment(name: str) -> dict:
    return next(d for d in manifests() if d.get("kind") == "Deployment" and d["metadata"]["name"] == name)


def prod_patch(name: str) -> dict:
    """overlays/prod's replicas.yaml patch of Deployment ``name``."""
    return next(d for d in documents(DEPLOY / "overlays" / "prod" / "replicas.yaml") if d["metadata"]["name"] == name)


def test_admission_runs_a_standby_and_rolls_without_downtime():
    """One admission decides by its lease and fenced claim (services/runtime/leadership.py), whatever runs:
    so two replicas in prod (one a hot standby), and a rollout that starts a new pod before it stops an old one."""
    assert prod_patch("opsched-admission")["spec"]["replicas"] >= 2
    spec = deployment("opsched-admission")["spec"]
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def test_only_the_dispatcher_may_talk_to_the_kubernetes_api():
    for name in (f"opsched-{s}" for s in (*permissions.SERVICES, permissions.GATEWAY) if s != "dispatcher"):
        assert deployment(name)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False, name


# ---- the dispatcher's RBAC: least privilege (issue 15) ------------------------------------------------------
DISPATCHER_SA = {"kind": "ServiceAccount", "name": "opsched-dispatcher", "namespace": "opsched-system"}
DISPATCHER_SRC = Path(__file__).resolve().parents[2] / "services" / "dispatcher"
# the CoreV1Api calls the dispatcher may make, as (resource, verbs) for RBAC (a list is also watched)
CALLS = {"create_namespaced_pod": ("pods", {"create"}), "read_namespaced_pod": ("pods", {"get"}),
         "list_namespaced_pod": ("pods", {"list", "watch"}), "patch_namespaced_pod": ("pods", {"patch"}),
         "delete_namespaced_pod": ("pods", {"delete"}), "list_node": ("nodes", {"list", "watch"}),
         "create_namespaced_service": ("services", {"create"}), "delete_namespaced_service": ("services", {"delete"}),
         "create_namespaced_config_map": ("configmaps", {"create"}),
         "delete_namespaced_config_map": ("configmaps", {"delete"}),
         "read_namespaced_pod_log": ("pods/log", {"get"}),
         "list_pod_for_all_namespaces": (None, set())}  # only when it has no queue namespaces: a cluster admin
CUSTOM_CALLS = {"list_cluster_custom_object": ({"list", "watch"}, ""),  # of each kind of queue resource
                "patch_cluster_custom_object_status": ({"patch"}, "/status")}


def dispatcher_roles(kind: str) -> list[dict]:
    """The Roles (or ClusterRoles) bound to the dispatcher's ServiceAccount, by a RoleBinding or a
    ClusterRoleBinding in the same namespace (a RoleBinding's Role is in its own namespace)."""
    docs = manifests()
    binding_kind = "RoleBinding" if kind == "Role" else "ClusterRoleBinding"
    refs = {(b["metadata"].get("namespace"), b["roleRef"]["name"]) for b in docs
            if b["kind"] == binding_kind and b["roleRef"]["kind"] == kind
            and any({k: s.get(k) for k in DISPATCHER_SA} == DISPATCHER_SA for s in b["subjects"])}
    return [d for d in docs if d["kind"] == kind and (d["metadata"].get("namespace"), d["metadata"]["name"]) in refs]


def grants(role: dict) -> dict[str, set[str]]:
    """resource -> verbs; a resource of another group than the core one as ``<resource>.<group>[/<sub>]``."""
    out: dict[str, set[str]] = {}
    for rule in role["rules"]:
        (group,) = rule["apiGroups"]
        assert group in ("", GROUP) and "resourceNames" not in rule, rule
        for resource in rule["resources"]:
            name, _, sub = resource.partition("/")
            key = f"{name}.{group}" + (f"/{sub}" if sub else "") if group else resource
            out.setdefault(key, set()).update(rule["verbs"])
    return out


QUEUE_RESOURCES = {**{f"{k.plural}.{GROUP}": {"get", "list", "watch"} for k in KINDS},
                   **{f"{k.plural}.{GROUP}/status": {"patch"} for k in KINDS}}


def test_the_dispatcher_reads_nodes_and_the_queue_resources_cluster_wide_and_nothing_else():
    cluster_roles = dispatcher_roles("ClusterRole")
    assert [grants(r) for r in cluster_roles] == [{"nodes": {"get", "list", "watch"}}, QUEUE_RESOURCES]
    assert not [b for b in manifests() if b["kind"] == "RoleBinding" and b["roleRef"]["kind"] == "ClusterRole"
                and DISPATCHER_SA in b["subjects"]], "no ClusterRole may be bound per namespace either"


def test_the_dispatcher_uses_pods_only_in_the_queue_namespaces_it_is_told_of():
    """A Role per queue namespace, with exactly the pod verbs (and a gang's rendezvous Services and hostfile ConfigMaps); the same namespaces as its OPSCHED_POD_NAMESPACES
    (else it would watch a namespace it may not, or never watch one it may)."""
    roles = dispatcher_roles("Role")
    assert roles and all(grants(r) == {"pods": {"create", "get", "list", "watch", "patch", "delete"},
                                       "services": {"create", "delete"}, "configmaps": {"create", "delete"},
                                       "pods/log": {"get"}}
                         for r in roles)
    (container,) = deployment("opsched-dispatcher")["spec"]["template"]["spec"]["containers"]
    assert container["envFrom"] == [{"configMapRef": {"name": "opsched-config"}}]
    assert "OPSCHED_POD_NAMESPACES" not in {e["name"] for e in container["env"]}
    told = [ns.strip() for ns in config()["OPSCHED_POD_NAMESPACES"].split(",") if ns.strip()]
    assert sorted(told) == sorted(r["metadata"]["namespace"] for r in roles)
    declared = {d["metadata"]["name"] for d in manifests() if d["kind"] == "Namespace"}
    assert set(told) <= declared, "an admin declares every queue namespace: the dispatcher creates none"
    assert "kube-system" not in told


def test_the_dispatchers_rbac_grants_exactly_the_kubernetes_calls_its_code_makes():
    """Every CoreV1Api call in services/dispatcher/ maps to a verb granted; every verb granted is used."""
    called = {m for f in DISPATCHER_SRC.glob("*.py") for m in re.findall(r"\bcore\.(\w+)", f.read_text())}
    custom = {m for f in DISPATCHER_SRC.glob("*.py") for m in re.findall(r"\bapi\.(\w+_custom_object\w*)", f.read_text())}
    assert custom == set(CUSTOM_CALLS), f"the dispatcher's calls of the queue resources: {sorted(custom)}"
    assert called <= set(CALLS), f"the dispatcher calls {sorted(called - set(CALLS))}: grant it, or do not"
    needed: dict[str, set[str]] = {}
    for resource, verbs in (CALLS[m] for m in called):
        if resource is not None:
            needed.setdefault(resource, set()).update(verbs)
    granted: dict[str, set[str]] = {}
    for role in dispatcher_roles("Role") + dispatcher_roles("ClusterRole"):
        for resource, verbs in grants(role).items():
            granted.setdefault(resource, set()).update(verbs)
    for verbs, sub in CUSTOM_CALLS.values():  # every kind of queue resource
        for kind in KINDS:
            needed.setdefault(f"{kind.plural}.{GROUP}{sub}", set()).update(verbs)
    granted["nodes"] -= {"get"}  # reading one node: granted with list and watch, unused today
    for kind in KINDS:
        granted[f"{kind.plural}.{GROUP}"] -= {"get"}  # reading one: granted with list and watch (kubectl-like)
    assert needed == granted


def test_the_dispatcher_runs_as_its_service_account():
    spec = deployment("opsched-dispatcher")["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == DISPATCHER_SA["name"]


def test_each_deployment_runs_a_service_module_that_exists():
    for service in (*permissions.SERVICES, permissions.GATEWAY):
        (container,) = deployment(f"opsched-{service}")["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["python", "-m", f"opsched.services.{service}"]
        assert (DEPLOY.parent / "services" / service / "__main__.py").is_file()


def settings_variables() -> set[str]:
    """The environment variables Settings reads (``OPSCHED_<FIELD>`` and the upper-case aliases)."""
    from pydantic import AliasChoices

    from opsched.services.runtime.settings import Settings

    names = {f"OPSCHED_{name.upper()}" for name in Settings.model_fields}
    for field in Settings.model_fields.values():
        if isinstance(field.validation_alias, AliasChoices):
            names |= {c for c in field.validation_alias.choices if isinstance(c, str) and c.isupper()}
    return names


def test_every_variable_the_manifests_set_is_a_setting_the_services_read():
    """Settings ignores variables it does not know, so a misspelt one in deploy/ would be silently lost."""
    overlays = DEPLOY / "overlays"
    literals = [literal for directory in (BASE, overlays / "prod") for generator in
                kustomization(directory).get("configMapGenerator", []) for literal in generator["literals"]]
    patched = [d for f in ("replicas.yaml", "resources.yaml", "nats-creds.yaml") for d in documents(overlays / "prod" / f)]
    containers = [c for d in manifests() + patched if d["kind"] == "Deployment"
                  for c in d["spec"]["template"]["spec"].get("containers", [])]
    names = {literal.split("=", 1)[0] for literal in literals} | {e["name"] for c in containers for e in c.get("env", [])}
    assert names and not names - settings_variables(), sorted(names - settings_variables())
