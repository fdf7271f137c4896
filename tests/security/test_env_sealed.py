"""Red team (issue 28): another user's env. Every client reads the op events (the view, direct gets of the op
stream), so env values are sealed there (``services.runtime.sealing``): a submitter reading another's op sees
ciphertext, and copying that ciphertext into its own op gets it the ciphertext, never the value."""
from __future__ import annotations

from opsched.proto import codec, subjects
from opsched.proto.events import OperationAdmitted, OperationSubmitted
from tests.builders import op


def _env(spec) -> dict[str, str]:
    return {e.name: e.value for e in spec.container.env}


async def test_another_users_env_reads_sealed_and_opens_only_to_what_was_copied(
        stack_factory, client_as, events, nats_server):
    await stack_factory(dispatcher_mode="null")
    ann, bob = await client_as("ann"), await client_as("bob")
    secret = await ann.submit(op("ann-train").env("API_TOKEN", "s3cret").build())
    await events.expect(OperationAdmitted, secret)
    [stored] = await bob.reads.messages(subjects.OPS_STREAM, subjects.event("submitted", secret))
    seen = codec.decode_event(stored.data)
    assert isinstance(seen, OperationSubmitted)
    assert "s3cret" not in stored.data.decode() and _env(seen.spec)["API_TOKEN"].startswith("sealed:")
    assert _env(nats_server.opened(seen.spec))["API_TOKEN"] == "s3cret"  # what the dispatcher puts in the pod

    stolen = await bob.submit(op("bob-train").env("API_TOKEN", _env(seen.spec)["API_TOKEN"]).build())
    mine = await events.expect(OperationSubmitted, stolen)
    assert _env(nats_server.opened(mine.spec))["API_TOKEN"] == _env(seen.spec)["API_TOKEN"]  # not "s3cret"

    copied = await ann.restart(secret, copy=True)  # the owner's copy keeps the value
    copy = await events.expect(OperationSubmitted, copied)
    assert _env(nats_server.opened(copy.spec))["API_TOKEN"] == "s3cret"
