"""Where a client connects and as whom (opsched/context.py): the context file `opsched up` writes, which context is
read, and which source wins for the URL, the CA and the user."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from opsched import context, natsauth
from opsched.bus.credentials import Credentials, CredentialsError
from opsched.tls import ensure_tls


@pytest.fixture
def up_dir(tmp_path: Path) -> Path:
    """A data dir as `opsched up` leaves it: a CA, password files of admin and alice, and the context."""
    data = tmp_path / "data"
    ensure_tls(data / "tls")
    natsauth.accounts_block(data / "auth", natsauth.users_of([natsauth.User("alice", "submitter")]))
    context.write(context.default_path(data), url="tls://127.0.0.1:4999", ca=data / "tls" / "ca.pem", user="admin",
                  password_file=data / "auth" / "admin.password", description="test")
    return data


def test_a_context_is_0600_names_absolute_files_and_holds_no_password(up_dir: Path):
    path = context.default_path(up_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    body = json.loads(path.read_text())
    assert body["password_file"] == str((up_dir / "auth" / "admin.password").resolve())
    assert (up_dir / "auth" / "admin.password").read_text().strip() not in path.read_text()
    assert sorted(body) == sorted(context.FIELDS)


def test_the_data_dirs_context_gives_url_ca_and_admin(up_dir: Path):
    target = context.resolve(data_dir=up_dir, env={})
    assert target.url == "tls://127.0.0.1:4999" and target.ca_file == (up_dir / "tls" / "ca.pem").resolve()
    assert target.credentials == natsauth.credentials(up_dir / "auth", "admin")
    assert target.context == context.default_path(up_dir)


def test_no_context_anywhere_is_an_open_plain_server_on_the_default_port(tmp_path: Path):
    assert context.resolve(data_dir=tmp_path, env={}) == context.Target(context.DEFAULT_URL, None, None, None)


def test_the_context_is_the_one_named_then_opsched_context_then_the_data_dirs(up_dir: Path, tmp_path: Path):
    other = context.write(tmp_path / "other.json", url="nats://other:1", ca=None, user=None, password_file=None)
    env_named = context.write(tmp_path / "env.json", url="nats://env:1", ca=None, user=None, password_file=None)
    env = {context.CONTEXT_ENV: str(env_named)}
    assert context.resolve(data_dir=up_dir, env={}).url == "tls://127.0.0.1:4999"
    assert context.resolve(data_dir=up_dir, env=env).url == "nats://env:1"
    assert context.resolve(context=other, data_dir=up_dir, env=env).url == "nats://other:1"


def test_a_context_named_but_missing_is_refused_naming_where(tmp_path: Path):
    with pytest.raises(context.ContextError, match=r"--context: no context file at .*nope.json"):
        context.resolve(context=tmp_path / "nope.json", env={})
    with pytest.raises(context.ContextError, match=r"\$OPSCHED_CONTEXT: no context file at .*gone.json"):
        context.resolve(env={context.CONTEXT_ENV: str(tmp_path / "gone.json")}, data_dir=tmp_path)


@pytest.mark.parametrize("body, error", [
    ({"url": "nats://h:1", "password": "hunter2"}, "holds password; a context names files only"),
    ({"url": "nats://h:1", "servers": "x"}, r"unknown field\(s\) servers"),
    ({"url": 4222}, "url must be a string or null"),
    ([1], "expected a JSON object"),
])
def test_a_malformed_context_is_refused_naming_the_file(tmp_path: Path, body: object, error: str):
    (tmp_path / "c.json").write_text(json.dumps(body))
    with pytest.raises(context.ContextError, match=error):
        context.read(tmp_path / "c.json")
    (tmp_path / "junk.json").write_text("{")
    with pytest.raises(context.ContextError, match="not JSON"):
        context.read(tmp_path / "junk.json")


def test_relative_files_in_a_context_are_relative_to_it(tmp_path: Path):
    (tmp_path / "c.json").write_text(json.dumps({"url": "nats://h:1", "ca": "tls/ca.pem", "user": "bob",
                                                 "password_file": "auth/bob.password"}))
    found = context.read(tmp_path / "c.json")
    assert found.ca == tmp_path.resolve() / "tls" / "ca.pem"
    assert found.password_file == tmp_path.resolve() / "auth" / "bob.password"


def test_flags_beat_the_environment_which_beats_the_context(up_dir: Path, tmp_path: Path):
    other_ca = ensure_tls(tmp_path / "other-tls").ca
    (tmp_path / "pw").write_text("zed-secret\n")
    env = {context.URL_ENV: "tls://env:1", context.CA_ENV: str(other_ca), context.USER_ENV: "zed",
           context.PASSWORD_FILE_ENV: str(tmp_path / "pw")}
    target = context.resolve(data_dir=up_dir, env=env)
    assert (target.url, target.ca_file, target.credentials) == ("tls://env:1", other_ca,
                                                                Credentials("zed", password="zed-secret"))
    mine = Credentials("me", password="p")
    target = context.resolve(url="tls://flag:1", ca_file=up_dir / "tls" / "ca.pem", credentials=mine,
                             data_dir=up_dir, env=env)
    assert (target.url, target.ca_file, target.credentials) == ("tls://flag:1", up_dir / "tls" / "ca.pem", mine)


def test_a_creds_file_in_the_environment_beats_the_contexts_password(up_dir: Path, tmp_path: Path):
    (tmp_path / "u.creds").write_text("jwt and seed")
    env = {context.USER_ENV: "svc", context.CREDS_ENV: str(tmp_path / "u.creds")}
    assert context.resolve(data_dir=up_dir, env=env).credentials == Credentials("svc", creds_file=tmp_path / "u.creds")


def test_opsched_nats_user_alone_is_another_user_of_the_same_opsched_up(up_dir: Path):
    target = context.resolve(data_dir=up_dir, env={context.USER_ENV: "alice"})
    assert target.credentials == natsauth.credentials(up_dir / "auth", "alice")
    assert context.resolve(data_dir=up_dir, env={context.USER_ENV: "admin"}).credentials.user == "admin"  # type: ignore[union-attr]
    with pytest.raises(CredentialsError, match=r"context .*context.json: its password_file .*nobody.password does not"):
        context.resolve(data_dir=up_dir, env={context.USER_ENV: "nobody"})


def test_without_a_context_a_user_alone_is_that_user_without_password(tmp_path: Path):
    assert context.resolve(data_dir=tmp_path, env={context.USER_ENV: "alice"}).credentials == Credentials("alice")
    open_context = context.write(tmp_path / "open.json", url="nats://h:1", ca=None, user=None, password_file=None)
    assert context.resolve(context=open_context, env={}).credentials is None
    assert context.resolve(context=open_context, env={context.USER_ENV: "bob"}).credentials == Credentials("bob")


def test_a_contexts_password_file_that_is_gone_is_refused_naming_the_context(up_dir: Path):
    (up_dir / "auth" / "admin.password").unlink()
    with pytest.raises(CredentialsError, match=r"context .*context.json: its password_file .*admin.password"):
        context.resolve(data_dir=up_dir, env={})


def test_the_ca_is_the_flag_then_the_environment_then_the_context_then_the_data_dir(tmp_path: Path):
    assert context.resolve(data_dir=tmp_path, env={}).ca_file is None  # nothing anywhere: plain, or the system's CAs
    cas = {where: ensure_tls(tmp_path / where).ca for where in ("tls", "ctx", "env", "opt")}
    assert context.resolve(data_dir=tmp_path, env={}).ca_file == cas["tls"]
    context.write(context.default_path(tmp_path), url="tls://h:1", ca=cas["ctx"], user=None, password_file=None)
    assert context.resolve(data_dir=tmp_path, env={}).ca_file == cas["ctx"].resolve()
    env = {context.CA_ENV: str(cas["env"])}
    assert context.resolve(data_dir=tmp_path, env=env).ca_file == cas["env"]
    assert context.resolve(ca_file=cas["opt"], data_dir=tmp_path, env=env).ca_file == cas["opt"]


def test_a_ca_named_but_missing_or_no_certificate_is_refused_naming_where(tmp_path: Path):
    with pytest.raises(ValueError, match=r"\$OPSCHED_NATS_CA: no CA certificate file at .*nope.pem"):
        context.resolve(data_dir=tmp_path, env={context.CA_ENV: str(tmp_path / "nope.pem")})
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match=r"--nats-ca: .*junk.pem is not a usable CA certificate"):
        context.resolve(ca_file=tmp_path / "junk.pem", data_dir=tmp_path, env={})
    context.write(context.default_path(tmp_path), url="tls://h:1", ca=tmp_path / "gone.pem", user=None,
                  password_file=None)
    with pytest.raises(ValueError, match=r"context .*context.json \(ca\): no CA certificate file at .*gone.pem"):
        context.resolve(data_dir=tmp_path, env={})


def test_the_cli_reads_the_context_given_with_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from opsched.cli import EXIT_INVALID, main

    with pytest.raises(SystemExit) as exited:
        main(["--context", str(tmp_path / "nope.json"), "ops"])
    assert exited.value.code == EXIT_INVALID
    assert f"--context: no context file at {tmp_path / 'nope.json'}" in capsys.readouterr().err
