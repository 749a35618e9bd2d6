"""restore-tool-call-signatures: at Gemini's OpenAI-compatible door, each tool call of the current turn carries the
thought signature it came with.

Bug — behind ``generativelanguage.googleapis.com/v1beta/openai/chat/completions`` Gemini 3 issues an opaque thought
signature with the first function call of each step; the door puts it on that tool call as ``extra_content:
{"google": {"thought_signature": …}}`` (streamed on a trailing delta after the call) and refuses a request whose
current turn (the assistant messages after the last user message) holds a message whose first tool call lacks it:
``Function call is missing a thought_signature in functionCall parts. … function call `default_api:shell` , position
2. …``, in a JSON array (``[{"error": …}]``) — on that turn and every later one of the loop
(https://ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI compatibility"; manthanabc/paws #103,
niki914/zafiro #100). Clients and SDKs that keep only OpenAI's standard fields drop ``extra_content``: older Continue
(continuedev/continue PR #8865), nanobot (HKUDS/nanobot PR #2453), openclaude (Gitlawb/openclaude PR #69), OpenHarness
(HKUDS/OpenHarness PR #338), hermes-agent (NousResearch/hermes-agent PR #188), ruby_llm (crmne/ruby_llm PR #588),
WeKnora's Go client (Tencent/WeKnora PR #1535), pi's ``openai-completions`` (earendil-works/pi PR #7745), Qwen Code
0.24.4 (tests/fixtures/qwen-code: its second request has no ``extra_content``), and OpenAI-format relays that do not
re-attach it (lbjlaq/Antigravity-Manager #3243). A signature issued for another account or backend is refused:
``Corrupted thought signature.`` (google-gemini/gemini-cli #13467).

Repair, on an upstream whose profile says so (``chat_thought_signatures``: the ``gemini-openai`` profile, or taught
by the missing-signature 400 — dialects/chat/rejections.py), and wherever an upstream refused signatures:

- each tool call of the current turn without a signature gets the one the model issued with it, byte for byte, from
  llmfix's memory of the answers (dialects/chat/learn_signatures.py: found by the upstream, the call's id, name and
  arguments compared by value; a key two sessions made alike is ambiguous and gives nothing), in the door's own
  shape; the first call of each assistant message that memory has nothing for gets Google's documented stand-in
  ``skip_thought_signature_validator`` ("you can set … dummy signatures … to skip validation", the FAQ of the page
  above; what gemini-cli, LiteLLM and the AI SDK put there) — the other calls need none (Gemini signs only the first
  of parallel calls) and get none;
- a signature this upstream refused (dialects/chat/signature_facts.py, learned by repair-and-retry) is removed
  wherever it is — older turns need none ("we don't validate on previous turns", the same page) — and the current
  turn's calls then get the remembered one or the stand-in as above.

A model whose name says it is of an older generation (``gemini-2.5-flash``, ``gemini-1.5-pro``) is not held to the
rule ("When using Gemini 3 models, you must pass back thought signatures", the same page): its calls get back what
memory has, never the stand-in, so a valid session of such a model leaves as it came.

Older turns are not given signatures back: the door does not check them, and a client may clear them on purpose
(Google allows it, to save tokens); a request whose current turn is signed leaves byte-identical. A signature the
request carries is never replaced unless its upstream refused it; whatever else ``extra_content`` holds stays. The
log shows a signature as its length and digest, never its value. It runs after the pairing repairs, beside
restore-reasoning-content: which messages are in the current turn depends on where the user messages are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llmfix.dialects.base import Signatures
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.restore_thought_signatures import DUMMY, shown
from llmfix.report.changes import Change

NAME = "restore-tool-call-signatures"
_OLDER = re.compile(r"(?:^|/)gemini-[12](?:[.-]|$)")


def _stand_in(model: str | None) -> bool:
    """Whether a call memory has nothing for may get Google's stand-in: not for a model named as an older generation,
    which does not check signatures."""
    return _OLDER.search(model or "") is None


def _present(sig: Signatures, items: list[Any], start: int) -> list[str]:
    """Every signature on a call of ``items[start:]``."""
    return [s for item in items[start:] for call in sig.calls(item) if (s := sig.signature(call)) is not None]


def _refused(ctx: Context, sig: Signatures, signatures: list[str]) -> tuple[set[str], str | None]:
    """Which of ``signatures`` this upstream refused, and its marker (None: it never refused any), in one query."""
    store, upstream = ctx.reasoning, ctx.upstream
    if store is None:
        return set(), None
    mark = sig.marker(upstream)
    known = store.recall(sig.REFUSED, [mark]).get(mark)
    if known is None:  # the common case: never refused one, so no signature is hashed into a key
        return set(), None
    keys = {sig.refused_key(upstream, s): s for s in signatures}
    found = store.recall(sig.REFUSED, list(keys)) if keys else {}
    return {keys[k] for k in found if k in keys}, known.value


def _given(ctx: Context, call_id: str, first: bool, had: str | None, value: str | None,
           source: str | None) -> str:
    why = "refused by this upstream" if had is not None else "missing"
    place = "first tool call of its message" if first else "tool call"
    how = (f"the one {source or 'the upstream'} issued with it, from memory" if value is not None else
           f"Google's stand-in {DUMMY!r} (no signature of this call in memory)")
    return f"{place} {call_id} in the current turn: signature {why}, given {how}"


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    sig = ctx.dialect.signatures
    if sig is None:
        return items, []
    flag = bool(getattr(ctx.profile, sig.FLAG))
    present = _present(sig, items, 0)
    if not flag and not present:
        return items, []
    refused, marker = _refused(ctx, sig, present)
    if not flag and marker is None:
        return items, []
    _, steps = sig.turn(items, 0)
    needy = {(i, k): call for i in steps for k, call in enumerate(sig.calls(items[i]))
             if (s := sig.signature(call)) is None or s in refused}
    if not needy and not refused:
        return items, []
    keys = {at: key for at, call in needy.items() if (key := sig.key(ctx.upstream, call)) is not None}
    dummy = _stand_in(ctx.model)
    found = ctx.reasoning.recall(sig.KIND, list(set(keys.values()))) if ctx.reasoning is not None and keys else {}
    out = list(items)
    changes: list[Change] = []
    for i, item in enumerate(items):
        calls = sig.calls(item)
        new = list(calls)
        before = len(changes)
        for k, call in enumerate(calls):
            had = sig.signature(call)
            record = found.get(keys[i, k]) if (i, k) in keys else None
            value = record.value if record is not None and record.value and record.value not in refused else None
            if (i, k) in needy and (value is not None or (k == 0 and dummy)):
                given = sig.with_signature(call, value or DUMMY)
                if given is not call:
                    new[k] = given
                    summary = _given(ctx, getattr(call, "id", "?"), k == 0, had, value,
                                     record.upstream if record is not None else None)
                    changes.append(Change(NAME, sig.location(i, k), summary, shown(had),
                                          shown(value) if value is not None else DUMMY))
                    continue
            if had is not None and had in refused and (bare := sig.with_signature(call, None)) is not call:
                new[k] = bare
                changes.append(Change(NAME, sig.location(i, k), "signature removed: this upstream refused it",
                                      shown(had), None))
        if len(changes) > before:
            out[i] = sig.with_calls(item, new)
    return (out, changes) if changes else (items, [])


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the certain check carries: whether the upstream's marker was asked for (the flag is on, or the request
    holds a signature), the marker then, and the keys of the current turn's unsigned calls that get no stand-in
    (memory may learn one later: a fleet instance's write lands late)."""

    asked: bool = False
    marker: str | None = None
    open: tuple[str, ...] = ()


