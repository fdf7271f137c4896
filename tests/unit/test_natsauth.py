"""The users `opsched up` generates (``opsched.natsauth``) and the credentials a process connects with
(``bus.credentials``): private files, passwords kept across restarts, clear refusals."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from opsched import natsauth
from opsched.bus.credentials import Credentials, CredentialsError
from opsched.proto import permissions, subjects


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_service_and_admin_get_a_user_and_extra_users_their_role():
    users = natsauth.users_of([natsauth.parse_user("alice:submitter"), natsauth.parse_user("bob:approver")])
    assert [(u.name, u.role) for u in users] == [*((s, "service") for s in permissions.SERVICES), ("admin", "admin"),
                                                 ("alice", "submitter"), ("bob", "approver"),
                                                 ("gateway", "gateway")]
    assert natsauth.fronted(users) == (("admin", "admin"), ("alice", "submitter"), ("bob", "approver"))
    gateway = permissions.gateway(natsauth.fronted(users))  # exactly the fronted users' verbs, never cmd.>
    assert "cmd.alice.submit.>" in gateway.publish and "cmd.bob.approve" in gateway.publish
    assert "cmd.alice.approve" not in gateway.publish and "cmd.>" not in gateway.publish


@pytest.mark.parametrize("text,error", [
    ("alice", "expected NAME:ROLE"), ("alice:root", "ROLE one of viewer, submitter, approver, admin"),
    ("Alice:submitter", "user name 'Alice'"), ("anonymous:admin", "user name 'anonymous'"),
    ("dispatcher:admin", "user name 'dispatcher'"),
])
def test_a_user_flag_that_cannot_be_used_is_refused_naming_it(text, error):
    with pytest.raises(ValueError, match=error):
        natsauth.parse_user(text)


def test_the_accounts_block_holds_each_users_password_and_permissions_in_its_account(tmp_path):
    users = natsauth.users_of([natsauth.User("alice", "submitter")])
    block = natsauth.accounts_block(tmp_path / "auth", users)
    password = (tmp_path / "auth" / "alice.password").read_text().strip()
    alice = next(line for line in block.splitlines() if '"alice"' in line)
    assert f'password: "{password}"' in alice and len(password) >= 32
    assert '"cmd.alice.submit.>"' in block and '"ops.admitted.>"' in block and block.startswith("accounts {")
    clients = block.index(f"{subjects.CLIENTS_ACCOUNT}: {{")
    assert block.index('{user: "admission"') < clients < block.index('{user: "alice"')  # services apart from clients
    assert block.index('{user: "admin"') > clients


def test_password_files_are_private_and_kept_across_restarts(tmp_path):
    auth = tmp_path / "auth"
    natsauth.accounts_block(auth, natsauth.users_of([]))
    first = {p.name: p.read_text() for p in auth.iterdir()}
    assert sorted(first) == sorted(f"{u}.password" for u in (*permissions.SERVICES, "admin", "gateway"))
    assert mode(auth) == 0o700 and all(mode(p) == 0o600 for p in auth.iterdir())
    natsauth.accounts_block(auth, natsauth.users_of([]))
    assert {p.name: p.read_text() for p in auth.iterdir()} == first
    assert natsauth.credentials(auth, "cost") == Credentials("cost", password=first["cost.password"].strip())


def test_the_server_config_that_holds_the_passwords_is_private(tmp_path):
    from opsched.natsserver import NatsServer

    server = NatsServer(tmp_path / "nats", authorization=natsauth.accounts_block(tmp_path / "auth", []))
    path = server._write_config()
    assert mode(path) == 0o600 and "accounts {" in path.read_text()


def test_no_credentials_is_an_open_server_as_anonymous():
    assert Credentials.of(None) == Credentials(subjects.ANONYMOUS)
    assert Credentials().connect_options() == {}


def test_a_password_or_a_creds_file_authenticates(tmp_path):
    (tmp_path / "pw").write_text("s3cret\n")
    assert Credentials.of("alice", tmp_path / "pw").connect_options() == {"user": "alice", "password": "s3cret"}
    (tmp_path / "u.creds").write_text("jwt")
    creds = Credentials.of("alice", creds_file=tmp_path / "u.creds")
    assert creds.user == "alice" and creds.connect_options() == {"user_credentials": str(tmp_path / "u.creds")}


@pytest.mark.parametrize("user,password,creds,error", [
    (None, "pw", None, "OPSCHED_NATS_USER must name the user"),
    ("Alice", "pw", None, "OPSCHED_NATS_USER 'Alice'"),
    ("alice", "missing", None, "cannot read"),
    ("alice", "empty", None, "is empty"),
    ("alice", None, "missing", "OPSCHED_NATS_CREDS: no such file"),
])
def test_credentials_that_cannot_be_used_are_refused_naming_the_setting(tmp_path, user, password, creds, error):
    (tmp_path / "pw").write_text("x")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(CredentialsError, match=error):
        Credentials.of(user, tmp_path / password if password else None, tmp_path / creds if creds else None)


def test_a_service_connection_name_maps_to_its_user():
    assert natsauth.service_of("opsched-dispatcher") == "dispatcher"
    with pytest.raises(ValueError, match="no NATS user"):
        natsauth.service_of("opsched-demo")


def test_a_permissions_violation_is_remembered_by_subject_and_refused_next_time():
    from opsched.bus.refusals import NotPermitted, Refusals

    refusals = Refusals()
    assert not refusals.note(Exception("nats: timeout"))
    assert refusals.note(Exception("nats: 'Permissions Violation for Publish to \"cmd.alice.approve\"'"))
    refusals.check("alice", "cmd.alice.stop")
    with pytest.raises(NotPermitted, match="refused user 'alice' publishing to cmd.alice.approve"):
        refusals.check("alice", "cmd.alice.approve")
