"""Which upstream rejections llmfix knows, and what each teaches (repair-and-retry).

An upstream llmfix has no profile for answers a shape it does not take with a 400/422 whose text says what it
did not like. Each dialect lists the texts its upstreams answer with (``dialects/*/rejections.py``); the rules
below hold for a request of any dialect, since gateways relay their vendor's text whatever API they serve:

- Images over a vendor's limits, from an upstream llmfix has no image limits for (a gateway in front of Claude or
  GPT, on any API; OpenRouter relays the vendor's text in ``metadata.raw``, e.g. Anthropic's media-type text
  through its Chat API, LaoshuBaby/liulianmao #11). Anthropic's texts teach ``image_limits_anthropic``:
  ``….image.source.base64: image exceeds 5 MB maximum: N bytes > 5242880 bytes`` (anthropics/claude-code #19631),
  ``… At least one of the image dimensions exceed max allowed size: 8000 pixels`` (#4778; and ``… for many-image
  requests: 2000 pixels``, #49537), ``Image does not match the provided media type image/png`` (#6300; newer:
  ``The image was specified using the image/jpeg media type, but the image appears to be a image/png image``,
  LaoshuBaby/liulianmao #11) and ``….media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or
  'image/webp'`` (anthropics/claude-code #8184); its ``Could not process image`` teaches
  ``image_undecodable_refused``. OpenAI's ``The image data you provided does not represent a valid image…``
  (Responses: Codex's ``view_image`` of an SVG), ``You uploaded an unsupported image…`` (Chat) and the ``string too
  long`` text of a tool output's ``image_url`` teach ``image_limits_openai``.
- A request field the upstream refuses (a relay or vendor that validates strictly: ``context_management: Extra
  inputs are not permitted``, FastAPI's and vLLM's ``extra_forbidden`` lists, Azure's ``Unrecognized request
  argument supplied: prompt_cache_key``; retry/refused_fields.py has each text and where it was seen): the rule
  reads which field from the text, and each one outside the conversation is learned as ``strip:<field>``
  (strip-refused-fields). A text naming the conversation's content names nothing to strip: the rule does not match.
"""

from __future__ import annotations

import orjson

from llmfix.body import fields
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import DIALECTS, named
from llmfix.profiles import FLAGS
from llmfix.retry import refused_fields
from llmfix.retry.rules import ANTHROPIC_IMAGES, OPENAI_IMAGES, UNDECODABLE_REFUSED, Match, Rule, rule

__all__ = ["ANY", "MAX_ERROR_BYTES", "RULES", "STATUSES", "Match", "Rule", "error_text", "match"]

MAX_ERROR_BYTES = 64 * 1024
"""An error body larger than this is not an error text llmfix knows (real ones are a few hundred bytes)."""
STATUSES = frozenset({400, 404, 422})
"""Every status some rule reads (404: only the not-persisted rule, whose one report came with it)."""

ANY: tuple[Rule, ...] = (
    rule("image-anthropic-too-large", (400,), r"image exceeds 5 MB maximum: \d+ bytes > \d+ bytes", ANTHROPIC_IMAGES),
    rule("image-anthropic-too-many-pixels", (400,),
         r"image dimensions exceed max allowed size(?: for many-image requests)?: \d+ pixels", ANTHROPIC_IMAGES),
    rule("image-anthropic-media-type", (400,),
         r"Image does not match the provided media type|The image was specified using the image/\S+ media "
         r"type, but the image appears to be an? image/|media_type: Input should be 'image/jpeg', 'image/png', "
         r"'image/gif' or 'image/webp'", ANTHROPIC_IMAGES),
    rule("image-anthropic-undecodable", (400,), r"Could not process image", UNDECODABLE_REFUSED),
    rule("image-openai-invalid", (400,),
         r"The image data you provided does not represent a valid image|You uploaded an unsupported image",
         OPENAI_IMAGES),
    rule("image-openai-url-too-long", (400,), r"image_url': string too long", OPENAI_IMAGES),
    # a request field the upstream refuses: which one is read from the text (retry/refused_fields.py)
    rule("refused-field", (400, 422), refused_fields.PATTERN, reads=refused_fields.read),
)
"""The rejections of a request of any dialect, read after its dialect's own."""

RULES: tuple[Rule, ...] = (*(r for d in DIALECTS for r in d.rejections), *ANY)
"""Every rule llmfix knows."""
_UNKNOWN = [f"{r.name}: {f}" for r in RULES for f, _ in r.flags if f not in FLAGS]
if _UNKNOWN:  # a rule teaching a flag no profile has would teach nothing: an error here, not a silent no-op
    raise ValueError(f"rejection rules name unknown profile flags: {', '.join(_UNKNOWN)}")


def error_text(body: bytes) -> str | None:
    """The text of an error body: every string in its JSON joined by newlines (vendors nest the message
    differently: ``error.message``, ``error``, ``detail[].msg``…), or the body itself when it is not JSON.
    None for a body too large or not UTF-8."""
    if not body or len(body) > MAX_ERROR_BYTES:
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            return None
    strings: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return "\n".join(strings)


def match(dialect: Dialect | str, status: int, body: bytes) -> Match | None:
    """The known rejection ``body`` is, for a request of ``dialect`` (or the dialect of that name) answered
    ``status``; None if unknown."""
    if status not in STATUSES:
        return None
    if isinstance(dialect, str):
        dialect = named(dialect)
    text = error_text(body)
    if not text:
        return None
    for r in (*dialect.rejections, *ANY):
        if status in r.statuses and r.pattern.search(text):
            if r.reads is None:
                return Match(r, text)
            if names := r.reads(body, text):
                return Match(r, text, tuple((fields.QUIRK + name, True) for name in names))
    return None
