"""The short texts llmfix puts where media were, so the model is never told less than the truth."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from llmfix.dialects.base import Dialect


def count_words(kinds: Iterable[str]) -> str:
    """``["image", "image", "file"]`` → ``"2 images and 1 file"``."""
    counts = Counter(kinds)
    words = [f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in counts.items()]
    return " and ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " and " + words[-1]


def moved(kinds: list[str]) -> str:
    return f"[{count_words(kinds)} from this tool result attached in the next user message]"


def omitted(kinds: list[str], reason: str) -> str:
    return f"[{count_words(kinds)} from this tool result omitted: {reason}]"


def omitted_part(kind: str, reason: str) -> str:
    """What stands where one image or file part was, outside a tool result's text (omit-unsupported-media)."""
    return f"[{kind} omitted: {reason}]"


def label(call_id: str | None) -> str:
    return f"Attached from tool result {call_id or '(no call id)'}:"


def text_part(dialect: Dialect, text: str) -> Any:
    """A text part of ``dialect`` holding ``text``: what stands in a content array where a media part was."""
    return dialect.media.text_part(text)
