"""One delivery attempt: POST a sink's request with a timeout, never following a redirect.

The outcome is a status code (2xx delivered; anything else, or an error, to be retried) — what the
attempt record shows."""
from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from dataclasses import dataclass

from opsched.services.notifier.sinks import Request


@dataclass(frozen=True)
class Outcome:
    status: int | None  # the HTTP status, None when no answer
    error: str = ""

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a 3xx is an answer, not a place to go


_OPENER = urllib.request.build_opener(_NoRedirects)


def post_blocking(req: Request, timeout_s: float) -> Outcome:
    r = urllib.request.Request(req.url, data=req.body, headers=req.headers, method="POST")
    try:
        with _OPENER.open(r, timeout=timeout_s) as resp:
            return Outcome(resp.status)
    except urllib.error.HTTPError as e:
        return Outcome(e.code, e.reason if isinstance(e.reason, str) else str(e.reason))
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return Outcome(None, str(reason) or type(reason).__name__)


async def post(req: Request, timeout_s: float) -> Outcome:
    """The attempt off the event loop (a hanging receiver never blocks the service's other work)."""
    return await asyncio.to_thread(post_blocking, req, timeout_s)
