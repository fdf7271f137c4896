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
# `python -m opsched.cli`, its publish waiting out "no stream" for a second rather than ``PUBLISH_PATIENCE_S`` (20 s:
# what it would wait for a stream electing a leader); the answer and the exit are the same
PATIENCE_1S = ("import runpy, sys; import opsched.bus.bus as bus; bus.PUBLISH_PATIENCE_S = 1.0; "
               "sys.argv[0] = 'opsched'; runpy.run_module('opsched.cli', run_name='__main__', alter_sys=True)")


def test_a_submit_before_any_service_created_the_streams_is_refused_with_the_reason(nats_server):
    result = subprocess.run([sys.executable, "-c", PATIENCE_1S, "submit", str(EXAMPLE), "--id", "too-early"],
                            capture_output=True, text=True, timeout=60, env={**os.environ, **nats_server.env(ADMIN)})
    assert result.returncode == EXIT_UNREACHABLE, result.stderr
    assert "not sent: no stream stores commands on this server yet" in result.stderr
    assert "too-early" not in result.stdout  # no id printed for what was not sent
