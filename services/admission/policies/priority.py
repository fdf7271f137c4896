"""An op's priority: its named priority class, else its own number, else its queue's default class;
and the most a queue allows (``maxPriorityClass``: that class's value; unset, the highest class of the
configuration, else ``MAX_PRIORITY``), so neither a raw number nor a class outranks what its queue permits."""
from __future__ import annotations

from opsched.proto.limits import MAX_PRIORITY
from opsched.proto.reasons import Refusal
from opsched.proto.spec import OpSpec
from opsched.services.admission.model.queues import Book

TOO_HIGH = Refusal.PRIORITY_TOO_HIGH  # the reason code of an op rejected at submit for a priority above its queue's


class UnknownPriorityClass(ValueError):
    pass


class PriorityTooHigh(ValueError):
    pass


def priority_of(spec: OpSpec, queue: str, book: Book) -> int:
    """The op's priority; raises ``UnknownPriorityClass``, or ``PriorityTooHigh`` for a class or number
    the op names above its queue's maximum."""
    if spec.priority_class is not None:
        if spec.priority_class not in book.priority_classes:
            known = ", ".join(sorted(book.priority_classes)) or "none defined"
            raise UnknownPriorityClass(f"unknown priority class {spec.priority_class!r}; known: {known}")
        value = book.priority_classes[spec.priority_class]
        _within(f"priorityClass {spec.priority_class!r} (priority {value})", value, queue, book)
        return value
    if spec.priority:
        _within(f"priority {spec.priority}", spec.priority, queue, book)
        return spec.priority
    default = book.queues[queue].default_priority_class
    return book.priority_classes.get(default, 0) if default else 0


def max_priority(queue: str, book: Book) -> tuple[int, str]:
    """The highest priority an op of ``queue`` may have, and where that bound comes from."""
    named = book.queues[queue].max_priority_class
    if named is not None and named in book.priority_classes:
        return book.priority_classes[named], f"its maxPriorityClass {named!r}"
    if book.priority_classes:
        top = max(book.priority_classes, key=lambda name: (book.priority_classes[name], name))
        return book.priority_classes[top], f"the highest priority class {top!r}; set maxPriorityClass to change it"
    return MAX_PRIORITY, "the largest priority allowed"


def _within(what: str, value: int, queue: str, book: Book) -> None:
    bound, source = max_priority(queue, book)
    if value > bound:
        raise PriorityTooHigh(f"{what} is above queue {queue}'s maximum priority {bound} ({source})")
