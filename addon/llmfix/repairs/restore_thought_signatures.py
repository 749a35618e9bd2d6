"""restore-thought-signatures: each step of a Gemini request's current turn carries the thought signature it needs.

Bug — Gemini 3 issues an opaque ``thoughtSignature`` with the first function call of each step, and refuses a request
whose current turn (the contents after the latest user content holding text and no function response) holds a step
whose first ``functionCall`` lacks it: ``Function call is missing a thought_signature in functionCall parts. …`` (the
Gemini API), ``Unable to submit request because function call `default_api:read_file` in the 3. content block is
missing a `thought_signature`.`` (Vertex, Code Assist) — on that turn and every later one of the same loop
(https://ai.google.dev/gemini-api/docs/thought-signatures; google-gemini/gemini-cli #14437; lbjlaq/Antigravity-Manager
#2157). Clients lose it: a history converted from another API, a gateway rebuilding parts, a client that drops
unknown fields, a resumed session written by an older version. A signature issued for another account or backend
is refused the same way: ``Corrupted thought signature.`` (google-gemini/gemini-cli #13467, after a switch from
Google login to an API key), ``Thought signature is not valid`` (Vertex).

Repair, on a Gemini 3 model (named ``gemini-3…`` or later), on an upstream whose profile says so
(``gemini_thought_signatures``, also taught by the first refusal), and wherever an upstream refused signatures:

- the first call of each model content in the current turn that has no signature gets the one the model issued with
  it, byte for byte, from llmfix's memory of the answers (dialects/gemini/learn.py: found by the upstream, the
  step's calls — names and arguments — and the call's place); failing that, Google's documented stand-in
  ``skip_thought_signature_validator`` ("you can set … dummy signatures … to skip validation", the FAQ of the page
  above; what gemini-cli writes into its own history when it has none);
- a signature this upstream refused (dialects/gemini/signature_facts.py) is removed wherever it is — older turns
  need none ("we don't validate on previous turns", the same page) — and the current turn's first calls then get
  the remembered one or the stand-in as above.

A signature the request carries is never replaced unless its upstream refused it; calls after the first of a step
stay unsigned, as the model sent them; older turns keep whatever they have. The log shows a signature as its length
and digest, never its value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llmfix.dialects.gemini import learn as gl
from llmfix.dialects.gemini import wire as gw
from llmfix.memory.fingerprint import digest
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import evolve, without

NAME = "restore-thought-signatures"
DUMMY = "skip_thought_signature_validator"
_GENERATION = re.compile(r"(?:^|/)gemini-(\d+)")


def shown(signature: str | None) -> str | None:
    """A signature as the log shows it: its length and a digest, never its value."""
    return None if signature is None else f"<thoughtSignature {len(signature)} chars sha256:{digest(signature)[:12]}>"


def _gemini3(model: str | None) -> bool:
    found = _GENERATION.search(model or "")
    return found is not None and int(found.group(1)) >= 3


def _starts_turn(item: Any) -> bool:
    """A user content holding text and no function response: where the current turn begins (gemini-cli's own test,
    ``packages/core/src/core/geminiChat.ts``: a response merged with the next prompt does not begin one, and taking
    it for a beginning would leave earlier calls of the turn unchecked)."""
    if not isinstance(item, gw.Content) or item.role not in (None, "user"):
        return False
    parts = item.parts or ()
    return any(isinstance(p, gw.TextPart) for p in parts) and not any(isinstance(p, gw.ResponsePart) for p in parts)


def _steps(items: list[Any], start: int) -> list[int]:
    """Indexes of ``items[start:]``'s model contents with calls that are in the current turn (``items[start:]`` the
    newest of a longer list: a turn beginning before ``start`` still holds them)."""
    begin = start
    for i in range(len(items) - 1, start - 1, -1):
        if _starts_turn(items[i]):
            begin = i + 1
            break
    return [i for i in range(begin, len(items)) if isinstance(items[i], gw.Content) and items[i].role == "model"
            and items[i].calls()]


def _refused(ctx: Context, items: list[Any], start: int = 0) -> tuple[set[str], str | None]:
    """The signatures of ``items[start:]`` this upstream refused, and its marker (None: it never refused any)."""
    store, upstream = ctx.reasoning, ctx.upstream
    if store is None:
        return set(), None
    mark = gl.marker(upstream)
    found = store.recall(gl.REFUSED, [mark]).get(mark)
    if found is None:
        return set(), None
    signatures = {s for item in items[start:] if isinstance(item, gw.Content) for p in item.parts or ()
                  if isinstance(p, (gw.CallPart, gw.TextPart)) and (s := p.signature())}
    keys = {gl.refused_key(upstream, s): s for s in signatures}
    got = store.recall(gl.REFUSED, list(keys)) if keys else {}
    return {keys[k] for k in got}, found.value


def _active(ctx: Context, marker: str | None) -> bool:
    return ctx.profile.gemini_thought_signatures or _gemini3(ctx.model) or marker is not None


def _step_key(ctx: Context, content: gw.Content) -> str:
    step = [(p.name(), p.args()) for _, p in content.calls()]
    return gl.signature_key(ctx.upstream, step, 0)


def _strip(part: Any) -> Any:
    return part.with_signature(None) if isinstance(part, gw.CallPart) else \
        without(part, "thoughtSignature", "thought_signature")


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    refused, marker = _refused(ctx, items)
    if not _active(ctx, marker):
        return items, []
    steps = _steps(items, 0)
    needy = [i for i in steps if (s := items[i].calls()[0][1].signature()) is None or s in refused]
    if not needy and not refused:
        return items, []
    keys = {i: _step_key(ctx, items[i]) for i in needy}
    found = ctx.reasoning.recall(gl.KIND, list(set(keys.values()))) if ctx.reasoning is not None and keys else {}
    out = list(items)
    changes: list[Change] = []
    for i, item in enumerate(items):
        if not isinstance(item, gw.Content) or not item.parts:
            continue
        parts = list(item.parts)
        first = item.calls()[0][0] if i in keys else None
        for k, p in enumerate(parts):
            if isinstance(p, (gw.CallPart, gw.TextPart)) and p.signature() in refused and k != first:
                parts[k] = _strip(p)
                changes.append(Change(NAME, f"{ctx.dialect.at(i)}.parts[{k}].thoughtSignature",
                                      "signature removed: this upstream refused it", shown(p.signature()), None))
        if first is not None:
            call = parts[first]
            record = found.get(keys[i])
            value = record.value if record is not None and record.value and record.value not in refused else None
            had = call.signature()
            why = "refused by this upstream" if had is not None else "missing"
            parts[first] = call.with_signature(value or DUMMY)
            how = (f"the one {record.upstream or 'the upstream'} issued with it, from memory" if value else
                   f"Google's stand-in {DUMMY!r} (no signature of this step in memory)")
            changes.append(Change(NAME, f"{ctx.dialect.at(i)}.parts[{first}].thoughtSignature",
                                  f"{call.noun()}, first call of a step of the current turn: signature {why}, "
                                  f"given {how}", shown(had), shown(value) if value else DUMMY))
        if parts != list(item.parts):
            out[i] = evolve(item, parts=parts)
    return (out, changes) if changes else (items, [])


@dataclass(frozen=True, slots=True)
class _Marked:
    marker: str | None


def _extend(state: _Marked | None, items: list[Any], start: int, ctx: Context) -> _Marked | None:
    """Certain that nothing changes: no new signature is refused, the upstream refused nothing since the prefix was
    settled (its marker), and every step of the new items that is in the current turn has its signature (a step of
    the prefix was in the current turn when it was settled, and had one then)."""
    refused, marker = _refused(ctx, items, start)
    if refused or (state is not None and marker != state.marker):
        return None
    if _active(ctx, marker) and any(items[i].calls()[0][1].signature() is None for i in _steps(items, start)):
        return None
    return _Marked(marker)


REPAIR = Repair(NAME, _apply, needles={"gemini": (b"unctionCall", b"unction_call", b"houghtSignature",
                                                 b"hought_signature")}, extend=_extend)
"""Its needles: a call (a signature to give), or a signature (one to take away: Gemini signs text parts too, and a
history of text turns only may hold a refused one)."""
