"""Hypothesis budgets for the property tests: ``ci`` (default, reproducible) and ``heavy`` (by hand).

    uv run pytest tests/property                               # ci: 60 examples per test, derandomized
    HYPOTHESIS_PROFILE=heavy uv run pytest tests/property      # 2000 examples per test, random seeds

The profile is applied per test (``tests.property.budget.BUDGET``), not loaded globally, so the other
hypothesis tests of the suite keep their own settings when everything runs together.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    "print_blob": True,
}
settings.register_profile("ci", max_examples=60, derandomize=True, database=None, **_COMMON)
settings.register_profile("heavy", max_examples=2000, **_COMMON)
