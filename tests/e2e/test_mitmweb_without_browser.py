"""On a machine without Chromium, ``uv run pytest`` still passes: the browser test says it skipped
and why; under ``LLMFIX_REQUIRE_BROWSER=1`` (what ``.ci/run`` sets) the same absence fails it.

Absence is simulated, not made: the browser test runs in a child pytest whose PATH holds only this
environment's bin folder (where no Chromium is), with ``LLMFIX_CHROMIUM`` unset. Chromium stays installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.harness import REPO_ROOT

pytestmark = pytest.mark.timeout(180)
BIN = Path(sys.executable).parent
BROWSER_TEST = "tests/e2e/test_mitmweb.py"


def run_browser_test(**env: str) -> subprocess.CompletedProcess[str]:
    assert shutil.which("chromium", path=str(BIN)) is None
    base = {k: v for k, v in os.environ.items() if k not in ("LLMFIX_CHROMIUM", "LLMFIX_REQUIRE_BROWSER")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", BROWSER_TEST, "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=REPO_ROOT, env={**base, "PATH": str(BIN), **env}, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=150,
    )


def test_without_chromium_the_browser_test_is_skipped_with_the_reason() -> None:
    done = run_browser_test()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "SKIPPED" in done.stdout and "Chromium is needed to check mitmweb's llmfix views" in done.stdout
    assert "no chromium on PATH" in done.stdout and "apt-get install -y chromium" in done.stdout


def test_with_llmfix_require_browser_the_missing_chromium_fails_it() -> None:
    done = run_browser_test(LLMFIX_REQUIRE_BROWSER="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout  # pytest.fail in a fixture: an error, so the run fails
    assert "LLMFIX_REQUIRE_BROWSER=1 says this test must run" in done.stdout


def test_a_wrong_llmfix_chromium_is_named_in_the_reason(tmp_path: Path) -> None:
    done = run_browser_test(LLMFIX_CHROMIUM=str(tmp_path / "no-chromium"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"LLMFIX_CHROMIUM={tmp_path / 'no-chromium'} is not an executable" in done.stdout
