"""The fuzz suite's hypothesis settings: deterministic (``derandomize``, no example database), a fixed
number of examples per property, no per-example deadline (a first example pays for imports and a
fold's warm-up; the suite's time is bounded by the example counts, about a minute in all).

``too_slow`` is suppressed: the strategies draw whole wire messages (an op spec with its containers,
replica groups and environment), which hypothesis reckons slow to generate although each draw takes a
few milliseconds; ``data_too_large`` likewise, for the mutated documents holding 200 kB strings.

A failure is reported as found, not shrunk: shrinking a whole op stream took minutes, past the suite's
budget. ``OPSCHED_FUZZ_SHRINK=1`` loads the same profile with shrinking, to minimise a failure by hand."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

SHRINK = os.environ.get("OPSCHED_FUZZ_SHRINK") == "1"
settings.register_profile(
    "opsched-fuzz", derandomize=True, database=None, max_examples=100, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else []),
)
settings.load_profile("opsched-fuzz")
