"""Run a writer script in its own process and kill it with SIGKILL mid-write (the crash-safety tests)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

ADDON_DIR = Path(__file__).resolve().parents[3] / "addon"


def kill_mid_write(script: str, path: Path, batches: int = 30) -> int:
    """Run ``script`` (``sys.argv[1]`` = ``path``; it prints each batch number once that batch is written) until
    it acknowledged ``batches`` batches, then SIGKILL it; the last batch number it acknowledged."""
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], env={**os.environ, "PYTHONPATH": str(ADDON_DIR)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    acknowledged = -1
    try:
        deadline = time.monotonic() + 60
        while acknowledged < batches and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                acknowledged = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=30)
    assert acknowledged >= batches, f"writer made no progress: {stderr.decode(errors='replace')}"
    assert proc.returncode == -signal.SIGKILL
    return acknowledged
