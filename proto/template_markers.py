"""Whether a text is a template: it holds a Jinja marker (``{{``, ``{%``, ``{#``). Apart from
``rules.templating`` so the contract's checks (``proto.spec_checks``) can tell without importing Jinja."""
from __future__ import annotations

MARKERS = ("{{", "{%", "{#")


def has_template(text: str | None) -> bool:
    return bool(text) and any(m in text for m in MARKERS)  # type: ignore[operator]
