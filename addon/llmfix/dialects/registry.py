"""Every dialect llmfix speaks, in the order a request's path is matched against them, and lookup by name.

A new dialect is a folder beside the others (its ``dialect.py`` assembles it) and one entry here. A name is
checked once, here, when the dialects are registered: two dialects with one name, or a name asked for that no
dialect has, is an error, never a guess.
"""

from __future__ import annotations

from llmfix.dialects.base import Dialect
from llmfix.dialects.chat.dialect import CHAT
from llmfix.dialects.gemini.dialect import GEMINI
from llmfix.dialects.messages.dialect import MESSAGES
from llmfix.dialects.responses.dialect import RESPONSES

__all__ = ["CHAT", "DIALECTS", "GEMINI", "MESSAGES", "NAMES", "RESPONSES", "named", "register"]


def register(*dialects: Dialect) -> tuple[Dialect, ...]:
    """``dialects`` as the registry's list; raises ValueError for two with one name."""
    names = [d.name for d in dialects]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"dialect name(s) registered twice: {', '.join(twice)}")
    return dialects


DIALECTS: tuple[Dialect, ...] = register(CHAT, RESPONSES, MESSAGES, GEMINI)
NAMES: tuple[str, ...] = tuple(d.name for d in DIALECTS)
_BY_NAME = {d.name: d for d in DIALECTS}


def named(name: str) -> Dialect:
    """The dialect called ``name``; ValueError naming the known ones for any other."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dialect {name!r}; expected one of {', '.join(NAMES)}") from None
