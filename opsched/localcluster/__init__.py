"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler v1.20.2) on
loopback, without Docker, plus a simulated kubelet for GPU nodes (see ``simkubelet``)."""

from opsched.localcluster.controlplane import ControlPlane, ControlPlaneError, ensure_built

__all__ = ["ControlPlane", "ControlPlaneError", "ensure_built"]
