"""deploy/'s kustomize overlays, applied server-side by kubectl v1.20.2 (built from the same Debian source as the
control plane, with its kustomize v2.0.3) to the real API server: every object is created with the fields the
services need (replicas, probes on the health port, non-root pods, a NATS user each, disruption budgets and
network policies in prod), a second apply changes nothing and meets no conflict, and the dispatcher's RBAC is
as intended, also for a queue namespace added the way docs/deploying.md says.

The dev overlay is applied as a user would: ``kubectl apply --server-side -k deploy/overlays/dev``. The prod
overlay's PodDisruptionBudgets are policy/v1, which Kubernetes 1.21+ serve (and 1.25+ serve alone); this
v1.20 API server serves them only as policy/v1beta1, whose fields are the same. So prod goes through
``kubectl kustomize``, and, only when the server lacks policy/v1, the PDBs' apiVersion (nothing else) is
rewritten before ``kubectl apply --server-side -f``.

There is no kube-controller-manager here, so no Deployment makes a pod: the objects are checked, not run.
Namespaces stay afterwards (deleting one needs the namespace controller; other tests use ``opsched``); every
other object applied is deleted at the end of the module."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
import yaml

from opsched.localcluster import kubectl
from opsched.proto import permissions
from tests.integration.rbac import CLUSTER_GRANTS, QUEUE_NAMESPACE_GRANTS, granted

# One pytest-xdist group (as tests/conftest.py makes of a module whose tests share a module fixture): the tests of
# ``applied`` reach the module's ``dev`` and ``prod`` through getfixturevalue, which that grouping cannot see, so
# they went to every worker and each applied dev and prod again on its own control plane.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("tests/integration/test_deploy.py")]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SERVICES = (*permissions.SERVICES, permissions.GATEWAY)   # a Deployment each
HEALTH = 8080
GATEWAY_PORT = 8787
Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


@dataclass
class Applied:
    kubeconfig: Path
    overlay: str
    docs: list[dict]                # what was applied
    live: dict[Key, dict]           # the objects on the server after the first apply
    again: subprocess.CompletedProcess[str]   # the second apply
    live_again: dict[Key, dict]     # ... and after it

    def deployment(self, service: str) -> dict:
        return self.live["Deployment", "opsched-system", f"opsched-{service}"]

    def of_kind(self, kind: str) -> list[dict]:
        return [obj for (k, _, _), obj in self.live.items() if k == kind]

    def config(self) -> dict[str, str]:
        """The data of the opsched-config ConfigMap the services' envFrom names."""
        name = self.deployment("admission")["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"]
        return self.live["ConfigMap", "opsched-system", name]["data"]


def key(obj: dict) -> Key:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def render(kubeconfig: Path, overlay: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(kubectl.run(kubeconfig, "kustomize", str(overlay)).stdout) if d]


def for_this_server(kubeconfig: Path, docs: list[dict]) -> list[dict]:
    """``docs`` with policy/v1 PodDisruptionBudgets as policy/v1beta1 when the server does not serve policy/v1
    (Kubernetes 1.20 and older): the same fields, the only version it has."""
    if "policy/v1" in kubectl.run(kubeconfig, "api-versions").stdout.split():
        return docs
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert all(d["apiVersion"] == "policy/v1" for d in pdbs), "deploy/ ships policy/v1 PodDisruptionBudgets"
    return [{**d, "apiVersion": "policy/v1beta1"} if d in pdbs else d for d in docs]


def live_objects(kubeconfig: Path, files: Path) -> dict[Key, dict]:
    """``kubectl get`` of every object in ``files`` (``-f FILE`` or ``-k DIR``, in ``files.name``)."""
    flag = "-k" if files.is_dir() else "-f"
    got = json.loads(kubectl.run(kubeconfig, "get", flag, str(files), "-o", "json").stdout)
    return {key(obj): obj for obj in (got["items"] if got["kind"] == "List" else [got])}


