"""A secured test NATS: the configuration `opsched up` runs by default, for every test that starts services.
nats-server takes TLS connections only (a CA and server certificate made by ``opsched.tls.ensure_tls``) and
knows the users of ``opsched.natsauth`` (one per service, ``admin``, and any a test adds), each allowed what
``proto.permissions`` gives it; services connect as their own users, clients as ``admin`` unless a test names
another. The tests' own connection is ``HARNESS`` (``tests.builders.identities``): a user that exists only here,
allowed every subject, so that a test can still forge events and read everything.

    nats = SecureNats(tmp_path).start()
    bus = await nats.connect(nats.url, "opsched-cost")        # as the cost service, as its runner connects
    harness = await nats.connect(nats.url, "test", HARNESS)   # the test's own
    client = await nats.client()                              # the SDK, as admin
    env = nats.env(identities.service("cost"))                # a service or the CLI in a process of its own

``open_server`` is a plain, open one (``--no-tls --no-auth``): only for tests about that configuration."""
from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opsched import natsauth
from opsched.bus.credentials import Credentials
from opsched.natsserver import PICK, NatsCluster, NatsServer
from opsched.tls import TlsFiles, ensure_tls
from tests.builders import identities
from tests.builders.identities import HARNESS, Identity


def _harness_entry(auth_dir: Path) -> str:
    """The harness's user in the services' account (its password in ``auth_dir`` as the others')."""
    path = natsauth.password_file(auth_dir, HARNESS.user)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    allowed = json.dumps(list(identities.EVERYTHING.publish))
    return (f"      {{user: {json.dumps(HARNESS.user)}, password: {json.dumps(path.read_text().strip())}, "
            f"permissions: {{publish: {{allow: {allowed}}}, subscribe: {{allow: {allowed}}}}}}}")


def authorization(auth_dir: Path, users: Sequence[natsauth.User] = (), agents: tuple[str, ...] = ()) -> str:
    """``opsched up``'s accounts for its services, ``admin`` and ``users``, and the harness's user (among the
    services: it forges their events and reads their streams)."""
    return natsauth.accounts_block(auth_dir, natsauth.users_of(list(users)), agents,
                                   more_services=(_harness_entry(auth_dir),))


class SecureNats:
    """A nats-server with TLS and the generated users (``nodes`` > 1: a JetStream cluster of them, each node
    configured so; ``server`` is the ``NatsServer`` or ``NatsCluster``), and connections to it as a given
    identity."""

    def __init__(self, root: Path, users: Sequence[natsauth.User] | None = None, agents: tuple[str, ...] = (),
                 port: int | None = None, nodes: int = 1, config: str = "") -> None:
        """``users``: client users besides ``admin`` (default: ``identities.USERS``); ``agents``: the named agents (no client may create their
        dispatchers' durables); ``config``: more of nats-server's configuration (``max_payload: 65536``)."""
        self.root = Path(root)
        self.tls: TlsFiles = ensure_tls(self.root / "tls")
        self.auth_dir = self.root / "auth"
        users = [natsauth.User(n, role) for n, role in identities.USERS.items()] if users is None else users
        self.users = {u.name: u for u in natsauth.users_of(list(users))}
        block = authorization(self.auth_dir, users, agents) + config
        self.replicas = min(nodes, 3)  # of the streams the services and the harness create
        self.server: NatsServer | NatsCluster = (
            NatsCluster(self.root / "nats-cluster", n=nodes, base_port=port, authorization=block, tls=self.tls)
            if nodes > 1 else NatsServer(self.root / "nats", port=port, tls=self.tls, authorization=block,
                                         monitor_port=PICK))  # the tests read it (test_tls)

    @property
    def url(self) -> str:
        """The client URL (a cluster's: every node's, comma-separated)."""
        return self.server.urls if isinstance(self.server, NatsCluster) else self.server.url

    @property
    def ca(self) -> Path:
        return self.tls.ca

    def start(self) -> "SecureNats":
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def discard(self) -> None:
        """A fixture's end: kill -9 (every node). The store goes with the test's directory, so nats-server's
        orderly shutdown (about 0.17 s with the streams) is not waited for."""
        for node in self.server.nodes if isinstance(self.server, NatsCluster) else [self.server]:
            node.kill()

    def credentials(self, identity: Identity) -> Credentials:
        return natsauth.credentials(self.auth_dir, identity.user)

    def identity(self, user: str) -> Identity:
        """One of this server's users (a service, ``admin``, or a user the test added) by name."""
        if user == HARNESS.user:
            return HARNESS
        known = self.users[user]
        return identities.service(user) if known.role == natsauth.SERVICE else identities.client(user, known.role)

    async def connect(self, url: str | None = None, name: str = "test", identity: Identity | None = None,
                      **options: Any):
        """A ``Bus`` named ``name`` as ``identity`` (default: by its name, ``identities.of_connection``: the
        service of ``opsched-<service>``, else ``admin``), over TLS verified with this server's CA. The signature
        of the runner's ``connect(url, name)``."""
        from opsched.bus.bus import Bus

        identity = identity or identities.of_connection(name)
        options.setdefault("replicas", self.replicas)
        return await Bus.connect(url or self.url, name, credentials=self.credentials(identity), tls_ca_file=self.ca,
                                 **options)

    async def client(self, identity: Identity = identities.ADMIN, name: str = "test-client"):
        """The SDK's ``Client``, as ``identity`` (``admin`` unless told)."""
        from opsched.client import Client

        return await Client.connect(self.url, name, self.credentials(identity), ca_file=self.ca)

    def env(self, identity: Identity) -> dict[str, str]:
        """What a process of its own (a service, the CLI) needs in its environment to connect as ``identity``."""
        return {"NATS_URL": self.url, "OPSCHED_NATS_CA": str(self.ca), "OPSCHED_NATS_USER": identity.user,
                "OPSCHED_NATS_PASSWORD_FILE": str(natsauth.password_file(self.auth_dir, identity.user))}

    def settings(self, **overrides: Any):
        """Services' settings for this server (each service still connects as its own user: pass ``connect``)."""
        from opsched.services.runtime.settings import Settings

        return Settings(**{"nats_url": self.url, "nats_ca_file": self.ca, "stream_replicas": self.replicas,
                           # json, as deployed: the console renderer cost a third of a stack test's CPU
                           "log_format": "json", "env_key_file": self.env_key, **overrides})

    @property
    def env_key(self) -> Path:
        """The key admission seals env values with and the dispatcher opens them with (as ``opsched up`` has)."""
        from opsched.services.runtime.sealing import write_key

        return write_key(self.auth_dir / "env.key")

    def opened(self, spec: Any) -> Any:
        """``spec`` as its submitter wrote it: its sealed env values opened (``services.runtime.sealing``)."""
        from opsched.services.runtime.sealing import Sealer

        return Sealer.of(self.env_key).unseal(spec)


def open_server(root: Path) -> NatsServer:
    """A plain nats-server anyone may use as ``anonymous`` (``opsched up --no-tls --no-auth``)."""
    return NatsServer(Path(root))
