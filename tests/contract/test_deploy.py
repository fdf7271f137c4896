"""The Kubernetes manifests keep the rules the services rely on."""
from __future__ import annotations

from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def deployment(name: str) -> dict:
    docs = [d for f in sorted(DEPLOY.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    return next(d for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"] == name)


def test_only_one_admission_decides_even_during_a_rollout():
    spec = deployment("opsched-admission")["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}


def test_only_the_dispatcher_may_talk_to_the_kubernetes_api():
    for name in ("opsched-admission", "opsched-cost", "opsched-cache"):
        assert deployment(name)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False, name