def applied_twice(kubeconfig: Path, overlay: str, workdir: Path) -> Applied:
    """The dev overlay with ``apply -k``; prod through ``kubectl kustomize`` (see the module's docstring)."""
    if overlay == "dev":
        target = DEPLOY / "overlays" / "dev"
        docs = render(kubeconfig, target)
    else:
        docs = for_this_server(kubeconfig, render(kubeconfig, DEPLOY / "overlays" / overlay))
        target = workdir / f"{overlay}.yaml"
        target.write_text(yaml.safe_dump_all(docs))
    flag = "-k" if target.is_dir() else "-f"
    kubectl.run(kubeconfig, "apply", "--server-side", flag, str(target))
    live = live_objects(kubeconfig, target)
    again = kubectl.run(kubeconfig, "apply", "--server-side", flag, str(target), check=False)
    return Applied(kubeconfig, overlay, docs, live, again, live_objects(kubeconfig, target))


@pytest.fixture(scope="module")
def cluster(control_plane, tmp_path_factory):
    """The admin kubeconfig and a list to put every document applied in; at the end, each of them but the
    Namespaces is deleted."""
    applied_docs: list[dict] = []
    yield control_plane.kubeconfig, applied_docs
    leftovers = tmp_path_factory.mktemp("deploy") / "leftovers.yaml"
    leftovers.write_text(yaml.safe_dump_all([d for d in applied_docs if d["kind"] != "Namespace"]))
    kubectl.run(control_plane.kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", str(leftovers))


@pytest.fixture(scope="module")
def dev(cluster, tmp_path_factory) -> Applied:
    kubeconfig, applied_docs = cluster
    result = applied_twice(kubeconfig, "dev", tmp_path_factory.mktemp("dev"))
    applied_docs.extend(result.docs)
    return result


@pytest.fixture(scope="module")
def prod(cluster, dev, tmp_path_factory) -> Applied:
    """Prod applied over dev (as a cluster moves from one to the other: the same field manager)."""
    kubeconfig, applied_docs = cluster
    result = applied_twice(kubeconfig, "prod", tmp_path_factory.mktemp("prod"))
    applied_docs.extend(result.docs)
    return result


@pytest.fixture(params=["dev", "prod"])
def applied(request) -> Applied:
    return request.getfixturevalue(request.param)


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def without_bookkeeping(obj: dict) -> dict:
    """The object without what every write changes (resourceVersion; managedFields, whose timestamps a
    no-op apply of a StatefulSet's volumeClaimTemplates rewrites once on 1.20)."""
    metadata = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**obj, "metadata": metadata}


# ---- every overlay --------------------------------------------------------------------------------------------

def test_every_object_is_created_and_a_second_apply_changes_nothing(applied):
    assert {key(d) for d in applied.docs} == set(applied.live)
    assert applied.again.returncode == 0, applied.again.stderr   # no conflict with its own field manager
    assert {k: without_bookkeeping(o) for k, o in applied.live_again.items()} == \
        {k: without_bookkeeping(o) for k, o in applied.live.items()}


def test_every_pod_runs_as_a_non_root_user_with_a_read_only_root_and_no_privileges(applied):
    workloads = applied.of_kind("Deployment") + applied.of_kind("StatefulSet")
    assert len(applied.of_kind("Deployment")) == len(SERVICES) + 1   # and the web view's
    for workload in workloads:
        spec = pod_spec(workload)
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0, workload["metadata"]["name"]
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in spec["containers"]:
            assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                    "capabilities": {"drop": ["ALL"]}}, container["name"]


def test_probes_and_the_metrics_scrape_use_the_health_port_each_service_is_told(applied):
    for service in SERVICES:
        template = applied.deployment(service)["spec"]["template"]
        (container,) = template["spec"]["containers"]
        env = env_of(container)
        assert container["command"] == ["python", "-m", f"opsched.services.{service}"]
        assert int(env["OPSCHED_HEALTH_PORT"]) == HEALTH and env["OPSCHED_HEALTH_HOST"] == "0.0.0.0"
        assert container["ports"][0] == {"containerPort": HEALTH, "name": "health", "protocol": "TCP"}
        assert len(container["ports"]) == (2 if service == "gateway" else 1)
        probes = {name: (container[name]["httpGet"]["path"], container[name]["httpGet"]["port"])
                  for name in ("startupProbe", "livenessProbe", "readinessProbe")}
        assert probes == {"startupProbe": ("/healthz", "health"), "livenessProbe": ("/healthz", "health"),
                          "readinessProbe": ("/readyz", "health")}, service
        assert template["metadata"]["annotations"] == {
            "prometheus.io/scrape": "true", "prometheus.io/port": str(HEALTH), "prometheus.io/path": "/metrics"}


