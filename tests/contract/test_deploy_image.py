"""deploy/Dockerfile keeps its promises, checked without a Docker engine (there is none here): a base image pinned
by exact version, of the Python the project targets; a numeric non-root user, the one the pods ask for; exactly
the packages of deploy/constraints.txt, which pins every runtime dependency of pyproject.toml (transitively,
as installed here) and none of the test extras; every package of the project copied in."""
from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from opsched.proto import permissions

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
CONSTRAINTS = ROOT / "deploy" / "constraints.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXACT_PYTHON = re.compile(r"^python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+$")  # python:3.11.7-slim-bookworm


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines()
                                             if not line.lstrip().startswith("#")))
    return [(words[0].upper(), words[1].strip() if len(words) > 1 else "")
            for line in joined.splitlines() if (words := line.strip().split(None, 1))]


def arguments(instruction: str) -> list[str]:
    return [args for name, args in instructions() if name == instruction]


def pinned() -> dict[str, str]:
    """deploy/constraints.txt: canonical name -> the one version pinned (``name==version`` lines only)."""
    lines = [line for line in CONSTRAINTS.read_text().splitlines() if line and not line.startswith("#")]
    pins = [re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line) for line in lines]
    assert all(pins), [line for line, pin in zip(lines, pins) if not pin]
    names = [canonicalize_name(pin.group(1)) for pin in pins if pin]
    assert len(names) == len(set(names)), "a package pinned twice"
    return {canonicalize_name(pin.group(1)): pin.group(2) for pin in pins if pin}


def test_every_stage_starts_from_an_exact_version_of_the_python_the_project_targets():
    images = [args.split()[0] for args in arguments("FROM")]
    assert images and len(set(images)) == 1, images  # the build stage's interpreter is the one that runs
    version = EXACT_PYTHON.match(images[0])
    assert version, f"{images[0]}: pin the base image by its exact version tag (python:X.Y.Z-slim-<debian>)"
    assert f"{version.group(1)}.{version.group(2)}" == PYPROJECT["tool"]["mypy"]["python_version"]
    assert Requirement(f"python{PYPROJECT['project']['requires-python']}").specifier.contains(
        ".".join(version.groups()))


def test_the_image_runs_as_a_numeric_non_root_user_the_pods_ask_for_too():
    user = arguments("USER")[-1]
    assert re.fullmatch(r"[1-9]\d*:[1-9]\d*", user), f"USER {user}: a numeric uid:gid, not root"
    uid, gid = (int(n) for n in user.split(":"))
    for service in (*permissions.SERVICES, permissions.GATEWAY):
        manifest = next(yaml.safe_load_all((ROOT / "deploy" / "base" / f"30-{service}.yaml").read_text()))
        pod = manifest["spec"]["template"]["spec"]["securityContext"]
        assert (pod["runAsUser"], pod["runAsGroup"]) == (uid, gid), service


def test_constraints_pin_every_runtime_dependency_to_a_version_it_allows():
    pins = pinned()
    for text in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} (pyproject.toml) is not in deploy/constraints.txt: run scripts/image_constraints.py"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} is not {requirement.specifier}"


def test_constraints_pin_what_the_runtime_dependencies_need_as_installed_here_and_no_test_extra():
    spec = importlib.util.spec_from_file_location("image_constraints", ROOT / "scripts" / "image_constraints.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    needed = set(script.closure(script.runtime_requirements()))
    pins = set(pinned())
    assert needed <= pins, f"missing {sorted(needed - pins)}: run scripts/image_constraints.py"
    tests_only = {canonicalize_name(Requirement(text).name) for text in PYPROJECT["project"]["optional-dependencies"]["test"]}
    only_tests = (pins & tests_only) - needed  # a test extra the runtime also needs (packaging, by cloudevents) stays
    assert not only_tests, f"test extras in the image: {sorted(only_tests)}"


def test_the_image_installs_only_the_pinned_wheels_and_checks_them():
    copied = {args.split()[-1]: args.split()[0] for args in arguments("COPY") if "--from" not in args}
    constraints = next(dest for dest, src in copied.items() if src == "deploy/constraints.txt")
    installs = [args for args in arguments("RUN") if " install " in args]
    assert len(installs) == 1, installs
    (install,) = installs
    for flag in ("--no-deps", "--only-binary=:all:", f"-r {constraints}", " check"):
        assert flag in install, f"the image's pip install lacks {flag!r}"


def test_the_image_holds_every_package_of_the_project():
    packages = {pattern.rstrip("*") for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {args.split()[0] for args in arguments("COPY") if "--from" not in args}
    assert packages <= copied, f"not copied into the image: {sorted(packages - copied)}"
