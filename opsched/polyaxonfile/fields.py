"""Field types and validators of the polyaxonfile models, and ``Model``, their base.

The models are pydantic models of the part of the Polyaxon polyaxonfile format (v1.1) that opsched
reads. Field names are Polyaxon's camelCase. Each model rejects keys it does not know
(``extra="forbid"``) except the keys listed in its ``ignored`` set: Polyaxon allows them, opsched
does not use them yet, so they are accepted and dropped. A key with an empty (null) value counts as
not set. The models are in ``models_container``, ``models_run``, ``models_operation``,
``models_schedule`` and ``models_matrix``; checks that span several fields (resources, inputs)
return problems with exact paths. ``convert`` turns the models into ``proto.spec.OpSpec``; the
package docstring documents the behaviour as a whole.
"""
from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.alias_generators import to_camel

from opsched.polyaxonfile.keys import SUPPORTED_VERSIONS
from opsched.proto.limits import MAX_LIST_ITEMS, MAX_NAME_CHARS
from opsched.proto.resources import QuantityError, parse_quantity
from opsched.proto.subjects import valid_token
from opsched.rules.templating import has_template

_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,%d}$" % MAX_NAME_CHARS)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_RESERVED_IO = frozenset({"globals", "params", "inputs", "outputs", "connections"})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


def _scalar_to_str(value: Any) -> Any:
    """YAML reads `nvidia.com/gpu: 1` or `value: 3` as numbers; Kubernetes wants strings."""
    if isinstance(value, bool):
        raise ValueError("expected a string, got a boolean (quote it: \"true\")")
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _quantity(value: str) -> str:
    if has_template(value):
        raise ValueError(f"{value!r}: a quantity is not rendered (resources are counted when the op is submitted, "
                         "before templates render); write the quantity")
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return value


def valid_name(value: str) -> bool:
    """Polyaxon names (operation, component, project): letters, digits, '-' and '_'."""
    return bool(_NAME.match(value))


def _name(value: str) -> str:
    if not valid_name(value):
        raise ValueError(f"invalid name {value!r}: use letters, digits, '-' and '_' (at most {MAX_NAME_CHARS})")
    return value


def normalize_queue(value: str) -> str:
    """``queue`` or ``agent/queue`` (both tokens; ``split_queue`` takes them apart). A templated queue
    (``{{ ... }}``) is kept as written: admission renders it, then routes."""
    if has_template(value):
        return value
    agent, slash, queue = value.rpartition("/")
    if slash and (not agent or "/" in agent):
        raise ValueError(f"invalid queue {value!r}: expected 'queue' or 'agent/queue'")
    if slash and not valid_token(agent):
        raise ValueError(f"invalid agent name {agent!r}: use lowercase letters, digits and '-' "
                         "(at most 63, starting with a letter or digit)")
    if not valid_token(queue):
        raise ValueError(f"invalid queue name {queue!r}: use lowercase letters, digits and '-' "
                         "(at most 63, starting with a letter or digit)")
    return value


def split_queue(value: str | None) -> tuple[str | None, str | None]:
    """``agent/queue`` -> (agent, queue); ``queue`` -> (None, queue); a templated queue stays whole."""
    if value is None or has_template(value) or "/" not in value:
        return None, value
    agent, _, queue = value.rpartition("/")
    return agent, queue


def env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"invalid env var name {value!r}: letters, digits and '_', not starting with a digit")
    return value


def not_reserved(value: str) -> str:
    if value in _RESERVED_IO:
        raise ValueError(f"{value!r} is reserved; use another input/output name")
    return value


def dns_label(value: str) -> str:
    if has_template(value):
        raise ValueError(f"{value!r}: a container's name is not rendered (it names the container in the pod); "
                         "write it")
    if not _DNS_LABEL.match(value):
        raise ValueError(f"invalid container name {value!r}: must be a DNS label (lowercase, '-')")
    return value


def _priority_class(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(f"invalid priorityClass {value!r}: must be a DNS label (lowercase "
                         "letters, digits and '-', at most 63, starting and ending with a "
                         "letter or digit)")
    return value


def _command(value: Any) -> Any:
    """A command string is split like a shell would (``sh -c "echo hi"`` → 3 items)."""
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split command string: {exc}") from None
    return value


def _args(value: Any) -> Any:
    """An args string is ONE argument, as in Polyaxon's ``command: [sh, -c]``, ``args: "..."``."""
    return [value] if isinstance(value, str) else value


def _tags(value: Any) -> Any:
    return [t.strip() for t in value.split(",") if t.strip()] if isinstance(value, str) else value


def _version(value: Any) -> Any:
    if isinstance(value, bool) or str(value) not in SUPPORTED_VERSIONS:
        raise ValueError(f"unsupported version {value!r}: opsched reads Polyaxon version 1.1")
    return 1.1


Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool), Field(allow_inf_nan=False)]
Str = Annotated[str, BeforeValidator(_scalar_to_str)]
NonEmpty = Annotated[str, Field(min_length=1)]
Quantity = Annotated[str, BeforeValidator(_scalar_to_str), AfterValidator(_quantity)]
Name = Annotated[str, AfterValidator(_name)]
Queue = Annotated[str, AfterValidator(normalize_queue)]
Command = Annotated[list[str], BeforeValidator(_command), Field(max_length=MAX_LIST_ITEMS)]
Args = Annotated[list[str], BeforeValidator(_args), Field(max_length=MAX_LIST_ITEMS)]
Tags = Annotated[list[str], BeforeValidator(_tags)]
Version = Annotated[float, BeforeValidator(_version)]
PriorityClass = Annotated[str, AfterValidator(_priority_class)]
EnvName = Annotated[str, AfterValidator(env_name)]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, frozen=True)
    ignored: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored(cls, data: Any) -> Any:
        """Drop ignored keys, and keys left empty (``environment:``), which mean "not set"."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in cls.ignored and v is not None}
        return data
