"""Child processes (nats-server, etcd, kube-apiserver, the simulated kubelet) die with their parent,
even when the parent is killed without cleaning up (SIGKILL, a closed pipe): Linux's parent-death
signal. Elsewhere this is a no-op and cleanup relies on the parent's normal shutdown."""
from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Use as ``preexec_fn`` of ``subprocess.Popen``."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass
