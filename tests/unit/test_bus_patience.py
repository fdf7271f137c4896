"""Which JetStream refusals a publish or KV call waits out (``patiently``): a duplicate in process (two
replicas reporting one fact at once) is; a missing key (an APIError without an error code) is not."""
from __future__ import annotations

import nats.js.errors

from opsched.bus.bus import DUPLICATE_IN_PROCESS, in_process_elsewhere


def test_a_duplicate_message_id_in_process_elsewhere_is_waited_out():
    refusal = nats.js.errors.APIError(code=409, err_code=DUPLICATE_IN_PROCESS,
                                      description="duplicate message id is in process")
    assert in_process_elsewhere(refusal)


def test_other_refusals_are_not_even_without_an_error_code():
    assert not in_process_elsewhere(nats.js.errors.KeyNotFoundError())
    assert not in_process_elsewhere(nats.js.errors.APIError(code=400, err_code=10071, description="wrong last sequence"))
    assert not in_process_elsewhere(ValueError("not from JetStream"))
