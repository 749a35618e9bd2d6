"""Paths to and loaders for the captured client requests in ``tests/fixtures/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def capture_path(name: str) -> Path:
    """``tests/fixtures/<name>``, e.g. ``capture_path("pi-ai/xai_responses.json")``."""
    path = FIXTURES / name
    if not path.is_file():
        raise FileNotFoundError(f"no captured fixture {name!r} in {FIXTURES}")
    return path


def capture_bytes(name: str) -> bytes:
    """The fixture file's exact bytes."""
    return capture_path(name).read_bytes()


def capture_json(name: str) -> dict[str, Any]:
    """The fixture decoded as JSON."""
    return json.loads(capture_bytes(name))
