"""llmfix's mitmproxy options: declared once, parsed and validated into :class:`engine.Settings`.

mitmproxy does not enforce ``choices`` and silently ignores a mistyped ``--set`` for a script option,
so every value is checked here and a bad one raises ValueError with the reason (the addon turns it
into ``OptionsError``, which stops startup).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from mitmproxy.utils import human

from llmfix.engine import Settings
from llmfix.memory.backend import check_location
from llmfix.memory.redis_link import MAX_TIMEOUT_S
from llmfix.memory.store import MemoryStoreError
from llmfix.profiles import load_table
from llmfix.repairs import pipeline

MODES = ("repair", "report", "off")

# name, type, default, help
OPTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    ("llmfix_mode", str, "repair",
     "What llmfix does with a request it can repair: 'repair' (change it and log the change), "
     "'report' (log and annotate what it would change, send the body untouched) or 'off'."),
    ("llmfix_disable", Sequence[str], [],
     f"Repairs to switch off (repeat the option for several). Repairs: {', '.join(pipeline.NAMES)}."),
    ("llmfix_log", str | None, None, "Append one JSON record per change to this JSONL file."),
    ("llmfix_profiles", str | None, None,
     "TOML file overriding upstream profiles by host and by model (see README, 'Profiles')."),
    ("llmfix_max_body", str, "64m",
     "Bodies larger than this (after decoding) pass unchanged with a warning. Size with k/m/g suffix."),
    ("llmfix_memory", str | None, None,
     "SQLite file where llmfix remembers the tool calls it has seen (default: llmfix-memory.sqlite3 in "
     "mitmproxy's confdir). ':memory:' keeps them in memory only (lost on restart). A redis:// or rediss:// "
     "URL (redis://HOST:PORT/DB) shares tool calls, in-flight media and learned quirks with every llmfix "
     "instance naming the same Redis (see README, 'A fleet sharing one memory')."),
    ("llmfix_memory_max_age", str, "7d", "Forget remembered tool calls older than this (e.g. 30m, 12h, 7d)."),
    ("llmfix_memory_max_entries", int, 100_000, "Keep at most this many remembered tool calls."),
    ("llmfix_memory_timeout", str, "2s",
     "With a Redis memory: how long one Redis command may take (at most 10s) before llmfix goes on without "
     "shared memory, warns once, and reconnects by itself."),
    ("llmfix_restore_window", str, "0s",
     "restore-tool-media puts back media only from a request that is still in flight or ended at most this "
     "long ago (e.g. 2s). The default 0s means in flight only: a gateway's upstream request always happens "
     "while its client's request is open, and a longer window could return images a client dropped on purpose."),
)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str) -> float:
    """``"90"`` / ``"90s"`` / ``"30m"`` / ``"12h"`` / ``"7d"`` → seconds."""
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:]) if t else None
    number = t[:-1] if unit else t
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise ValueError(f"{option} must be a duration like 30s, 10m, 12h or 7d, not {text!r}") from None
    if value < 0:
        raise ValueError(f"{option} must not be negative, not {text!r}")
    return value


def memory_path(opts: Any) -> str:
    if opts.llmfix_memory:
        return opts.llmfix_memory
    return os.path.join(os.path.expanduser(opts.confdir), "llmfix-memory.sqlite3")


def with_state(settings: Settings, memory: Any, window: Any) -> Settings:
    """``settings`` with the addon's long-lived state; no media window when restore-tool-media is off."""
    if "restore-tool-media" not in settings.enabled:
        window = None
    return dataclasses.replace(settings, memory=memory, window=window)


def _check_memory(opts: Any) -> None:
    timeout = parse_duration(opts.llmfix_memory_timeout, "llmfix_memory_timeout")
    if not 0 < timeout <= MAX_TIMEOUT_S:
        raise ValueError(f"llmfix_memory_timeout must be more than 0 and at most {MAX_TIMEOUT_S:g}s, "
                         f"not {opts.llmfix_memory_timeout!r}")
    if opts.llmfix_memory:
        try:
            check_location(opts.llmfix_memory)
        except MemoryStoreError as e:
            raise ValueError(f"llmfix_memory: {e}") from None


def parse_settings(opts: Any, memory: Any = None) -> Settings:
    mode = opts.llmfix_mode
    if mode not in MODES:
        raise ValueError(f"llmfix_mode must be one of {', '.join(MODES)}, not {mode!r}")
    disabled = list(opts.llmfix_disable)
    unknown = [d for d in disabled if d not in pipeline.NAMES]
    if unknown:
        raise ValueError(
            f"llmfix_disable: unknown repair(s) {', '.join(unknown)}; repairs are {', '.join(pipeline.NAMES)}"
        )
    try:
        max_body = human.parse_size(opts.llmfix_max_body)
    except ValueError as e:
        raise ValueError(f"llmfix_max_body: {e}") from e
    if not max_body or max_body <= 0:
        raise ValueError(f"llmfix_max_body must be a positive size like 64m, not {opts.llmfix_max_body!r}")
    parse_duration(opts.llmfix_memory_max_age, "llmfix_memory_max_age")
    parse_duration(opts.llmfix_restore_window, "llmfix_restore_window")
    _check_memory(opts)
    if opts.llmfix_memory_max_entries <= 0:
        raise ValueError(f"llmfix_memory_max_entries must be positive, not {opts.llmfix_memory_max_entries}")
    table = load_table(opts.llmfix_profiles)
    return Settings(
        mode=mode,
        enabled=frozenset(pipeline.NAMES) - frozenset(disabled),
        max_body=max_body,
        table=table,
        memory=memory,
    )
