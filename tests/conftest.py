"""Shared pytest configuration: Hypothesis profiles, and read-only kernel operands.

Every graph kernel runs on read-only views of its operands in every test
(``PYTFRT_READONLY_OPERANDS``, ``docs/config.md``; set here, before any test builds the runtime
table): a kernel that writes an input fails the test that reaches it
(``tests/robustness/test_robust_readonly.py``).  Child processes inherit it.

* ``dev`` (default): random examples, a modest count, so a local run stays fast.
* ``ci`` (selected when the ``CI`` environment variable is set): derandomized, so a CI failure
  reproduces exactly; no deadline (shared CI machines are noisy).

Select one explicitly with ``HYPOTHESIS_PROFILE=<name>``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

os.environ.setdefault("PYTFRT_READONLY_OPERANDS", "1")

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
