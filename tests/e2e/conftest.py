from pathlib import Path

import pytest

from opsched.localcluster.controlplane import ControlPlaneError, ensure_built
from tests.conftest import folders_of
from tests.e2e.firstday import opsched_up

_HERE = Path(__file__).resolve().parent


# Under pytest-xdist (scripts/test: ``--dist loadgroup``) each module is a group: its tests run on one worker, one
# after another; the modules that use the session's ``default_up`` (the journey's, the doc blocks') are one group, so
# that one `opsched up` serves them all. The demo's two runs have their own local clusters, test_opsched_up its own
# `opsched up`. Whichever `opsched up` comes second finds the default metrics port 8090 taken and says so, as it would
# for a user (no test reads it).


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups, and before tests/conftest.py's
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in folders_of(item.path):
            item.add_marker(pytest.mark.integration)
            shared = "default_up" in getattr(item, "fixturenames", ())
            item.add_marker(pytest.mark.xdist_group("e2e-default-up" if shared else f"e2e-{item.path.stem}"))


@pytest.fixture(scope="session")
def default_up(tmp_path_factory: pytest.TempPathFactory):
    """One `opsched up` as it starts by default (``tests.e2e.firstday``) for the user journey and the doc tests."""
    try:
        ensure_built(build=False)
    except ControlPlaneError as exc:
        pytest.skip(f"local Kubernetes control plane unavailable: {exc}")
    with opsched_up(tmp_path_factory.mktemp("firstday")) as admin:
        yield admin


