"""Starting a real nats-server on a port picked here: the pick and the server's bind are two steps, and another
process (a test beside this one) may bind the port between them."""
from __future__ import annotations

import socket

import pytest

from opsched import natsauth, natsserver
from opsched.natsserver import NatsServer


@pytest.fixture
def a_taken_port():
    """A loopback port another process listens on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("authorization", [None, "users"], ids=["flags", "config file"])
def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(tmp_path, monkeypatch, a_taken_port,
                                                                         authorization):
    picks = iter([a_taken_port])
    monkeypatch.setattr(natsserver, "free_port", lambda: next(picks, 0) or socket_port())
    users = natsauth.accounts_block(tmp_path / "auth", []) if authorization else None
    server = NatsServer(tmp_path / "nats", authorization=users).start()
    try:
        assert server.port != a_taken_port
        with socket.create_connection(("127.0.0.1", server.port), timeout=2) as s:
            assert s.recv(4) == b"INFO"
        assert b"address already in use" in server.log_file.read_bytes()  # the first try lost the port
    finally:
        server.stop()


def test_a_port_the_caller_named_is_not_changed_when_it_is_taken(tmp_path, a_taken_port):
    with pytest.raises(RuntimeError, match="address already in use"):
        NatsServer(tmp_path / "nats", port=a_taken_port).start()


def test_a_picked_monitor_port_taken_first_is_picked_again(tmp_path, monkeypatch, a_taken_port):
    picks = iter([a_taken_port])  # the first pick: the monitoring port (the client port is named)
    monkeypatch.setattr(natsserver, "free_port", lambda: next(picks, 0) or socket_port())
    server = NatsServer(tmp_path / "nats", port=socket_port(), monitor_port=natsserver.PICK)
    assert server.monitor_port == a_taken_port
    server.start()
    try:
        assert server.monitor_port != a_taken_port
        with socket.create_connection(("127.0.0.1", server.monitor_port), timeout=2):
            pass  # the monitoring endpoint listens on the port picked again
    finally:
        server.stop()


def socket_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cluster_whose_picked_route_port_is_taken_starts_on_ports_picked_again(tmp_path, monkeypatch, a_taken_port):
    picks = iter([a_taken_port])  # the first pick: node n0's route port
    monkeypatch.setattr(natsserver, "free_port", lambda: next(picks, 0) or socket_port())
    cluster = natsserver.NatsCluster(tmp_path / "cluster", n=3)
    assert cluster.route_ports[0] == a_taken_port
    cluster.start()
    try:
        assert a_taken_port not in cluster.route_ports
        assert cluster.meta_leader() in cluster.names
    finally:
        cluster.stop()


def test_free_port_never_gives_this_process_the_same_port_twice(monkeypatch):
    offered = iter([41000, 41000, 41001, 41000, 41002])  # the kernel offering a port it just offered again

    class Socket:
        def __init__(self) -> None:
            self.port = 0

        def bind(self, address) -> None:
            self.port = next(offered)

        def getsockname(self):
            return ("127.0.0.1", self.port)

        def close(self) -> None:
            pass
    monkeypatch.setattr(natsserver.socket, "socket", Socket)
    monkeypatch.setattr(natsserver, "_HANDED_OUT", natsserver.collections.deque(maxlen=8))
    assert [natsserver.free_port() for _ in range(3)] == [41000, 41001, 41002]
