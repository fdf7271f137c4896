"""Queue configuration (YAML), validated at the edge with field-level errors."""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proto.subjects import valid_token


class QueueConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    concurrency: int = Field(10, ge=1, description="max operations admitted and not yet finished")
    priority: int = Field(0, description="queue-level priority: orders hand-off between queues")
    namespace: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not valid_token(v):
            raise ValueError("queue names are lowercase letters, digits and dashes (a DNS label)")
        return v


class QueuesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    queues: list[QueueConfig] = Field(default_factory=lambda: [QueueConfig(name="default")])
    default_queue: str = Field("default", alias="defaultQueue")

    @model_validator(mode="after")
    def _consistent(self) -> "QueuesConfig":
        names = [q.name for q in self.queues]
        if len(set(names)) != len(names):
            raise ValueError(f"queue names must be unique: {names}")
        if self.default_queue not in names:
            raise ValueError(f"defaultQueue {self.default_queue!r} is not one of the queues {names}")
        return self

    def get(self, name: str) -> QueueConfig | None:
        return next((q for q in self.queues if q.name == name), None)

    @property
    def names(self) -> list[str]:
        return [q.name for q in self.queues]


class QueuesConfigError(ValueError):
    pass


def load_queues(path: Path | None) -> QueuesConfig:
    if path is None:
        return QueuesConfig()
    try:
        return QueuesConfig.model_validate(yaml.safe_load(path.read_text()) or {})
    except (yaml.YAMLError, OSError) as exc:
        raise QueuesConfigError(f"{path}: {exc}") from None
    except ValidationError as exc:
        lines = [f"  {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise QueuesConfigError(f"{path}: invalid queue configuration\n" + "\n".join(lines)) from None
