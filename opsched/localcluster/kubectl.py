"""kubectl v1.20.2, built with the control plane from the same Debian source (scripts/build-control-plane.sh)
into the same cache directory, for tests and users: ``kubectl_path()``, or ``run(kubeconfig, ...)``."""
from __future__ import annotations

import subprocess
from pathlib import Path

from opsched.localcluster.controlplane import ControlPlaneError, binaries_dir, ensure_built


def kubectl_path(build: bool = True) -> Path:
    """The kubectl binary, built first (with whatever else is missing) unless ``build`` is False: then a
    missing one raises ControlPlaneError naming the build script."""
    ensure_built(build=build)
    return binaries_dir() / "kubectl"


def run(kubeconfig: Path, *args: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig K ARGS...``; with ``check``, raises ControlPlaneError with its stderr when it fails."""
    argv = [str(kubectl_path(build=False)), f"--kubeconfig={kubeconfig}", *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise ControlPlaneError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result
