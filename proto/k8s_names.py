"""The syntax of names on the wire: Kubernetes' own (DNS labels and subdomains, label and annotation keys
and values) and opsched's (op names and projects, queues).

Each check returns ``None`` when the value is valid, else why not (without the field: the caller names it).
"""
from __future__ import annotations

import re

from opsched.proto.limits import (
    MAX_LABEL_NAME_CHARS,
    MAX_LABEL_PREFIX_CHARS,
    MAX_LABEL_VALUE_CHARS,
    MAX_NAME_CHARS,
)
from opsched.proto.subjects import valid_token
from opsched.proto.template_markers import has_template

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")  # a key's name part, a label value
_OP_NAME = re.compile(r"^[-a-zA-Z0-9_]+$")  # Polyaxon's names (operation, component, project)
MAX_SUBDOMAIN_CHARS = 253


def dns_label(value: str, most: int = MAX_NAME_CHARS) -> str | None:
    if len(value) > most:
        return f"{value[:80]!r} is longer than {most} characters"
    if not _DNS_LABEL.match(value):
        return (f"{value!r} is not a DNS label (lowercase letters, digits and '-', starting and ending with a "
                "letter or digit)")
    return None


def dns_subdomain(value: str) -> str | None:
    if len(value) > MAX_SUBDOMAIN_CHARS:
        return f"{value[:80]!r} is longer than {MAX_SUBDOMAIN_CHARS} characters"
    if not _DNS_SUBDOMAIN.match(value):
        return f"{value!r} is not a DNS subdomain (DNS labels joined by '.')"
    return None


def op_name(value: str) -> str | None:
    """An op's name or project: Polyaxon's names (letters, digits, '-' and '_'), at most ``MAX_NAME_CHARS``."""
    if not value or len(value) > MAX_NAME_CHARS:
        return f"{value[:80]!r} must be 1 to {MAX_NAME_CHARS} characters"
    if not _OP_NAME.match(value):
        return f"{value!r} may contain only letters, digits, '-' and '_'"
    return None


def queue(value: str) -> str | None:
    """A queue as an op asks for it: a name (a subject token), ``agent/name``, or a template admission renders."""
    if has_template(value):
        return None
    name = value.rpartition("/")[2]
    if not valid_token(name) or value.count("/") > 1:
        return (f"{value[:80]!r} is not a queue name (lowercase letters, digits and '-', at most {MAX_NAME_CHARS}, "
                "optionally after 'agent/')")
    return None


def agent(value: str) -> str | None:
    """An agent's name: a subject token (it is one in ``ops.admitted.<agent>.<id>``); "": the default agent."""
    if value and not valid_token(value):
        return f"{value[:80]!r} is not an agent name (lowercase letters, digits and '-', at most {MAX_NAME_CHARS})"
    return None


def qualified_key(key: str) -> str | None:
    """A label or annotation key (also a resource or node-selector key): ``[prefix/]name``, the prefix a DNS
    subdomain of at most 253 characters, the name at most 63 alphanumerics, '-', '_' or '.'."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or dns_subdomain(prefix) is not None or len(prefix) > MAX_LABEL_PREFIX_CHARS):
        return f"key {key[:80]!r}: its prefix must be a DNS subdomain of at most {MAX_LABEL_PREFIX_CHARS} characters"
    if len(name) > MAX_LABEL_NAME_CHARS or not _QUALIFIED_NAME.match(name):
        return (f"key {key[:80]!r}: its name must be 1 to {MAX_LABEL_NAME_CHARS} letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit")
    return None


def label_value(value: str) -> str | None:
    if len(value) > MAX_LABEL_VALUE_CHARS:
        return f"value {value[:80]!r} is longer than {MAX_LABEL_VALUE_CHARS} characters"
    if value and not _QUALIFIED_NAME.match(value):
        return (f"value {value!r} must be empty or letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit")
    return None
