"""Where a client (the CLI, the SDK, the web view) finds opsched's NATS — its URL, the CA that verifies the
server, the user it connects as — and which source wins: defined here only.

**The context file.** `opsched up` writes ``<data dir>/context.json`` (0600; removed when it stops, as
``up.json``), in the spirit of ``nats context``::

    {"description": "opsched up in /home/me/proj/.opsched", "url": "tls://127.0.0.1:4222",
     "ca": "/home/me/proj/.opsched/tls/ca.pem", "user": "admin",
     "password_file": "/home/me/proj/.opsched/auth/admin.password", "creds": null, "hub": null}

It names the file holding the password, never the password: a context with a ``password`` (or ``token``) is
refused. ``creds`` is a NATS credentials file (JWT + nkey seed) instead of a password file; ``ca`` and the user
are null for an open, plain server (``--no-auth``, ``--no-tls``). Relative paths are relative to the file.

**Which context.** ``--context FILE`` (the CLI) or ``Client.from_context(FILE)``, else ``$OPSCHED_CONTEXT``,
else ``<data dir>/context.json`` if it exists (``--data-dir``, default ``.opsched``). A file named by the first
two must exist.

**Each item, the first source that gives it wins** (as with the nats CLI: flags, then the environment, then the
context)::

    URL   --nats / url=            $NATS_URL                 the context's url   nats://127.0.0.1:4222
    CA    --nats-ca / ca_file=     $OPSCHED_NATS_CA          the context's ca    <data dir>/tls/ca.pem if it exists
    user  credentials=             $OPSCHED_NATS_USER with   the context's user  none (an open server)
                                   $OPSCHED_NATS_PASSWORD_FILE   with its password_file or creds
                                   or $OPSCHED_NATS_CREDS

``$OPSCHED_NATS_USER`` alone picks another user of the same `opsched up`: its password file next to the
context's (``<data dir>/auth/<user>.password``); without a context password file, that user with no password.

**The component library** a polyaxonfile's ``hubRef`` reads from (``hub_folder``), the first source that gives it::

    hub   --hub DIR                $OPSCHED_HUB              the context's hub   none (a hubRef is refused)

``hub`` is a folder (relative to the context file); `opsched up` writes none, a context file of yours may."""
from __future__ import annotations

import json
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from opsched.bus.credentials import Credentials, CredentialsError

CONTEXT_ENV = "OPSCHED_CONTEXT"
URL_ENV, CA_ENV = "NATS_URL", "OPSCHED_NATS_CA"
USER_ENV, PASSWORD_FILE_ENV, CREDS_ENV = "OPSCHED_NATS_USER", "OPSCHED_NATS_PASSWORD_FILE", "OPSCHED_NATS_CREDS"
DEFAULT_DATA_DIR = ".opsched"
FILE_NAME = "context.json"
DEFAULT_URL = "nats://127.0.0.1:4222"
HUB_ENV = "OPSCHED_HUB"
FIELDS = ("description", "url", "ca", "user", "password_file", "creds", "hub")
SECRETS = ("password", "token", "nkey", "seed")  # a context names files; it never holds a secret


class ContextError(ValueError):
    """A context file that is missing (where named), unreadable or malformed; the message names the file."""


@dataclass(frozen=True)
class Context:
    """A context file's content (paths absolute)."""

    url: str | None = None
    ca: Path | None = None
    user: str | None = None
    password_file: Path | None = None
    creds: Path | None = None
    description: str = ""
    hub: Path | None = None  # the component library of hubRef


@dataclass(frozen=True)
class Target:
    """What a client connects with: ``Client.connect(url, credentials=..., ca_file=...)``."""

    url: str
    ca_file: Path | None
    credentials: Credentials | None
    context: Path | None = None  # the context file read, if any


def default_path(data_dir: Path | str = DEFAULT_DATA_DIR) -> Path:
    return Path(data_dir) / FILE_NAME


def write(path: Path, *, url: str, ca: Path | None, user: str | None, password_file: Path | None,
          creds: Path | None = None, description: str = "", hub: Path | None = None) -> Path:
    """Write a context file (0600, replaced atomically) naming absolute paths; returns ``path``."""
    body = {"description": description, "url": url, "ca": _absolute(ca), "user": user,
            "password_file": _absolute(password_file), "creds": _absolute(creds), "hub": _absolute(hub)}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(body, indent=2) + "\n")
    os.chmod(partial, 0o600)
    os.replace(partial, path)
    return path


def _absolute(path: Path | None) -> str | None:
    return str(Path(path).resolve()) if path is not None else None


