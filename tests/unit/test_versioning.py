"""`opsched --version` and `opsched version`: the client's version, its Python, the wire contract's digest (which
changes with any checked-in schema), and the server's version when admission tells it."""
from __future__ import annotations

import platform

import pytest

from opsched import cli
from opsched.proto.schema_snapshots import SCHEMA_DIR, digest
from opsched.rules.version import version
from opsched.versioning import local


def test_the_version_flag_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.parser().parse_args(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"opsched {version()}\n"
    assert version()  # installed (pip install -e): the package's metadata


def test_the_version_info_is_the_client_its_python_and_the_wire_contract_digest():
    info = local("9.9.9")
    assert (info.client, info.python, info.server) == (version(), platform.python_version(), "9.9.9")
    assert info.wire_schemas == digest(SCHEMA_DIR) and len(info.wire_schemas) == 64


def test_the_digest_changes_with_any_schema(tmp_path):
    (tmp_path / "output").mkdir()
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "output" / "b.json").write_text("{}")
    before = digest(tmp_path)
    (tmp_path / "output" / "b.json").write_text('{"x": 1}')
    assert digest(tmp_path) != before
