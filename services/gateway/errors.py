"""The gateway's answers to bad requests: ``{"error": reason, "message": ..., "field": path}`` with a 4xx, from
what the CLI prints for the same input (the polyaxonfile loader's ``SpecError``, ``codec.Refused``, admission's
``CommandRefused`` verdicts). Never a 500 for bad input."""
from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.field = status, error, message, field
        self.headers, self.extra = headers or {}, extra

    def response(self) -> JSONResponse:
        body = {"error": self.error, "message": self.message, "field": self.field, **self.extra}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


ERROR_SCHEMA = {"type": "object", "required": ["error", "message"],
                "properties": {"error": {"type": "string"}, "message": {"type": "string"},
                               "field": {"type": ["string", "null"]}}}
