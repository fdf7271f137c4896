"""Back-off before a retry: exponential in the number of the op's own failures, capped."""
from __future__ import annotations

from opsched.proto.queues import RetryBackoff


def retry_delay(backoff: RetryBackoff, retries_used: int, infrastructure: bool) -> float:
    if infrastructure:
        return min(backoff.max_seconds, backoff.base_seconds)
    n = max(1, retries_used)
    return min(backoff.max_seconds, backoff.base_seconds * backoff.factor ** (n - 1))
