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
once on the body the other repairs produced (a top-level repair, :mod:`llmfix.repairs.top`), and only when the body
holds a learned field's name. A top-level knob after the message array is taken out of the bytes, the members from
it to the end parsed and written again (``body/fields.strip_members``): a long session's history is not parsed for
it. A cache marker, or a knob before the array, costs a parse of the whole body as plain JSON (~7 ms per MB) and its
writing again.
"""

from __future__ import annotations

from typing import Any

import orjson

from llmfix.body import dumps, fields
from llmfix.body.conversation import BadBody, loads
from llmfix.body.haystack import haystack
from llmfix.repairs.top import TopContext, TopRepair
from llmfix.report.changes import Change

NAME = "strip-refused-fields"


def _refused(ctx: TopContext) -> list[fields.Field]:
    if not ctx.profile.learn_refused_fields:
        return []
    names = [f.removeprefix(fields.QUIRK) for f, value in ctx.learned if f.startswith(fields.QUIRK) and value]
    return [f for name in names if (f := fields.parse(name)) is not None]


def _wants(ctx: TopContext) -> bool:
    return bool(_refused(ctx))


def _apply(data: bytes, ctx: TopContext) -> tuple[bytes, list[Change]] | None:
    """The body without the fields this upstream refused; None when it holds none of them."""
    hay = haystack(data)
    wanted = [f for f in _refused(ctx) if _needle(f) in hay]
    if not wanted:
        return None
    try:
        quick = None if any(f.kind != "member" for f in wanted) else fields.strip_members(data, wanted, loads,
                                                                                           orjson.dumps)
        if quick is not None:
            out, gone = quick
        else:
            body = loads(data)
            if not isinstance(body, dict):
                return None
            stripped, gone = fields.strip(body, wanted)
            if not gone:
                return None
            out = dumps.dumps(stripped) if len(data) >= dumps.BIG else orjson.dumps(stripped)
    except (BadBody, TypeError) as e:  # TypeError: a number beyond 64 bits, which orjson cannot write
        raise ValueError(f"{NAME}: cannot write the body again ({e})") from None
    if not gone:
        return None
    reasons = _reasons(ctx)
    return out, [Change(NAME, s.where, f"{s.field} removed: this upstream refuses it "
                                      f"({reasons.get(s.field, 'the rejection being retried')})", before=s.value)
                 for s in gone]


def _needle(f: fields.Field) -> bytes:
    """Bytes a body holds when it may hold ``f``."""
    return orjson.dumps(f.path[0] if f.kind == "member" else fields.CACHE)


def _reasons(ctx: TopContext) -> dict[str, str]:
    """field → what taught it (the rejection's status, rule and text), as the quirk memory keeps it."""
    every: Any = getattr(ctx.quirks, "quirks", None)  # a trial's fixed flags (retry/decide.py) have no reasons
    if every is None:
        return {}
    host, port, dialect = ctx.host.lower(), ctx.port or 0, str(ctx.dialect)
    return {q.flag.removeprefix(fields.QUIRK): f"learned from {q.reason}" for q in every()
            if q.host.lower() == host and q.port == port and q.dialect == dialect and q.flag.startswith(fields.QUIRK)}


REPAIR = TopRepair(NAME, _apply, _wants)
