"""The server's refusals of this connection's publishes (its permissions, ``proto.permissions``): NATS reports
them asynchronously (``-ERR 'Permissions Violation for Publish to "<subject>"'``) and the publish itself only
times out; ``Bus.publish_raw`` turns the next try of a refused subject into ``NotPermitted`` at once."""
from __future__ import annotations

import re

_VIOLATION = re.compile(r'permissions violation for publish to "([^"]+)"', re.IGNORECASE)


class NotPermitted(Exception):
    """The NATS server refused this user's publish to ``subject``: its role does not allow it (permanent)."""

    def __init__(self, user: str, subject: str) -> None:
        super().__init__(f"the NATS server refused user {user!r} publishing to {subject}: its role does not "
                         f"allow it (see docs/security.md)")
        self.user, self.subject = user, subject


class Refusals:
    def __init__(self) -> None:
        self.subjects: set[str] = set()

    def note(self, error: Exception) -> bool:
        """Remember the subject of a permissions violation; False: ``error`` is not one."""
        found = _VIOLATION.search(str(error))
        if found:
            self.subjects.add(found.group(1))
        return found is not None

    def check(self, user: str, subject: str) -> None:
        if subject in self.subjects:
            raise NotPermitted(user, subject)
