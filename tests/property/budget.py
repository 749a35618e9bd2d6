"""The hypothesis settings every property test uses: the profile named by ``HYPOTHESIS_PROFILE`` (default ``ci``)."""

from __future__ import annotations

import os

from hypothesis import settings

import tests.property.conftest  # noqa: F401  (registers the profiles when imported outside pytest)

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
BUDGET = settings(settings.get_profile(PROFILE))
