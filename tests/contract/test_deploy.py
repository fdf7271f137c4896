"""The Kubernetes manifests keep the rules the services rely on."""
from __future__ import annotations

from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def deployment(name: str) -> dict:
    docs = [d for f in sorted(DEPLOY.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    return next(d for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"] == name)


def test_admission_runs_a_standby_and_rolls_without_downtime():
    """One admission decides by its lease and fenced claim (services/runtime/leadership.py), whatever runs:
    so two replicas (one a hot standby), and a rollout that starts a new pod before it stops an old one."""
    spec = deployment("opsched-admission")["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def test_only_the_dispatcher_may_talk_to_the_kubernetes_api():
    for name in ("opsched-admission", "opsched-cost", "opsched-cache"):
        assert deployment(name)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False, name
