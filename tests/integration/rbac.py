"""What the dispatcher's ServiceAccount may do on the real API server, asked with ``kubectl auth can-i`` as
that account (the tests' kubeconfig is system:masters, which may impersonate): shared by test_rbac.py and
test_deploy.py."""
from __future__ import annotations

import re
from pathlib import Path

from opsched.localcluster import kubectl
from opsched.rules.queue_resources import GROUP, KINDS

DISPATCHER = "system:serviceaccount:opsched-system:opsched-dispatcher"
NOBODY = "system:serviceaccount:opsched-system:nobody"  # bound to nothing: what every account may do
POD_VERBS = {"create", "get", "list", "watch", "patch", "delete"}
NODE_VERBS = {"get", "list", "watch"}
SERVICE_VERBS = {"create", "delete"}  # a gang's rendezvous Service
# what the dispatcher may do in a queue namespace (nodes: cluster-wide)
CONFIG_MAP_VERBS = {"create", "delete"}  # an mpijob's hostfile
# the queue resources (cluster-scoped: listed in every namespace): read them, write their status
QUEUE_RESOURCE_GRANTS = {**{f"{k.plural}.{GROUP}": {"get", "list", "watch"} for k in KINDS},
                         **{f"{k.plural}.{GROUP}/status": {"patch"} for k in KINDS}}
CLUSTER_GRANTS = {"nodes": NODE_VERBS, **QUEUE_RESOURCE_GRANTS}  # what it may do in any namespace
QUEUE_NAMESPACE_GRANTS = {"pods": POD_VERBS, "services": SERVICE_VERBS, "configmaps": CONFIG_MAP_VERBS,
                          "pods/log": {"get"}, **CLUSTER_GRANTS}  # pods/log: `opsched logs`
ROW = re.compile(r"^(\S+)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$")


def can_i_list(kubeconfig: Path, user: str, namespace: str) -> dict[str, set[str]]:
    """``kubectl auth can-i --list``: resource -> verbs (rows of non-resource URLs left out)."""
    out = kubectl.run(kubeconfig, "auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    rules: dict[str, set[str]] = {}
    for line in out.splitlines()[1:]:
        if (row := ROW.match(line)) is not None:
            rules.setdefault(row.group(1), set()).update(row.group(4).split())
    return rules


def granted(kubeconfig: Path, namespace: str) -> dict[str, set[str]]:
    """What the dispatcher may do in ``namespace`` beyond what an account bound to nothing may."""
    everyone = can_i_list(kubeconfig, NOBODY, namespace)
    return {resource: extra for resource, verbs in can_i_list(kubeconfig, DISPATCHER, namespace).items()
            if (extra := verbs - everyone.get(resource, set()))}


def can_i(kubeconfig: Path, verb: str, resource: str, namespace: str) -> str:
    """``kubectl auth can-i VERB RESOURCE[/SUBRESOURCE]`` as the dispatcher: yes or no (exit code 1)."""
    resource, _, sub = resource.partition("/")  # kubectl reads pods/exec as the pod named exec
    args = ("auth", "can-i", verb, resource, f"--subresource={sub}", f"--as={DISPATCHER}", "-n", namespace)
    return kubectl.run(kubeconfig, *args, check=False).stdout.strip()
