"""llmfix's mitmproxy options: declared once, parsed and validated into :class:`engine.Settings`.

mitmproxy does not enforce ``choices`` and silently ignores a mistyped ``--set`` for a script option,
so every value is checked here and a bad one raises ValueError with the reason (the addon turns it
into ``OptionsError``, which stops startup).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mitmproxy.utils import human

from llmfix import repairs
from llmfix.engine import Settings
from llmfix.profiles import load_table

MODES = ("repair", "report", "off")

# name, type, default, help
OPTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    ("llmfix_mode", str, "repair",
     "What llmfix does with a request it can repair: 'repair' (change it and log the change), "
     "'report' (log and annotate what it would change, send the body untouched) or 'off'."),
    ("llmfix_disable", Sequence[str], [],
     f"Repairs to switch off (repeat the option for several). Repairs: {', '.join(repairs.NAMES)}."),
    ("llmfix_log", str | None, None, "Append one JSON record per change to this JSONL file."),
    ("llmfix_profiles", str | None, None,
     "TOML file overriding upstream profiles by host and by model (see README, 'Profiles')."),
    ("llmfix_max_body", str, "64m",
     "Bodies larger than this (after decoding) pass unchanged with a warning. Size with k/m/g suffix."),
)


def parse_settings(opts: Any, memory: Any = None) -> Settings:
    mode = opts.llmfix_mode
    if mode not in MODES:
        raise ValueError(f"llmfix_mode must be one of {', '.join(MODES)}, not {mode!r}")
    disabled = list(opts.llmfix_disable)
    unknown = [d for d in disabled if d not in repairs.NAMES]
    if unknown:
        raise ValueError(
            f"llmfix_disable: unknown repair(s) {', '.join(unknown)}; repairs are {', '.join(repairs.NAMES)}"
        )
    try:
        max_body = human.parse_size(opts.llmfix_max_body)
    except ValueError as e:
        raise ValueError(f"llmfix_max_body: {e}") from e
    if not max_body or max_body <= 0:
        raise ValueError(f"llmfix_max_body must be a positive size like 64m, not {opts.llmfix_max_body!r}")
    table = load_table(opts.llmfix_profiles)
    return Settings(
        mode=mode,
        enabled=frozenset(repairs.NAMES) - frozenset(disabled),
        max_body=max_body,
        table=table,
        memory=memory,
    )
