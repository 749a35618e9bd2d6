"""Label values a client can never vary without bound: names llmfix defines, anything else as ``other``.

Every label value of llmfix's metrics goes through one of these functions. A value comes from llmfix's own
constants (dialects, built-in profiles, repairs, rejection rules, profile flags), so the set of series is bounded
by the code, whatever hosts, models, keys or payloads clients send; a value outside its set (a bug, a profile name
carrying a profiles-file pattern) becomes ``other`` instead of a new series.
"""

from __future__ import annotations

import functools
import re

from llmfix import profiles
from llmfix.dialects.registry import NAMES
from llmfix.repairs import pipeline
from llmfix.retry import rejections

OTHER = "other"
UNKNOWN = "unknown"
TRANSPORTS = frozenset({"http", "websocket"})
MODES = frozenset({"repair", "report"})
REQUEST_OUTCOMES = frozenset({"untouched", "repaired", "reported", "failed"})
RETRY_OUTCOMES = frozenset({"not_resent", "succeeded", "still_rejected", "failed"})
BACKENDS = frozenset({"sqlite", "redis"})
FAIL_OPEN_REASONS = frozenset({"down", "timeout", "error"})
_FACT_KIND = re.compile(r"\A[a-z]{1,16}\.[a-z_]{1,32}\Z")
"""The shape of a reasoning fact's kind (``responses.sealed``, ``messages.foreign_thinking``): code constants."""


def one_of(value: object, allowed: frozenset[str]) -> str:
    return value if isinstance(value, str) and value in allowed else OTHER


@functools.cache
def _dialects() -> frozenset[str]:
    return frozenset(NAMES)


@functools.cache
def _repairs() -> frozenset[str]:
    return frozenset(pipeline.NAMES)


@functools.cache
def _rules() -> frozenset[str]:
    return frozenset(r.name for r in rejections.RULES)


@functools.cache
def _profiles() -> frozenset[str]:
    return frozenset(profiles.BUILTIN)


@functools.cache
def _flags() -> frozenset[str]:
    return frozenset(profiles.SETTINGS)


def dialect(value: object) -> str:
    return one_of(value, _dialects())


def profile(value: str | None) -> str:
    """The built-in profile a request's profile starts from: ``xai`` for ``xai+learned`` or for ``xai+<a
    profiles-file pattern>`` (the pattern, however bounded by the file, is not a label); ``unknown`` when the
    engine chose none."""
    if value is None:
        return UNKNOWN
    return one_of(value.split("+", 1)[0], _profiles())


def repair(value: object) -> str:
    return one_of(value, _repairs())


def rejection(value: object) -> str:
    return one_of(value, _rules())


def quirk(value: object) -> str:
    """A profile flag, or a reasoning fact's kind."""
    if isinstance(value, str) and (value in _flags() or _FACT_KIND.match(value)):
        return value
    return OTHER
