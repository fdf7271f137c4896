"""The CLI checks an op against its queue's pod security before sending it (as the dispatcher would): the
queue of ``--queue`` or of the file, in ``--queues FILE`` (else the running ``opsched up``'s, else the default
level); ``--dry-run`` shows the refusal, exit 2."""
from __future__ import annotations

import json

from opsched import cli

HOST_ROOT = """
version: 1.1
kind: component
name: host-root
run:
  kind: job
  container: {image: busybox, command: [ls, /host]}
  volumes: [{name: root, hostPath: {path: /}}]
"""
QUEUES = """
queues:
- {name: default}
- {name: infra, podSecurity: privileged}
- {name: strict, podSecurity: restricted}
"""


def submit(tmp_path, capsys, *argv: str) -> tuple[int, str]:
    (tmp_path / "op.yaml").write_text(HOST_ROOT)
    try:
        code = cli.main(["--data-dir", str(tmp_path / "data"), "submit", str(tmp_path / "op.yaml"), "--dry-run",
                         *argv])
    except SystemExit as exit:  # as `python -m opsched.cli` exits
        code = exit.code  # type: ignore[assignment]
    return code, capsys.readouterr().err


def test_a_hostpath_volume_is_refused_at_the_default_level_naming_the_field_and_the_level(tmp_path, capsys):
    code, err = submit(tmp_path, capsys)
    assert code == cli.EXIT_INVALID
    assert "spec.volumes[0].hostPath" in err and "queue default's pod security level baseline" in err


def test_the_queue_of_the_queue_config_decides(tmp_path, capsys):
    (tmp_path / "queues.yaml").write_text(QUEUES)
    assert submit(tmp_path, capsys, "--queues", str(tmp_path / "queues.yaml"), "--queue", "infra")[0] == 0
    code, err = submit(tmp_path, capsys, "--queues", str(tmp_path / "queues.yaml"), "--queue", "strict")
    assert code == cli.EXIT_INVALID and "pod security level restricted" in err and "runAsNonRoot" in err


def test_the_running_opsched_ups_queue_config_is_used_without_queues(tmp_path, capsys):
    (tmp_path / "queues.yaml").write_text(QUEUES)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "up.json").write_text(json.dumps({"nats_url": "nats://127.0.0.1:1",
                                                           "queues_file": str(tmp_path / "queues.yaml")}))
    assert submit(tmp_path, capsys, "--queue", "infra")[0] == 0


def test_an_invalid_queue_config_exits_2_saying_what_is_wrong(tmp_path, capsys):
    (tmp_path / "queues.yaml").write_text("queues: [{name: default, namespace: kube-system}]")
    code, err = submit(tmp_path, capsys, "--queues", str(tmp_path / "queues.yaml"))
    assert code == cli.EXIT_INVALID and "queues[0].namespace: 'kube-system' is a system namespace" in err
