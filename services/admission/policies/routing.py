"""Which queue an op goes to: the one it names, else its project's default, else the global default."""
from __future__ import annotations

from opsched.proto.spec import OpSpec
from opsched.services.admission.model.queues import Book


def route(spec: OpSpec, book: Book) -> str:
    if spec.queue:
        return spec.queue
    return book.config.project_queues.get(spec.project, book.default_queue)
