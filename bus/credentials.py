"""Who a connection is: the NATS user (the ``cmd.<user>.`` token its commands go on) and what proves it to the
server — a password (read from a file), or a NATS credentials file (JWT + nkey seed: an existing NATS
account/JWT setup). Without either the server is open and the user is ``ANONYMOUS``."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsched.proto import subjects


class CredentialsError(ValueError):
    """The credentials named in the settings cannot be used (a missing or empty file, no user)."""


@dataclass(frozen=True)
class Credentials:
    user: str = subjects.ANONYMOUS
    password: str | None = None
    creds_file: Path | None = None  # a NATS .creds file; the server knows the user by its JWT

    def connect_options(self) -> dict[str, Any]:
        """The keyword arguments of ``nats.connect`` that authenticate."""
        if self.creds_file is not None:
            return {"user_credentials": str(self.creds_file)}
        if self.password is not None:
            return {"user": self.user, "password": self.password}
        return {}

    @classmethod
    def of(cls, user: str | None, password_file: Path | None = None,
           creds_file: Path | None = None) -> "Credentials":
        """From the settings: ``user`` (``OPSCHED_NATS_USER``) with ``password_file``
        (``OPSCHED_NATS_PASSWORD_FILE``) or ``creds_file`` (``OPSCHED_NATS_CREDS``)."""
        if password_file is None and creds_file is None:
            return cls(user or subjects.ANONYMOUS)
        if not user:
            raise CredentialsError("OPSCHED_NATS_USER must name the user whose password or credentials file is "
                                   "given (it is the cmd.<user>. token its commands go on)")
        if not subjects.valid_token(user):
            raise CredentialsError(f"OPSCHED_NATS_USER {user!r} must be lowercase letters, digits and dashes")
        if creds_file is not None:
            if not Path(creds_file).is_file():
                raise CredentialsError(f"OPSCHED_NATS_CREDS: no such file {creds_file}")
            return cls(user, creds_file=Path(creds_file))
        assert password_file is not None
        try:
            password = Path(password_file).read_text().strip()
        except OSError as exc:
            raise CredentialsError(f"OPSCHED_NATS_PASSWORD_FILE: cannot read {password_file}: {exc.strerror}") from None
        if not password:
            raise CredentialsError(f"OPSCHED_NATS_PASSWORD_FILE: {password_file} is empty")
        return cls(user, password=password)


def of_settings(settings: Any) -> Credentials:
    return Credentials.of(settings.nats_user, settings.nats_password_file, settings.nats_creds)
