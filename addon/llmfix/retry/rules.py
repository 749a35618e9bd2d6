"""The shape of a known rejection: a text an upstream answers with, and what llmfix learns from it.

Each dialect lists the rejections its upstreams answer with (``dialects/*/rejections.py``), and
:mod:`llmfix.retry.rejections` adds those any upstream may relay (a vendor's image limits) and reads them.
A :class:`Rule` is one text seen in the wild for one status: a regex searched in the error text (every string of
the JSON error body, joined; serde-style texts end in a position suffix such as ``at line 1 column 1932``, so no
rule is anchored at the end), and the profile flags, in order, whose value would have avoided it. A rule with no
flags is a text llmfix recognises but whose repair is always on (the pairing texts): nothing to learn, nothing to
resend. A rule with ``facts`` teaches something about the request it rejected rather than a flag.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmfix.memory.store import Reasoning

Facts = Callable[["Match", dict[str, Any], str], list[Reasoning]]
"""(the rejection, the body llmfix sent, the upstream's id) → what the rejection says about that body's reasoning
state, as :class:`Reasoning` records (e.g. "this upstream cannot verify the thinking block at messages.N.content.M":
a record naming that block's signature as foreign to it); [] when it names nothing llmfix can use."""


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    statuses: frozenset[int]
    pattern: re.Pattern[str]
    flags: tuple[tuple[str, bool], ...]  # (profile flag, the value that avoids the rejection), in order
    facts: Facts | None = None
    """For a rejection only the upstream can judge (a signature, an encrypted payload): what it teaches about the
    request it rejected, noted in the reasoning memory, so that the repair sees it, the resend is repaired and the
    next request too (retry/decide.py)."""
    reads: Callable[[bytes, str], tuple[str, ...]] | None = None
    """For a rejection that names what it refuses (a request field): the fields it names, read from the error body
    and its text (retry/refused_fields.py); each is learned as ``strip:<field>``. Naming none, the rule does not
    match."""


@dataclass(frozen=True, slots=True)
class Match:
    rule: Rule
    text: str  # the error text it matched in (unredacted: callers redact before logging)
    taught: tuple[tuple[str, bool], ...] = ()  # what a ``reads`` rule read from this rejection (``strip:<field>``)

    @property
    def flags(self) -> tuple[tuple[str, bool], ...]:
        """The rule's flags, then what it read."""
        return self.rule.flags + self.taught


def rule(name: str, statuses: tuple[int, ...], pattern: str, *flags: tuple[str, bool],
         facts: Facts | None = None, reads: Callable[[bytes, str], tuple[str, ...]] | None = None) -> Rule:
    return Rule(name, frozenset(statuses), re.compile(pattern), flags, facts, reads)


NO_ARRAY_OUTPUT = ("responses_tool_output_array", False)
IMAGE_NEEDS_URL = ("responses_image_requires_url", True)
NO_TOOL_MEDIA = ("chat_tool_media", False)
NO_TOOL_TEXT_ARRAY = ("chat_tool_text_array", False)
NO_MEDIA = ("media_input", False)
NO_TOOL_RESULT_MEDIA = ("anthropic_tool_result_media", False)
NO_SYSTEM_MESSAGES = ("anthropic_system_messages", False)  # fold-system-messages' flag
REASONING_BACK = ("chat_reasoning_content", True)  # restore-reasoning-content's flag
ANTHROPIC_IMAGES = ("image_limits_anthropic", True)  # fit-images' flags
OPENAI_IMAGES = ("image_limits_openai", True)
UNDECODABLE_REFUSED = ("image_undecodable_refused", True)


_LESSONS = itertools.count()


def lesson(records: list[Reasoning]) -> str:
    """The value of an upstream's marker after it taught ``records``: unique to this teaching (when, a count of this
    process's teachings, a digest of what it taught), so that a fast-path state settled under an earlier marker never
    takes a later one for its own — not even when the same fact is taught again after another."""
    digest = hashlib.sha256("\n".join(sorted(f"{r.kind} {r.key}" for r in records)).encode()).hexdigest()[:16]
    return f"{time.time():.6f} {next(_LESSONS)} {digest}"
