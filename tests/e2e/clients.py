"""The real clients the live tests run (npm packages installed by ``.ci/install-*`` into ``.clients/``, git-ignored):
where each is, and what a test does when one is missing — skip on a developer's machine, fail under CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CLIENTS = Path(__file__).resolve().parents[2] / ".clients"


def installed(folder: str, command: str, what: str, script: str, require: str) -> Path:
    """``.clients/<folder>/node_modules/.bin/<command>``; skips when it is not there, or fails when ``require`` (an
    environment variable) is 1 or ``CI`` is set: CI must never skip a live client test."""
    path = CLIENTS / folder / "node_modules" / ".bin" / command
    if path.exists():
        return path
    why = f"{what} is not installed in {CLIENTS} (run {script})"
    if os.environ.get(require) == "1" or os.environ.get("CI"):
        pytest.fail(f"{why}; {require}=1 or CI says the live tests of {what} must run")
    pytest.skip(why)
