"""strip-refused-fields: a request field an upstream refused leaves every request to it, and nothing else does.

Bug — clients send request knobs that only some upstreams know, and a relay or vendor that validates strictly
refuses the whole request, every turn, whatever the user types:

- Claude Code 2.x sends ``context_management`` (``{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}``)
  and ``output_config`` (``{"effort": …}``) on nearly every request (tests/fixtures/claude-code/single_png__turn2.json
  carries both). Relays in front of Bedrock or Vertex, copilot-api, OpenCode Zen answer 400 ``context_management:
  Extra inputs are not permitted`` (anthropics/claude-code #14135 and #21612, caozhiyuan/copilot-api #187 and #305,
  Wei-Shaw/sub2api #1968); the users' one way out, ``DISABLE_PROMPT_CACHING=1``, also turns prompt caching off.
  GitHub Copilot answers ``output_config: Extra inputs are not permitted`` for claude-opus-4.7 on every request
  (anomalyco/opencode #24527), as does a Claude.ai relay (mirrorange/clove #40).
- Its ``cache_control`` markers: Bedrock through LiteLLM refuses their ``ttl`` (``messages.0.content.3.text.
  cache_control.ephemeral.ttl: Extra inputs are not permitted``, anthropics/claude-code #12122), Copilot their
  ``scope`` (``system.1.cache_control.ephemeral.scope``, caozhiyuan/copilot-api #143), Vertex one on a thinking block
  (``messages.13.content.0.thinking.cache_control``, Wei-Shaw/sub2api #225), OpenRouter one on a tool declaration
  for old models (``tools.3.cache_control``, earendil-works/pi #7938).
- Codex and pi-ai send ``prompt_cache_key`` (tests/fixtures/codex/, tests/fixtures/pi-ai/), opencode too for
  OpenAI-compatible providers (anomalyco/opencode #22569, #45113); Azure AI Foundry answers ``Unrecognized request
  argument supplied: prompt_cache_key`` (vectorize-io/hindsight #3518, MoonshotAI/kimi-code #2611), vLLM and
  FastAPI gateways an ``extra_forbidden`` list (vllm-project/vllm #10078), Groq and Cerebras ``property
  'prompt_cache_key' is unsupported`` (zed-industries/zed #36215), a LiteLLM in front of Vertex ``promptCacheKey:
  Extra inputs are not permitted`` (anomalyco/opencode #3931).

What it does. Repair-and-retry reads from the rejection which field the upstream refuses (retry/refused_fields.py)
and learns it for that upstream — host, port, dialect — as the quirk ``strip:<field>``, kept in llmfix's memory
(persisted, shared by a Redis fleet); the rejected request is resent once without it, and every later request to
that upstream leaves without it. A top-level knob goes whole (or only the key named inside it); a ``cache_control``
key, or a marker on one kind of block, goes everywhere it occurs in the request, not only where the text pointed,
since the resend is the only one. Only fields outside the conversation may go (``body/fields.py``): never a
message, a block's text or image, a call, a result, a tool declaration, the model or ``stream``; a rejection naming
content teaches nothing. An upstream that never refused a field keeps it byte for byte, and so does Anthropic's own
API (profile flag ``learn_refused_fields``: its refusals of these fields depend on the model and the client's beta
header, not on the upstream).

Why here and not in the pipeline: the repairs change the message array; this changes the top-level body, so it runs
once on the body the other repairs produced (``engine.process``), and only when the body holds a learned field's
name. A top-level knob after the message array is taken out of the bytes, the members from it to the end parsed and
written again (``body/fields.strip_members``): a long session's history is not parsed for it. A cache marker, or a
knob before the array, costs a parse of the whole body as plain JSON (~7 ms per MB) and its writing again.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import orjson

from llmfix.body import codec, dumps, fields
from llmfix.body.conversation import BadBody, loads
from llmfix.body.haystack import haystack
from llmfix.report.changes import Change

if TYPE_CHECKING:
    from llmfix.engine import Outcome, Request, Settings

NAME = "strip-refused-fields"


def finish(outcome: Outcome, req: Request, settings: Settings) -> Outcome:
    """``outcome`` (the other repairs' result for ``req``) without the fields this upstream refused; the very same
    outcome when it refused none, or the body holds none of them."""
    quirks = settings.quirks
    if outcome.status not in ("untouched", "repaired") or quirks is None or NAME not in settings.enabled:
        return outcome
    learned = quirks.flags(req.host, req.port, str(req.dialect))
    names = [f.removeprefix(fields.QUIRK) for f, value in learned if f.startswith(fields.QUIRK) and value]
    if not names or not settings.table.resolve(req.host, req.port, outcome.model, req.dialect,
                                               learned).profile.learn_refused_fields:
        return outcome
    wanted = [f for name in names if (f := fields.parse(name)) is not None]
    if not wanted:
        return outcome
    try:
        data = outcome.body if outcome.body is not None else codec.decode(req.raw, req.content_encoding,
                                                                           settings.max_body)
        hay = haystack(data)
        wanted = [f for f in wanted if _needle(f) in hay]
        if not wanted:
            return outcome
        quick = None if any(f.kind != "member" for f in wanted) else fields.strip_members(data, wanted, loads,
                                                                                           orjson.dumps)
        if quick is not None:
            out, gone = quick
        else:
            body = loads(data)
            if not isinstance(body, dict):
                return outcome
            stripped, gone = fields.strip(body, wanted)
            if not gone:
                return outcome
            out = dumps.dumps(stripped) if len(data) >= dumps.BIG else orjson.dumps(stripped)
        if not gone:
            return outcome
    except (BadBody, codec.CodecError, TypeError) as e:  # TypeError: a number beyond 64 bits, which orjson cannot write
        return dataclasses.replace(outcome, status="failed", reason=f"{NAME}: cannot write the body again ({e})",
                                   changes=(), body=None, wire=None, lines=(), records=())
    reasons = _reasons(quirks, req)
    changes = tuple(Change(NAME, s.where, f"{s.field} removed: this upstream refuses it "
                                          f"({reasons.get(s.field, 'the rejection being retried')})",
                           before=s.value) for s in gone)
    return dataclasses.replace(
        outcome, status="repaired", changes=outcome.changes + changes, body=out,
        wire=codec.encode(out, req.content_encoding), lines=outcome.lines + tuple(c.line() for c in changes),
        records=outcome.records + tuple(c.record() for c in changes))


def _needle(f: fields.Field) -> bytes:
    """Bytes a body holds when it may hold ``f``."""
    return orjson.dumps(f.path[0] if f.kind == "member" else fields.CACHE)


def _reasons(quirks: Any, req: Request) -> dict[str, str]:
    """field → what taught it (the rejection's status, rule and text), as the quirk memory keeps it."""
    every = getattr(quirks, "quirks", None)  # a trial's fixed flags (retry/decide.py) have no reasons
    if every is None:
        return {}
    host, port, dialect = req.host.lower(), req.port or 0, str(req.dialect)
    return {q.flag.removeprefix(fields.QUIRK): f"learned from {q.reason}" for q in every()
            if q.host.lower() == host and q.port == port and q.dialect == dialect and q.flag.startswith(fields.QUIRK)}
