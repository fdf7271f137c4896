"""A delivered message's stream sequence, read from its ack subject, agrees with nats-py's metadata."""
from nats.aio.msg import Msg

from opsched.bus.bus import stream_sequence


def _msg(reply: str) -> Msg:
    return Msg(_client=None, subject="ops.submitted.a", reply=reply, data=b"{}", headers=None)


def test_the_plain_ack_subject_gives_the_stream_sequence():
    msg = _msg("$JS.ACK.OPSCHED_OPS.ordered123.1.4711.17.1700000000000000000.0")
    assert stream_sequence(msg) == 4711 == msg.metadata.sequence.stream


def test_a_domain_s_ack_subject_goes_through_nats_py():
    msg = _msg("$JS.ACK.hub.ACCOUNTHASH.OPSCHED_OPS.ordered123.1.4711.17.1700000000000000000.0.rand")
    assert stream_sequence(msg) == msg.metadata.sequence.stream == 4711
