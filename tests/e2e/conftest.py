from pathlib import Path

import pytest

from opsched.localcluster.controlplane import ControlPlaneError, ensure_built
from tests.e2e.firstday import opsched_up

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def default_up(tmp_path_factory: pytest.TempPathFactory):
    """One `opsched up` as it starts by default (``tests.e2e.firstday``) for the user journey and the doc tests."""
    try:
        ensure_built(build=False)
    except ControlPlaneError as exc:
        pytest.skip(f"local Kubernetes control plane unavailable: {exc}")
    with opsched_up(tmp_path_factory.mktemp("firstday")) as admin:
        yield admin


