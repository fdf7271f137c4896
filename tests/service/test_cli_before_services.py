"""The CLI against a server where no service has started yet: a client cannot create the streams (it is in the
clients' account), so a submit is not stored, and the CLI says so and exits non-zero, never "done"."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from opsched.connection import EXIT_UNREACHABLE
from tests.builders.identities import ADMIN

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train-1gpu.yaml"


def test_a_submit_before_any_service_created_the_streams_is_refused_with_the_reason(nats_server):
    result = subprocess.run([sys.executable, "-m", "opsched.cli", "submit", str(EXAMPLE), "--id", "too-early"],
                            capture_output=True, text=True, timeout=60, env={**os.environ, **nats_server.env(ADMIN)})
    assert result.returncode == EXIT_UNREACHABLE, result.stderr
    assert "not sent: no stream stores commands on this server yet" in result.stderr
    assert "too-early" not in result.stdout  # no id printed for what was not sent
