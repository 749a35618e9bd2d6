"""The launcher's own options, besides mitmdump's (which it passes on): ``--metrics HOST:PORT``.

``llmfix --metrics 127.0.0.1:9464 -- codex`` is ``llmfix --set llmfix_metrics=127.0.0.1:9464 -- codex``: llmfix
serves Prometheus metrics and a health check there while the client runs (see :mod:`llmfix.metrics.addon`), and the
launcher prints where once llmfix is ready (with port 0, the port is known only then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class LaunchError(RuntimeError):
    """llmfix could not be started; the message says why (and carries mitmdump's output)."""


def launcher_options(options: Sequence[str]) -> list[str]:
    """The launcher's own options as mitmdump's: ``--metrics HOST:PORT`` (or ``--metrics=HOST:PORT``) is
    ``--set llmfix_metrics=HOST:PORT`` (checked by llmfix as it starts). LaunchError when it has no value."""
    out: list[str] = []
    args = iter(options)
    for arg in args:
        if arg == "--metrics":
            value = next(args, None)
            if value is None or value.startswith("-"):
                raise LaunchError("--metrics needs HOST:PORT, e.g. --metrics 127.0.0.1:9464")
            out += ["--set", f"llmfix_metrics={value}"]
        elif arg.startswith("--metrics="):
            out += ["--set", f"llmfix_metrics={arg.removeprefix('--metrics=')}"]
        else:
            out.append(arg)
    return out


def metrics_line(ready: Mapping[str, Any]) -> str | None:
    """Where llmfix serves its metrics (None: it does not)."""
    url = ready.get("metrics")
    return f"llmfix: metrics on {url}/metrics, health check on {url}/healthz" if url else None
