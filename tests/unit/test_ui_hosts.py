"""The Host headers the web view answers (``opsched.ui.hosts``): DNS rebinding gets 421, no or a bad header 400."""
from __future__ import annotations

import pytest

from opsched.ui.hosts import verdict
from tests.builders import case, case_name


@pytest.mark.parametrize("c", [
    case("loopback by address", header="127.0.0.1:8089", bind="127.0.0.1", expect=None),
    case("loopback by name, any case, a trailing dot", header="LocalHost.:8089", bind="127.0.0.1", expect=None),
    case("IPv6 loopback", header="[::1]:8089", bind="::1", expect=None),
    case("the host it binds (--ui-host)", header="ops.lab:8089", bind="ops.lab", expect=None),
    case("an address of a view bound to every interface", header="10.1.2.3:8089", bind="0.0.0.0", expect=None),
    case("a rebound name", header="evil.example:8089", bind="127.0.0.1", expect=421),
    case("a rebound name, the view bound to every interface", header="evil.example:8089", bind="0.0.0.0",
         expect=421),
    case("another address than the one it binds", header="10.1.2.3:8089", bind="127.0.0.1", expect=421),
    case("another port", header="127.0.0.1:9000", bind="127.0.0.1", expect=421),
    case("no port: 80, not its port", header="localhost", bind="127.0.0.1", expect=421),
    case("no Host header", header=None, bind="127.0.0.1", expect=400),
    case("credentials in it", header="a@localhost:8089", bind="127.0.0.1", expect=400),
    case("a path in it", header="localhost:8089/x", bind="127.0.0.1", expect=400),
    case("a port that is no number", header="localhost:http", bind="127.0.0.1", expect=400),
], ids=case_name)
def test_which_hosts_the_view_answers(c):
    assert verdict(c.header, c.bind, 8089) == c.expect


def test_a_view_on_port_80_answers_a_host_without_a_port():
    assert verdict("localhost", "127.0.0.1", 80) is None
