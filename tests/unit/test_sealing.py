"""Env values sealed in the op stream (``services.runtime.sealing``): opened as written, only with the key."""
from __future__ import annotations

import pytest

from opsched.services.runtime.sealing import PREFIX, Sealer, Unsealable, write_key
from tests.builders import op


@pytest.fixture
def sealer(tmp_path) -> Sealer:
    return Sealer.of(write_key(tmp_path / "env.key"))


def _env(spec) -> dict[str, str]:
    return {e.name: e.value for e in spec.container.env}


def test_every_value_is_sealed_and_opens_as_written(sealer):
    spec = op("t").env("TOKEN", "s3cret").env("EMPTY").env("TEMPLATE", "{{ globals.run_uuid }}").build()
    sealed = sealer.seal(spec)
    assert all(v.startswith(PREFIX) and "s3cret" not in v for v in _env(sealed).values())
    assert sealer.unseal(sealed) == spec
    assert sealer.seal(spec) == sealed  # deterministic: a cache fingerprint of the sealed spec is stable


def test_a_value_that_reads_sealed_is_sealed_again_so_a_copied_ciphertext_opens_to_itself(sealer):
    stolen = _env(sealer.seal(op("victim").env("TOKEN", "s3cret").build()))["TOKEN"]
    mine = sealer.seal(op("thief").env("TOKEN", stolen).build())
    assert _env(sealer.unseal(mine))["TOKEN"] == stolen


def test_another_key_or_none_cannot_open_a_sealed_value(sealer, tmp_path):
    sealed = sealer.seal(op("t").env("TOKEN", "s3cret").build())
    with pytest.raises(Unsealable, match="another key"):
        Sealer.of(write_key(tmp_path / "other.key")).unseal(sealed)
    with pytest.raises(Unsealable, match="no key"):
        Sealer.of(None).unseal(sealed)


def test_without_a_key_nothing_is_sealed_and_plain_values_pass(sealer):
    spec = op("t").env("TOKEN", "plain").build()
    assert Sealer.of(None).seal(spec) == spec
    assert sealer.unseal(spec) == spec  # recorded before sealing was on


def test_a_key_file_that_is_not_a_key_is_refused_naming_it(tmp_path):
    bad = tmp_path / "bad.key"
    bad.write_text("not base64!")
    with pytest.raises(ValueError, match="OPSCHED_ENV_KEY_FILE"):
        Sealer.of(bad)
    assert oct(write_key(tmp_path / "k").stat().st_mode & 0o777) == "0o600"


def test_a_hooks_env_is_sealed_with_its_op_and_its_follow_up_op_gets_it_as_written(sealer, tmp_path):
    import msgspec

    from opsched.bus import logging as oplog
    from opsched.proto.events import OperationSubmitted
    from opsched.proto.spec import Hook
    from opsched.services.admission.handlers import on_submit
    from opsched.services.admission.hooks import due
    from opsched.services.admission.state.admission_state import AdmissionState
    from opsched.services.runtime.consumer import Context
    from opsched.services.runtime.settings import Settings
    from tests.builders import T0, admitted, gates_cleared, running, submitted, succeeded
    from tests.builders.clock import FakeClock
    from tests.unit.admission_scenarios import queues

    follow = op("notify").env("TOKEN", "s3cret").build()
    spec = sealer.seal(msgspec.structs.replace(op("train").build(), hooks=[Hook(trigger="done", spec=follow)]))
    assert "s3cret" not in str(spec.hooks[0].spec.container.env)  # in the op's record: sealed
    state = AdmissionState()
    for seq, event in enumerate([submitted(spec, op_id="t"), *gates_cleared("t"), admitted(spec, op_id="t"),
                                 running("t"), succeeded("t")], 1):
        state.apply(event, seq)
    key = tmp_path / "env.key"
    ctx = Context(service="admission", clock=FakeClock(T0), settings=Settings(env_key_file=str(key)),
                  log=oplog.get("test"), subject="cmd.admission.submit.default")
    [cmd] = due(state.ops["t"], T0)
    event = on_submit(cmd, ctx, state, queues(("default", 1)))
    assert isinstance(event, OperationSubmitted)
    assert sealer.unseal(event.spec).container.env == follow.container.env  # sealed once, opens as written
