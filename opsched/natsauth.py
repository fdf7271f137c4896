"""The NATS users of `opsched up`: one per service, one ``admin``, and any ``--user NAME:ROLE``; each with a
random password kept in its own file (``<data dir>/auth/<user>.password``, 0600, kept across restarts) and
the accounts, exports and allow-lists of ``proto.permissions``, written as nats-server's ``accounts { ... }``: the
services in the services' account, ``admin`` and the ``--user``s in the clients' account.

Passwords are stored in plain text in the server config, which is 0600 like the password files next to it:
whoever can read one can read the others, so a hash would protect nothing here (and nats-server has no
built-in hashing tool). A deployment may put bcrypt hashes in its own config, or use nkeys/JWT accounts
(``OPSCHED_NATS_CREDS``): the services only need credentials the server accepts."""
from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from opsched.bus.credentials import Credentials
from opsched.proto import permissions, subjects

ADMIN = "admin"  # the client user `opsched up` always creates (the CLI's default)
SERVICE = "service"


@dataclass(frozen=True)
class User:
    name: str
    role: str  # "service" (the name is the service's) or a client role


def parse_user(text: str) -> User:
    """``NAME:ROLE`` (``--user alice:submitter``); ValueError naming what is wrong."""
    name, sep, role = text.partition(":")
    if not sep or role not in permissions.ROLES:
        raise ValueError(f"--user {text!r}: expected NAME:ROLE, ROLE one of {', '.join(permissions.ROLES)}")
    permissions.client(role, name)  # raises on a name that is no user token
    return User(name, role)


def users_of(extra: list[User]) -> list[User]:
    """The services, ``admin``, then ``extra`` (a name given twice: the last role wins), then the gateway's user
    (``proto.permissions.gateway``: it fronts the client users)."""
    by_name = {name: User(name, SERVICE) for name in permissions.SERVICES}
    by_name[ADMIN] = User(ADMIN, "admin")
    for user in extra:
        if user.name in permissions.SERVICES or user.name == permissions.GATEWAY:
            raise ValueError(f"--user {user.name}: a service's name")
        by_name[user.name] = user
    by_name[permissions.GATEWAY] = User(permissions.GATEWAY, permissions.GATEWAY)
    return list(by_name.values())


def fronted(users: list[User]) -> tuple[tuple[str, str], ...]:
    """The client users among ``users`` as (name, role): those the gateway acts for."""
    return tuple((u.name, u.role) for u in users if u.role in permissions.ROLES)


def password_file(auth_dir: Path, user: str) -> Path:
    return auth_dir / f"{user}.password"


def _password(auth_dir: Path, user: str) -> str:
    path = password_file(auth_dir, user)
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(32)
    write_private(path, password + "\n")
    return password


def write_private(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


def _quoted(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def _entry(user: User, password: str, agents: tuple[str, ...] = (),
           clients: tuple[tuple[str, str], ...] = ()) -> str:
    p = permissions.for_user(user.name, user.role, agents, clients)
    deny = f", deny: {_quoted(p.deny)}" if p.deny else ""
    responses = ""
    if p.allow_responses:
        responses = (", allow_responses: true" if p.max_responses == 1 else
                     f", allow_responses: {{max: {p.max_responses}, expires: \"{permissions.RESPONSES_EXPIRE_S}s\"}}")
    return (f"      {{user: {json.dumps(user.name)}, password: {json.dumps(password)}, permissions: {{\n"
            f"        publish: {{allow: {_quoted(p.publish)}{deny}}},\n"
            f"        subscribe: {{allow: {_quoted(p.subscribe)}}}{responses}}}}}")


def _exports() -> str:
    lines = []
    for kind, subject, response in permissions.EXPORTS:
        answer = f", response_type: {response}" if kind == "service" and response != "singleton" else ""
        lines.append(f"      {{{kind}: {json.dumps(subject)}, accounts: [{subjects.CLIENTS_ACCOUNT}]{answer}}}")
    return ",\n".join(lines)


def _imports() -> str:
    lines = []
    for kind, subject, _ in permissions.EXPORTS:
        local = permissions.imported_as(subject)
        to = f", to: {json.dumps(local)}" if local != subject else ""
        lines.append(f"      {{{kind}: {{account: {subjects.SERVICES_ACCOUNT}, subject: {json.dumps(subject)}}}{to}}}")
    return ",\n".join(lines)


def accounts_block(auth_dir: Path, users: list[User], agents: tuple[str, ...] = (),
                   more_services: tuple[str, ...] = ()) -> str:
    """nats-server's ``accounts`` block for ``users`` (creating the password files that are missing): the services'
    account (JetStream, the services' users and ``more_services``: entries written as these are) and the clients'
    (``admin``, the others), which imports what the services' account exports. ``agents``: the named agents, whose
    dispatchers' durables only the dispatcher's user may reach."""
    entries: dict[str, list[str]] = {subjects.SERVICES_ACCOUNT: [], subjects.CLIENTS_ACCOUNT: []}
    fronts = fronted(users)  # what the gateway's user may send
    for user in users:
        account = permissions.for_user(user.name, user.role, agents, fronts).account
        entries[account].append(_entry(user, _password(auth_dir, user.name), agents, fronts))
    entries[subjects.SERVICES_ACCOUNT].extend(more_services)
    services = ",\n".join(entries[subjects.SERVICES_ACCOUNT])
    clients = ",\n".join(entries[subjects.CLIENTS_ACCOUNT])
    return (f"accounts {{\n"
            f"  {subjects.SERVICES_ACCOUNT}: {{\n    jetstream: enabled\n    users: [\n{services}\n    ]\n"
            f"    exports: [\n{_exports()}\n    ]\n  }}\n"
            f"  {subjects.CLIENTS_ACCOUNT}: {{\n    users: [\n{clients}\n    ]\n"
            f"    imports: [\n{_imports()}\n    ]\n  }}\n}}\n")


def credentials(auth_dir: Path, user: str) -> Credentials:
    """The credentials of ``user`` from its password file."""
    return Credentials.of(user, password_file(auth_dir, user))


def service_of(connection_name: str) -> str:
    """``opsched-<service>`` (the runner's connection names) -> the service's user."""
    name = connection_name.removeprefix("opsched-")
    if name not in permissions.SERVICES and name != permissions.GATEWAY:
        raise ValueError(f"no NATS user for connection {connection_name!r}")
    return name
