"""The connections file the admin gives the notifier alone (secrets stay off the bus).

``connections: [{name, kind: webhook|slack|cloudevents, url, secretFile?, headers?}]`` and
``subscriptions: [{queues: [q...] | all, on: [trigger...], connections: [name...]}]``. Validated with
pydantic: an unknown kind, field, trigger or connection is refused naming it; urls are http(s) only."""
from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from opsched.services.notifier.triggers import SUBSCRIBABLE

Kind = Literal["webhook", "slack", "cloudevents"]


class ConnectionsError(ValueError):
    """The connections file is not valid; the message names the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Connection(_Model):
    name: str = Field(min_length=1, pattern=r"^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$")
    kind: Kind
    url: str
    secret_file: Path | None = Field(default=None, alias="secretFile")
    headers: dict[str, str] = {}

    @field_validator("url")
    @classmethod
    def _http_only(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"url must be an http(s) URL with a host, not {parts.scheme or 'no'} scheme")
        return url

    @model_validator(mode="after")
    def _secret_for_webhook(self) -> Connection:
        if self.kind == "webhook" and self.secret_file is None:
            raise ValueError(f"connection {self.name!r}: a webhook needs secretFile (its signing secret)")
        return self

    def secret(self) -> bytes:
        """The signing secret, read from its file (trailing newline stripped)."""
        if self.secret_file is None:
            return b""
        return self.secret_file.read_bytes().rstrip(b"\r\n")


class Subscription(_Model):
    queues: list[str] | Literal["all"] = "all"
    on: list[str] = Field(min_length=1)
    connections: list[str] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: object) -> object:
        # YAML 1.1 (PyYAML) reads a bare ``on:`` key as the boolean true: it means "on"
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data

    @field_validator("on")
    @classmethod
    def _known_triggers(cls, on: list[str]) -> list[str]:
        unknown = [t for t in on if t not in SUBSCRIBABLE]
        if unknown:
            raise ValueError(f"unknown trigger {unknown[0]!r}; one of {', '.join(sorted(SUBSCRIBABLE))}")
        return on

    def covers(self, queue: str) -> bool:
        return self.queues == "all" or queue in self.queues


class ConnectionsFile(_Model):
    connections: list[Connection] = []
    subscriptions: list[Subscription] = []

    @model_validator(mode="after")
    def _names(self) -> ConnectionsFile:
        seen: set[str] = set()
        for c in self.connections:
            if c.name in seen:
                raise ValueError(f"connection {c.name!r} is declared twice")
            seen.add(c.name)
        for i, s in enumerate(self.subscriptions):
            for name in s.connections:
                if name not in seen:
                    raise ValueError(f"subscriptions[{i}].connections: unknown connection {name!r}")
        return self

    def by_name(self) -> dict[str, Connection]:
        return {c.name: c for c in self.connections}


def parse(data: object) -> ConnectionsFile:
    try:
        return ConnectionsFile.model_validate(data if data is not None else {})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConnectionsError(f"{where}: {first['msg']}" if where else first["msg"]) from None


def load(path: Path) -> ConnectionsFile:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConnectionsError(f"connections file {path.name}: {e}") from None
    return parse(data)
