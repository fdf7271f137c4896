"""The collector is off while any replay runs, back on (with the built state frozen) once the last is over."""
import gc

import pytest

from opsched.bus import rebuilding


@pytest.fixture(autouse=True)
def _restore():
    yield
    gc.unfreeze()
    gc.enable()


def test_collector_off_while_replays_overlap_and_on_after_the_last():
    gc.enable()
    with rebuilding.replaying():
        assert not gc.isenabled()
        with rebuilding.replaying():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer replay is still building
    assert gc.isenabled()


def test_what_was_built_is_frozen_then_thawed_when_a_service_stops():
    gc.unfreeze()
    with rebuilding.replaying():
        built = [{"op": i} for i in range(100)]
    assert gc.get_freeze_count() >= len(built)
    rebuilding.thaw()
    assert gc.get_freeze_count() == 0


def test_a_disabled_collector_stays_disabled_and_a_failed_replay_still_ends():
    gc.disable()
    with pytest.raises(RuntimeError), rebuilding.replaying():
        raise RuntimeError("replay failed")
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError), rebuilding.replaying():
        raise RuntimeError("replay failed")
    assert gc.isenabled()
