"""deploy/base/10-crds.yaml is what ``rules.queue_resources`` generates from the queue configuration's contract:
a field added to ``proto/queues.py`` changes the CRDs people install (regenerate: python -m opsched.rules.queue_resources)."""
from __future__ import annotations

from pathlib import Path

from opsched.rules.queue_resources import CRDS_FILE, crds_yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_crds_are_generated_from_the_contract():
    assert (ROOT / CRDS_FILE).read_text() == crds_yaml(), \
        f"{CRDS_FILE} is stale: regenerate it with `python -m opsched.rules.queue_resources`"