def mounted_secret(spec: dict, container: dict, path: str) -> tuple[str, list[str]]:
    """The Secret and its keys mounted where ``path`` lies."""
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    relative = path.removeprefix(mount["mountPath"] + "/")
    keys = [item["key"] for item in volume["secret"]["items"] if item["path"] == relative]
    return volume["secret"]["secretName"], keys


def test_each_service_connects_to_nats_over_tls_as_its_own_user(applied):
    assert applied.config()["NATS_URL"].startswith("tls://")
    for service in SERVICES:
        spec = pod_spec(applied.deployment(service))
        (container,) = spec["containers"]
        env = env_of(container)
        assert env["OPSCHED_NATS_USER"] == service
        assert mounted_secret(spec, container, env["OPSCHED_NATS_PASSWORD_FILE"]) == \
            ("opsched-nats-auth", [f"{service}.password"])
        assert mounted_secret(spec, container, env["OPSCHED_NATS_CA"]) == ("opsched-nats-ca", ["ca.pem"])
        if service in ("admission", "dispatcher"):  # they seal and open env values; the others never see the key
            assert mounted_secret(spec, container, env["OPSCHED_ENV_KEY_FILE"]) == ("opsched-env-key", ["env.key"])
        else:
            assert "OPSCHED_ENV_KEY_FILE" not in env
            assert "opsched-env-key" not in {v.get("secret", {}).get("secretName") for v in spec["volumes"]}


def test_only_the_dispatcher_gets_a_service_account_token(applied):
    for service in SERVICES:
        spec = pod_spec(applied.deployment(service))
        if service == "dispatcher":
            assert spec["serviceAccountName"] == "opsched-dispatcher" and "automountServiceAccountToken" not in spec
        else:
            assert spec["automountServiceAccountToken"] is False, service


def test_the_dispatchers_rbac_is_pods_in_its_queue_namespaces_and_nodes(applied):
    kubeconfig = applied.kubeconfig
    queue_namespaces = applied.config()["OPSCHED_POD_NAMESPACES"].split(",")
    assert queue_namespaces == ["opsched"]
    for namespace in queue_namespaces:
        assert granted(kubeconfig, namespace) == QUEUE_NAMESPACE_GRANTS, namespace
    for namespace in ("opsched-system", "default", "kube-system"):
        assert granted(kubeconfig, namespace) == CLUSTER_GRANTS, namespace


def test_the_gateway_serves_https_behind_its_service_with_its_tokens_and_certificate_from_secrets(applied):
    from opsched.services.gateway.service import roles_of
    from opsched.services.runtime.settings import Settings

    spec = pod_spec(applied.deployment("gateway"))
    (container,) = spec["containers"]
    env = env_of(container)
    with mock.patch.dict(os.environ, env, clear=True):
        settings = Settings()   # read as the service reads its environment
    assert (settings.gateway_host, settings.gateway_port) == ("0.0.0.0", GATEWAY_PORT)
    assert roles_of(settings.gateway_users) == {"admin": "admin"}
    assert mounted_secret(spec, container, str(settings.gateway_tokens_file)) == \
        ("opsched-gateway-tokens", ["gateway-tokens.json"])
    assert mounted_secret(spec, container, str(settings.gateway_tls_cert)) == ("opsched-gateway-tls", ["tls.crt"])
    assert mounted_secret(spec, container, str(settings.gateway_tls_key)) == ("opsched-gateway-tls", ["tls.key"])
    assert not any("subPath" in m for m in container["volumeMounts"])  # a subPath mount never sees a Secret's update
    service = applied.live["Service", "opsched-system", "opsched-gateway"]["spec"]
    assert service["selector"] == applied.deployment("gateway")["spec"]["selector"]["matchLabels"]
    (port,) = service["ports"]
    assert (port["port"], port["targetPort"]) == (443, "https")
    assert {"containerPort": GATEWAY_PORT, "name": "https", "protocol": "TCP"} in container["ports"]


