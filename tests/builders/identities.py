"""Who a test connection is, and what it may publish: the in-memory bus (``tests.builders.bus``) and a secured
test nats-server (``tests.securebus``) take their permissions from the one source the generated nats-server
configuration uses, ``proto.permissions``:

- a service's connection (named ``opsched-<service>``, as the runner names them) is that service's user;
- any other connection is a client, ``admin`` unless a test names another user and role;
- ``HARNESS``, the tests' own connection that forges events and reads everything, is unrestricted: a test-only
  user, asked for by name, never a default (it exists in no configuration but the tests');
- ``OPEN``, anonymous and unrestricted, is what a server without authorization (``opsched up --no-auth``) gives
  every connection: unit tests of one component, and tests about the open server, use it."""
from __future__ import annotations

from dataclasses import dataclass

from opsched import natsauth
from opsched.proto import permissions, subjects
from tests.builders.streams import matches

EVERYTHING = permissions.Permissions(publish=(">",), subscribe=(">",))


@dataclass(frozen=True)
class Identity:
    """A NATS user (the ``cmd.<user>.`` token its commands go on) and its role: ``service`` (the user is the
    service), a client role (``proto.permissions.ROLES``), or ``harness``/``open`` (unrestricted, tests only)."""

    user: str
    role: str

    @property
    def permissions(self) -> permissions.Permissions:
        if self.role in (HARNESS_ROLE, OPEN_ROLE):
            return EVERYTHING
        return permissions.for_user(self.user, self.role)

    def may_publish(self, subject: str) -> bool:
        p = self.permissions
        return any(matches(allowed, subject) for allowed in p.publish) and not any(
            matches(denied, subject) for denied in p.deny)

    def may_subscribe(self, subject: str) -> bool:
        """Whether a subscription on ``subject`` (a pattern) is allowed: one allow-pattern covers it."""
        return any(covers(allowed, subject) for allowed in self.permissions.subscribe)


HARNESS_ROLE, OPEN_ROLE = "harness", "open"
# the client users a test may ask for by name, besides admin (a secured test nats-server knows them all)
USERS: dict[str, str] = {"ann": "submitter", "bob": "submitter", "alice": "approver", "ui": "viewer"}
HARNESS = Identity("test-harness", HARNESS_ROLE)  # the tests' own connection: forged events, reads (tests only)
OPEN = Identity(subjects.ANONYMOUS, OPEN_ROLE)  # an open server's every connection (``--no-auth``)
ADMIN = Identity(natsauth.ADMIN, "admin")  # a client's default, as the CLI of `opsched up` is


def service(name: str) -> Identity:
    permissions.service(name)  # raises on a name that is no service
    return Identity(name, natsauth.SERVICE)


def client(user: str = natsauth.ADMIN, role: str = "admin") -> Identity:
    permissions.client(role, user)  # raises on a user or role the configuration would refuse
    return Identity(user, role)


def user(name: str) -> Identity:
    """One of ``USERS`` (or ``admin``), with its role."""
    return ADMIN if name == natsauth.ADMIN else client(name, USERS[name])


def of_connection(name: str) -> Identity:
    """``opsched-<service>`` (the runner's connection names): that service; any other name: the admin client."""
    try:
        return service(natsauth.service_of(name))
    except ValueError:
        return ADMIN


def covers(pattern: str, subject: str) -> bool:
    """``pattern`` matches every subject that ``subject`` (itself perhaps a pattern) matches."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or have[i] == ">" or token not in ("*", have[i]):
            return False
    return len(want) == len(have)
