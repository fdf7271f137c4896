"""uvicorn serving inside a process's own event loop (the web view, the gateway): the process keeps its signals —
Ctrl-C stops `opsched ui`, SIGTERM drains `opsched up` and a service's runner — instead of uvicorn taking them."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn


class InLoopServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # signals stay the process's own