def test_the_notifier_reads_its_connections_and_their_secrets_from_its_own_secret(applied):
    spec = pod_spec(applied.deployment("notifier"))
    (container,) = spec["containers"]
    path = env_of(container)["OPSCHED_CONNECTIONS_FILE"]
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    # the whole Secret: connections.yaml and the signing secrets its entries name (secretFile) beside it
    assert volume["secret"]["secretName"] == "opsched-notifier-connections" and "items" not in volume["secret"]
    assert path.removeprefix(mount["mountPath"] + "/") == "connections.yaml"
    for service in SERVICES:
        if service != "notifier":
            volumes = pod_spec(applied.deployment(service))["volumes"]
            assert "opsched-notifier-connections" not in {v.get("secret", {}).get("secretName") for v in volumes}


def test_the_web_view_reads_the_bus_as_a_viewer_behind_a_cluster_ip_service(applied):
    from opsched.proto import permissions

    spec = pod_spec(applied.live["Deployment", "opsched-system", "opsched-ui"])
    (container,) = spec["containers"]
    env = env_of(container)
    assert container["command"] == ["python", "-m", "opsched.cli", "ui", "--host", "0.0.0.0", "--port", "8089"]
    assert env["OPSCHED_NATS_USER"] == "ui" and permissions.VERBS["viewer"] == ()   # it may send no command
    assert mounted_secret(spec, container, env["OPSCHED_NATS_PASSWORD_FILE"]) == ("opsched-nats-auth", ["ui.password"])
    assert mounted_secret(spec, container, env["OPSCHED_NATS_CA"]) == ("opsched-nats-ca", ["ca.pem"])
    assert spec["automountServiceAccountToken"] is False
    assert {container[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")} == {"/healthz"}
    service = applied.live["Service", "opsched-system", "opsched-ui"]["spec"]
    assert service["type"] == "ClusterIP" and service["selector"] == {"app": "opsched-ui"}
    (port,) = service["ports"]
    assert (port["port"], port["targetPort"]) == (80, "http")
    assert container["ports"] == [{"containerPort": 8089, "name": "http", "protocol": "TCP"}]


# ---- replicas, disruption budgets, resources, network policies ------------------------------------------------


def test_dev_runs_one_replica_of_each_service_beside_a_single_node_nats_they_can_reach(dev):
    assert {service: dev.deployment(service)["spec"]["replicas"] for service in SERVICES} == dict.fromkeys(SERVICES, 1)
    assert not {d["kind"] for d in dev.docs} & {"PodDisruptionBudget", "NetworkPolicy"}
    nats = dev.live["StatefulSet", "opsched-system", "nats"]
    assert nats["spec"]["replicas"] == 1
    assert dev.config()["NATS_URL"] == "tls://nats.opsched-system:4222"
    service = dev.live["Service", "opsched-system", "nats"]
    assert service["spec"]["selector"] == nats["spec"]["selector"]["matchLabels"]
    assert [p["port"] for p in service["spec"]["ports"]] == [4222]
    conf = dev.live["ConfigMap", "opsched-system", "nats-config"]["data"]["nats.conf"]
    assert 'include "auth/auth.conf"' in conf and "jetstream" in conf and "tls {" in conf
    mounts = {m["mountPath"]: m["name"] for m in pod_spec(nats)["containers"][0]["volumeMounts"]}
    secrets_of = {v["name"]: v["secret"]["secretName"] for v in pod_spec(nats)["volumes"] if "secret" in v}
    assert {path: secrets_of[mounts[path]] for path in ("/etc/nats/tls", "/etc/nats/auth")} == \
        {"/etc/nats/tls": "nats-tls", "/etc/nats/auth": "nats-auth"}


def test_prod_runs_two_of_each_spread_over_nodes_and_rolls_a_new_pod_in_before_an_old_one_goes(prod):
    for service in SERVICES:
        spec = prod.deployment(service)["spec"]
        assert spec["replicas"] == 2, service  # admission: a leader and a hot standby
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        (spread,) = spec["template"]["spec"]["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname"
        assert spread["labelSelector"] == spec["selector"]
    assert prod.config()["OPSCHED_STREAM_REPLICAS"] == "3"
    assert not prod.of_kind("StatefulSet"), "prod runs on your NATS cluster, not the single-node one"


def test_prod_keeps_one_of_each_service_through_a_drain(prod):
    budgets = {pdb["metadata"]["name"]: pdb["spec"] for pdb in prod.of_kind("PodDisruptionBudget")}
    assert set(budgets) == {f"opsched-{service}" for service in SERVICES}
    for service in SERVICES:
        deployment = prod.deployment(service)["spec"]
        assert budgets[f"opsched-{service}"]["selector"] == deployment["selector"]
        assert 1 <= budgets[f"opsched-{service}"]["minAvailable"] < deployment["replicas"]


def test_prod_requests_cpu_and_memory_and_limits_memory_but_never_cpu(prod):
    for service in SERVICES:
        (container,) = pod_spec(prod.deployment(service))["containers"]
        resources = container["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"} and set(resources["limits"]) == {"memory"}, service
    admission = pod_spec(prod.deployment("admission"))["containers"][0]["resources"]
    assert admission["limits"]["memory"] == "4Gi"  # docs/retention.md: 250,000 unpurged ops hold 2.6 GiB more


def selects(policy: dict, labels: dict[str, str]) -> bool:
    wanted = policy["spec"]["podSelector"].get("matchLabels", {})
    return all(labels.get(k) == v for k, v in wanted.items())


def allowed(prod: Applied, service: str, direction: str) -> dict[tuple[str, int], list[dict]]:
    """(protocol, port) -> the peers allowed, for ``direction`` (``Ingress``/``Egress``) of a service's pods,
    from every network policy that selects them (no peers: anywhere)."""
    labels = prod.deployment(service)["spec"]["template"]["metadata"]["labels"]
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    out: dict[tuple[str, int], list[dict]] = {}
    for policy in prod.of_kind("NetworkPolicy"):
        if selects(policy, labels) and direction in policy["spec"]["policyTypes"]:
            for rule in policy["spec"].get(rules_key, []):
                for port in rule["ports"]:
                    out.setdefault((port["protocol"], port["port"]), []).extend(rule.get(peers_key, []))
    return out


def test_prod_lets_nothing_in_to_the_web_view_and_it_reaches_only_dns_and_nats(prod):
    """A port-forward enters the pod's own network namespace: no policy stands in its way."""
    labels = prod.live["Deployment", "opsched-system", "opsched-ui"]["spec"]["template"]["metadata"]["labels"]
    policies = [p for p in prod.of_kind("NetworkPolicy") if selects(p, labels)]
    ingress = [rule for p in policies if "Ingress" in p["spec"]["policyTypes"] for rule in p["spec"].get("ingress", [])]
    assert [r["ports"] for r in ingress] == [[{"protocol": "TCP", "port": HEALTH}]]   # the scrape's port: it serves none
    ports = {(port["protocol"], port["port"]) for p in policies if "Egress" in p["spec"]["policyTypes"]
             for rule in p["spec"].get("egress", []) for port in rule["ports"]}
    assert ports == {("UDP", 53), ("TCP", 53), ("TCP", 4222)}
    assert prod.live["Deployment", "opsched-system", "opsched-ui"]["spec"]["replicas"] == 1


def test_prod_denies_all_traffic_but_dns_nats_the_api_server_for_the_dispatcher_and_the_scrape(prod):
    deny = prod.live["NetworkPolicy", "opsched-system", "default-deny"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    nats_peers = [{"podSelector": {"matchLabels": {"app": "nats"}}},
                  {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "nats"}},
                   "podSelector": {"matchLabels": {"app.kubernetes.io/name": "nats"}}}]
    scrapers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    for service in SERVICES:
        egress = {("UDP", 53): [], ("TCP", 53): [], ("TCP", 4222): nats_peers}
        if service == "dispatcher":
            egress |= {("TCP", 443): [], ("TCP", 6443): []}  # the API server, wherever it is
        if service == "notifier":
            egress |= {("TCP", 443): []}  # its sinks, wherever they are
        ingress = {("TCP", HEALTH): scrapers}
        if service == "gateway":
            ingress |= {("TCP", GATEWAY_PORT): []}  # its clients, from anywhere
        assert allowed(prod, service, "Egress") == egress, service
        assert allowed(prod, service, "Ingress") == ingress, service


def test_a_queue_namespace_added_as_deploy_readme_says_gets_the_dispatchers_pod_verbs(dev, cluster, tmp_path):
    """An overlay on dev: a copy of 22-queue-namespace-opsched.yaml with the marked namespace replaced, and
    OPSCHED_POD_NAMESPACES merged into opsched-config (docs/deploying.md, "More queue namespaces")."""
    kubeconfig, applied_docs = cluster
    team = f"team-{secrets.token_hex(3)}"
    template = (DEPLOY / "base" / "22-queue-namespace-opsched.yaml").read_text()
    (tmp_path / f"22-queue-namespace-{team}.yaml").write_text(template.replace("opsched  # QUEUE NAMESPACE", team))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "bases": [os.path.relpath(DEPLOY / "overlays" / "dev", tmp_path)],
        "resources": [f"22-queue-namespace-{team}.yaml"],
        "configMapGenerator": [{"name": "opsched-config", "namespace": "opsched-system", "behavior": "merge",
                                "literals": [f"OPSCHED_POD_NAMESPACES=opsched,{team}"]}]}))
    applied_docs.extend(render(kubeconfig, tmp_path))
    kubectl.run(kubeconfig, "apply", "--server-side", "-k", str(tmp_path))

    live = live_objects(kubeconfig, tmp_path)
    config = next(o for o in live.values() if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("opsched-config"))
    dispatcher = live["Deployment", "opsched-system", "opsched-dispatcher"]
    assert pod_spec(dispatcher)["containers"][0]["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
    assert config["data"]["OPSCHED_POD_NAMESPACES"] == f"opsched,{team}"
    assert live["Namespace", "", team]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    for namespace in ("opsched", team):
        assert granted(kubeconfig, namespace) == QUEUE_NAMESPACE_GRANTS, namespace


def test_prod_with_nats_credentials_files_gives_each_service_its_own_and_no_password(prod, cluster, tmp_path):
    """overlays/prod/nats-creds.yaml listed under patchesStrategicMerge (docs/deploying.md, "An existing NATS"):
    rendered, and accepted by the API server (a server-side dry run)."""
    kubeconfig, _ = cluster
    shutil.copy(DEPLOY / "overlays" / "prod" / "nats-creds.yaml", tmp_path)  # kustomize reads patches below it
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "bases": [os.path.relpath(DEPLOY / "overlays" / "prod", tmp_path)],
        "patchesStrategicMerge": ["nats-creds.yaml"]}))
    docs = for_this_server(kubeconfig, render(kubeconfig, tmp_path))
    (tmp_path / "rendered.yaml").write_text(yaml.safe_dump_all(docs))
    kubectl.run(kubeconfig, "apply", "--server-side", "--dry-run=server", "-f", str(tmp_path / "rendered.yaml"))
    for service in SERVICES:
        deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"opsched-{service}")
        spec = pod_spec(deployment)
        (container,) = spec["containers"]
        env = env_of(container)
        assert "OPSCHED_NATS_PASSWORD_FILE" not in env and env["OPSCHED_NATS_USER"] == service
        assert mounted_secret(spec, container, env["OPSCHED_NATS_CREDS"]) == ("opsched-nats-auth", [f"{service}.creds"])
