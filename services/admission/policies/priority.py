"""An op's priority: its named priority class, else its own number, else its queue's default class."""
from __future__ import annotations

from proto.spec import OpSpec
from services.admission.queues import Book


class UnknownPriorityClass(ValueError):
    pass


def priority_of(spec: OpSpec, queue: str, book: Book) -> int:
    if spec.priority_class is not None:
        if spec.priority_class not in book.priority_classes:
            known = ", ".join(sorted(book.priority_classes)) or "none defined"
            raise UnknownPriorityClass(f"unknown priority class {spec.priority_class!r}; known: {known}")
        return book.priority_classes[spec.priority_class]
    if spec.priority:
        return spec.priority
    default = book.queues[queue].default_priority_class
    return book.priority_classes.get(default, 0) if default else 0
