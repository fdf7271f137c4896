"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler v1.20.2) on
loopback, without Docker, plus a simulated kubelet for GPU nodes (see ``simkubelet``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import urllib3

# The local API server's kubeconfig says insecure-skip-tls-verify (a throwaway loopback cluster):
# do not warn on every request.
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

if TYPE_CHECKING:
    from opsched.localcluster.controlplane import (
        ControlPlane,
        ControlPlaneError,
        ensure_built,
    )

__all__ = ["ControlPlane", "ControlPlaneError", "ensure_built"]


def __getattr__(name: str) -> Any:
    # Lazy, so that ``python -m opsched.localcluster.controlplane`` does not import it twice.
    if name in __all__:
        from opsched.localcluster import controlplane

        return getattr(controlplane, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