def _extend(state: _Seen | None, items: list[Any], start: int, ctx: Context) -> _Seen | None:
    """Certain that nothing changes: no new signature is refused, the upstream taught no refusal since the prefix was
    settled (its marker), every message of the current turn in the new items has a signed first call where the
    stand-in would go (one in the prefix had, when it was settled), and memory holds nothing for the turn's other
    unsigned calls."""
    sig = ctx.dialect.signatures
    if sig is None:
        return _Seen()
    flag = bool(getattr(ctx.profile, sig.FLAG))
    new = _present(sig, items, start)
    if not (flag or new or (state is not None and state.asked)):
        return _Seen()
    refused, marker = _refused(ctx, sig, new)
    if refused or (state is not None and marker != state.marker):
        return None
    if not flag and marker is None:
        return _Seen(True)
    begun, steps = sig.turn(items, start)
    open_ = [] if begun or state is None else list(state.open)
    dummy = _stand_in(ctx.model)
    for i in steps:
        for k, call in enumerate(sig.calls(items[i])):
            if sig.signature(call) is not None:
                continue
            if k == 0 and dummy:
                return None
            if (key := sig.key(ctx.upstream, call)) is not None:
                open_.append(key)
    if open_ and ctx.reasoning is not None and any(r.value for r in ctx.reasoning.recall(sig.KIND, open_).values()):
        return None
    return _Seen(True, marker, tuple(open_))


def _wanted(profile: Any, dialect: Any) -> bool:
    """An upstream that wants signatures back may need one on any call; one that does not can only have refused a
    signature the body carries (``unwanted_needles``)."""
    return bool(getattr(profile, dialect.signatures.FLAG)) if dialect.signatures is not None else False


REPAIR = Repair(NAME, _apply, needles=lambda d: d.signatures.NEEDLES if d.signatures is not None else None,
                wanted=_wanted, unwanted_needles=lambda d: d.signatures.PRESENT if d.signatures is not None else None,
                extend=_extend)
