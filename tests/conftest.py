"""Shared pytest configuration: Hypothesis profiles.

* ``dev`` (default): random examples, a modest count, so a local run stays fast.
* ``ci`` (selected when the ``CI`` environment variable is set): derandomized, so a CI failure
  reproduces exactly; no deadline (shared CI machines are noisy).

Select one explicitly with ``HYPOTHESIS_PROFILE=<name>``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "dev",
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=50,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
_default_profile = "ci" if os.environ.get("CI") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or _default_profile)
