"""Who may act on the ops of which project: the ``access`` section of the queue configuration.

The NATS server decides which verbs a user may send at all (its role: ``proto.permissions``); admission
decides, by this rule, whether the requester (``proto.subjects.requester_of``) may submit, stop, restart, copy
or resume an op of a given project. Approvals are the approver role's, for every project.

```yaml
access:
  admins: [admin]                 # act on every project's ops (default: the `admin` user of `opsched up`)
  groups: {vision-team: [alice, carol]}
  projects:
    - {name: vision, users: [dave], groups: [vision-team]}
```
With no ``projects`` listed a user acts on its own ops only (those it submitted: the op's ``requested_by``), the
admins on all; on an open server every client is ``anonymous`` and acts on every op, as before. Once projects are
listed, the project rules decide (a member acts on every op of its projects) and an op of a project not listed is
the admins' only."""
from __future__ import annotations

import msgspec

from opsched.proto import subjects
from opsched.proto.permissions import SERVICES  # a service's own commands (admission's schedule runs)
from opsched.proto.reasons import Refusal
from opsched.proto.spec import Wire

NOT_ALLOWED = Refusal.NOT_ALLOWED


class Project(Wire, kw_only=True, forbid_unknown_fields=True):
    name: str
    users: list[str] = []
    groups: list[str] = []


class Access(Wire, kw_only=True, forbid_unknown_fields=True):
    admins: list[str] = msgspec.field(default_factory=lambda: ["admin"])
    groups: dict[str, list[str]] = {}  # group -> its users
    projects: list[Project] = []


def requester(subject: str, claimed: str) -> str:
    """Who sent a command on ``subject``: its user token (``subjects.requester_of``), whatever the payload's
    ``requested_by`` (``claimed``) says. On an open server (user ``anonymous``: nothing is authenticated, and
    no authenticated user may publish ``cmd.anonymous.``) the payload's name is kept as an unverified label."""
    user = subjects.requester_of(subject)
    return (claimed or user) if user == subjects.ANONYMOUS else user


def acts_on_all(user: str, access: Access) -> bool:
    """Whether ``user`` may act on every op: an admin, a service, or anyone on an open server (``anonymous``)."""
    return user == subjects.ANONYMOUS or user in SERVICES or user in access.admins


def refusal(user: str, project: str, access: Access, owner: str | None = None) -> str | None:
    """Why ``user`` may not act on an op of ``project`` submitted by ``owner`` (None: it may). ``owner`` None: a
    new op (a submit), its requester's own; "": an op whose submitter was not recorded (the admins' only)."""
    if acts_on_all(user, access):
        return None
    if not access.projects:
        if owner is None or owner == user:
            return None
        return (f"user {user!r} may act only on its own ops, and this one was submitted by "
                f"{repr(owner) if owner else 'no recorded user'} (the queue configuration lists no "
                f"access.projects: a submitter acts on its own ops, access.admins on all)")
    listed = next((p for p in access.projects if p.name == project), None)
    if listed is None:
        return (f"user {user!r} may not act on ops of project {project!r}: the queue configuration's "
                f"access.projects does not list it (only access.admins may)")
    if user in listed.users or any(user in access.groups.get(group, []) for group in listed.groups):
        return None
    return (f"user {user!r} is not a member of project {project!r} (access.projects: users "
            f"{listed.users or '[]'}, groups {listed.groups or '[]'})")


def problems(access: Access) -> list[str]:
    """What is wrong in an ``access`` section (a project listed twice, a group no one defined)."""
    out: list[str] = []
    names = [p.name for p in access.projects]
    out += [f"access.projects: {name!r} is listed twice" for name in sorted({n for n in names if names.count(n) > 1})]
    for project in access.projects:
        out += [f"access.projects[{project.name}].groups: unknown group {group!r} (access.groups defines "
                f"{sorted(access.groups) or 'none'})" for group in project.groups if group not in access.groups]
    return out