def read(path: Path) -> Context:
    """The context in ``path``; ``ContextError`` naming the file and what is wrong."""
    try:
        body = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ContextError(f"context {path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise ContextError(f"context {path}: not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise ContextError(f"context {path}: expected a JSON object")
    secrets = sorted(k for k in body if k in SECRETS)
    if secrets:
        raise ContextError(f"context {path}: holds {', '.join(secrets)}; a context names files only "
                           "(password_file, creds), never a secret")
    unknown = sorted(k for k in body if k not in FIELDS)
    if unknown:
        raise ContextError(f"context {path}: unknown field(s) {', '.join(unknown)} (known: {', '.join(FIELDS)})")
    for key, value in body.items():
        if value is not None and not isinstance(value, str):
            raise ContextError(f"context {path}: {key} must be a string or null")
    base = Path(path).resolve().parent

    def file(key: str) -> Path | None:
        return base / body[key] if body.get(key) else None  # an absolute path stays as it is
    return Context(url=body.get("url") or None, ca=file("ca"), user=body.get("user") or None,
                   password_file=file("password_file"), creds=file("creds"),
                   description=body.get("description") or "", hub=file("hub"))


def find(named: Path | str | None = None, data_dir: Path | str = DEFAULT_DATA_DIR,
         env: dict[str, str] | None = None) -> tuple[Path | None, Context | None]:
    """The context file to read (``named``, else ``$OPSCHED_CONTEXT``, else the data dir's if it exists) and its
    content; (None, None) when there is none."""
    env = dict(os.environ) if env is None else env
    for source, given in (("--context", named), (f"${CONTEXT_ENV}", env.get(CONTEXT_ENV))):
        if given:
            path = Path(given)
            if not path.is_file():
                raise ContextError(f"{source}: no context file at {path} (is `opsched up` running?)")
            return path, read(path)
    path = default_path(data_dir)
    return (path, read(path)) if path.is_file() else (None, None)


def resolve(*, url: str | None = None, ca_file: Path | str | None = None, credentials: Credentials | None = None,
            context: Path | str | None = None, data_dir: Path | str = DEFAULT_DATA_DIR,
            env: dict[str, str] | None = None) -> Target:
    """Where to connect and as whom, by the precedence of this module's docstring: ``url``, ``ca_file`` and
    ``credentials`` are the explicit ones (flags, arguments), ``context`` a context file named explicitly.
    Raises ``ContextError`` (the context), ``CredentialsError`` (a password or creds file that cannot be
    used) and ``ValueError`` (a CA named that is missing or no certificate), each naming its source."""
    env = dict(os.environ) if env is None else env
    path, found = find(context, data_dir, env)
    where = f"context {path}"
    target_url = url or env.get(URL_ENV) or (found.url if found else None) or DEFAULT_URL
    return Target(url=target_url, ca_file=_ca(ca_file, env, found, where, data_dir),
                  credentials=credentials if credentials is not None else _credentials(env, found, where),
                  context=path)


def hub_folder(explicit: Path | str | None = None, *, context: Path | str | None = None,
               data_dir: Path | str = DEFAULT_DATA_DIR, env: dict[str, str] | None = None
               ) -> tuple[Path | None, str, str]:
    """The component library ``hubRef`` reads from, by this module's precedence: (folder, where it was set, why there
    is none). A context that cannot be read is no error here (only a hubRef needs it): it is why there is none."""
    env = dict(os.environ) if env is None else env
    if explicit:
        return Path(explicit), "--hub", ""
    if env.get(HUB_ENV):
        return Path(env[HUB_ENV]), f"${HUB_ENV}", ""
    try:
        path, found = find(context, data_dir, env)
    except ContextError as exc:
        return None, "", str(exc)
    if found is not None and found.hub is not None:
        return found.hub, f"context {path} (hub)", ""
    return None, "", ""


def _ca(explicit: Path | str | None, env: dict[str, str], found: Context | None, where: str,
        data_dir: Path | str) -> Path | None:
    for source, named in (("--nats-ca", explicit), (f"${CA_ENV}", env.get(CA_ENV)),
                          (f"{where} (ca)", found.ca if found else None)):
        if named:
            return usable_ca(Path(named), source)
    generated = Path(data_dir) / "tls" / "ca.pem"
    return generated if generated.exists() else None


def usable_ca(ca: Path, source: str) -> Path:
    """``ca`` if it is a CA certificate file; ``ValueError`` naming ``source`` otherwise."""
    from opsched.bus.connecting import client_context

    if not ca.is_file():
        raise ValueError(f"{source}: no CA certificate file at {ca}")
    try:
        client_context(ca)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{source}: {ca} is not a usable CA certificate ({exc})") from None
    return ca


def _credentials(env: dict[str, str], found: Context | None, where: str) -> Credentials | None:
    user = env.get(USER_ENV) or None
    password, creds = env.get(PASSWORD_FILE_ENV), env.get(CREDS_ENV)
    if password or creds:
        return Credentials.of(user, Path(password) if password else None, Path(creds) if creds else None)
    if found is None or (found.user is None and found.password_file is None and found.creds is None):
        return Credentials.of(user) if user else None
    if user and user != found.user:  # another user of the same `opsched up`: its password file beside
        if found.password_file is None:
            return Credentials.of(user)
        return _of(user, found.password_file.parent / f"{user}.password", None, where)
    return _of(found.user, found.password_file, found.creds, where)


def _of(user: str | None, password_file: Path | None, creds: Path | None, where: str) -> Credentials:
    if (password_file or creds) and not user:
        raise CredentialsError(f"{where}: names a password_file or creds but no user")
    for key, file in (("password_file", password_file), ("creds", creds)):
        if file is not None and not file.is_file():
            raise CredentialsError(f"{where}: its {key} {file} does not exist")
    try:
        return Credentials.of(user, password_file, creds)
    except CredentialsError as exc:  # an empty or unreadable file, a user that is no token
        raise CredentialsError(f"{where}: {exc}") from None
