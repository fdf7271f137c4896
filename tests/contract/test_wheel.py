"""`pip install opsched` adds one top-level name: the wheel holds ``opsched`` only (the repository's proto/ and
services/ are in it as ``opsched.proto`` and ``opsched.services``), and what it installs imports by that name alone."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tracked_copy(into: Path) -> Path:
    """The repository's tracked files (its links as links), as a clean checkout has them: setuptools builds in the
    source tree (build/, *.egg-info), so building from the working tree would leave those behind, and reuse them."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = ROOT / name, into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    return into


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = tracked_copy(tmp_path_factory.mktemp("source"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                    "-w", str(out), str(source)], check=True, capture_output=True, text=True, timeout=240)
    [built] = out.glob("opsched-*.whl")
    return built


def test_the_wheel_has_one_top_level_name(wheel: Path):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        top_level = z.read(next(n for n in names if n.endswith(".dist-info/top_level.txt"))).decode().split()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"opsched"}
    assert top_level == ["opsched"]
    assert {"opsched/proto/codec.py", "opsched/rules/podspec.py", "opsched/bus/bus.py",
            "opsched/services/admission/__main__.py", "opsched/cli.py",
            "opsched/proto/schemas/event.submitted.json"} <= set(names)  # the contract's schemas come along
    assert any(n.startswith("opsched/ui/static/") for n in names)


def test_what_the_wheel_installs_imports_by_its_one_name(wheel: Path, tmp_path: Path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check",
                    "--target", str(target), str(wheel)], check=True, capture_output=True, text=True, timeout=240)
    installed = {p.name for p in target.iterdir() if not p.name.endswith(".dist-info")}
    assert installed - {"bin"} == {"opsched"}  # bin/: the `opsched` command
    probe = ("import opsched, opsched.proto.codec, opsched.services.admission.service, opsched.cli\n"
             "assert opsched.__file__.startswith(%r), opsched.__file__\n"
             "try:\n    import proto\nexcept ImportError:\n    pass\nelse:\n    raise SystemExit('proto importable')\n"
             % str(target))
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
