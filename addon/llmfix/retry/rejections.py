"""Which upstream rejections llmfix knows, and which profile flag avoids each (DESIGN B11).

An upstream llmfix has no profile for answers a shape it does not take with a 400/422 whose text says
what it did not like. Each :class:`Rule` below is one such text, seen in the wild, for one dialect and
status: a regex searched in the error text (every string of the JSON error body, joined; serde-style
texts end in a position suffix such as ``at line 1 column 1932``, so no rule is anchored at the end),
and the profile flags, in order, whose value would have avoided it. A rule with no flags is a text
llmfix recognises but whose repair is always on (the pairing texts): nothing to learn, nothing to resend.

Evidence (``../shared/reference/wire-formats.md`` = WF, ``session-killers.md`` = SK):

- xAI Responses 422 ``Failed to deserialize the JSON body into the target type: input: data did not match
  any variant of untagged enum ModelInput`` (WF R2, §4.1, openclaw #57981), also without the ``input:``
  path and with a position suffix. The same text is given for an ``input_image`` without ``image_url``.
- OpenAI Chat 400 ``Image URLs are only allowed for messages with role 'user', but this message with role
  'tool' contains an image URL.`` (WF R4, §2.2; OpenHands #7700).
- DeepSeek Chat 400 ``messages[N]: invalid type: sequence, expected a string`` (WF R7, §7; openclaude #774)
  and ``messages[N]: unknown variant `image_url`, expected `text``` (WF §7, V4 era); the V3-era
  ``data did not match any variant of untagged enum ChatCompletionRequestContent`` (WF §7 [S54]); relays
  to Grok: ``unknown variant image_url`` (WF §7 [S58]).
- Anthropic-compatible vendors rejecting ``role:"system"`` in ``messages[]`` (SK §2.3: DeepSeek 400
  ``messages[1].role: unknown variant `system`, expected `user` or `assistant```, Qwen the same, GLM 422
  ``Input should be 'user' or 'assistant'`` with ``"input":"system"``, MiniMax 400 ``invalid params, chat
  content has invalid message role: system (2013)``, an unnamed gateway ``messages[1].role must be either
  'user' or 'assistant', but got 'system'``). Their flag, ``anthropic_system_messages``, comes with the
  fold repair (fold-system-messages); a row whose flag :data:`llmfix.profiles.FLAGS` lacks stays inert.
- Anthropic-compatible serde vendors rejecting an image block inside a ``tool_result``: **inferred**, not
  captured: DeepSeek's ``/anthropic`` deserializer names content positions as in its other texts
  (``messages[N].content[K].content[J]: unknown variant `image`, expected `text```); only that nested
  position (a tool_result's own content) teaches ``anthropic_tool_result_media``.
- Pairing texts (WF §2.2, §3.3, SK §1): orphan tool messages, missing results, orphan ``tool_result``,
  Responses ``No tool output found``: the pairing repairs are always on, so these teach nothing.
- Responses reasoning items (SK §3.3, §1.2; OpenAI shape, ``param: "input"``): ``Item 'fc_…' of type
  'function_call' was provided without its required 'reasoning' item: 'rs_…'.`` (also ``msg_…`` / ``message``,
  and without the ``of type`` part), ``Item 'rs_…' of type 'reasoning' was provided without its required
  following item.``, ``The encrypted content for item rs_… could not be verified. Reason: …`` (code
  ``invalid_encrypted_content``; older ``The encrypted content gAAA...DQ== could not be verified.``) and, with
  ``store: false``, ``Item with id 'rs_…' not found. Items are not persisted when `store` is set to false.``
  (**404** in one report, so 404 is read for that rule alone). They teach facts about the body
  (``retry/reasoning_facts.py``), never flags.
- Thinking mode wanting each turn's ``reasoning_content`` back (SK §3.1): DeepSeek 400 ``The `reasoning_content`
  in the thinking mode must be passed back to the API.`` (also without the backticks, and through gateways as
  ``Error from provider (DeepSeek): …`` or ``[invalid_request_error] …``), its older ``Missing `reasoning_content`
  field in the assistant message at message index N``, Kimi 400 ``thinking is enabled but reasoning_content is
  missing in assistant tool call message at index N``. They teach ``chat_reasoning_content``, so that a gateway in
  front of DeepSeek or Kimi gets restore-reasoning-content (and the one resend, when memory has the reasoning).
- Images over a vendor's limits, from an upstream llmfix has no image limits for (a gateway in front of Claude or
  GPT, on any of the three APIs: gateways relay the vendor's text, OpenRouter in ``metadata.raw``, e.g. Anthropic's
  media-type text through its Chat API, LaoshuBaby/liulianmao #11). Anthropic (SK §4): ``….image.source.base64:
  image exceeds 5 MB maximum: N bytes > 5242880 bytes``, ``… At least one of the image dimensions exceed max
  allowed size: 8000 pixels`` (and ``… for many-image requests: 2000 pixels``), ``Image does not match the provided
  media type image/png`` (anthropics/claude-code #6300; newer: ``The image was specified using the image/jpeg media
  type, but the image appears to be a image/png image``, LaoshuBaby/liulianmao #11) and ``….media_type: Input should
  be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`` (anthropics/claude-code #8184) teach
  ``image_limits_anthropic``; its ``Could not process image`` teaches ``image_undecodable_refused``. OpenAI (SK §4):
  ``The image data you provided does not represent a valid image…`` (Responses), ``You uploaded an unsupported
  image…`` (Chat) and the ``string too long`` text of a tool output's ``image_url`` teach ``image_limits_openai``.
- Anthropic's signature check (SK §3.2): ``messages.N.content.M: Invalid `signature` in `thinking` block`` and
  ``messages.N.content.M.thinking.signature: Field required``. Only the upstream can judge a signature, and the
  text names the block: the rule teaches facts, not a flag (:func:`foreign_thinking`).
- A request field the upstream refuses (a relay or vendor that validates strictly: ``context_management: Extra
  inputs are not permitted``, FastAPI's and vLLM's ``extra_forbidden`` lists, Azure's ``Unrecognized request
  argument supplied: prompt_cache_key``; retry/refused_fields.py has each text and where it was seen): the rule
  reads which field from the text, and each one outside the conversation is learned as ``strip:<field>``
  (strip-refused-fields). A text naming the conversation's content names nothing to strip: the rule does not match.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from llmfix.body import fields
from llmfix.memory.learn_anthropic_thinking import FOREIGN, TYPES, block_key, fact_key, marker_key
from llmfix.memory.store import Reasoning
from llmfix.profiles import FLAGS
from llmfix.retry import reasoning_facts, refused_fields

MAX_ERROR_BYTES = 64 * 1024
"""An error body larger than this is not an error text llmfix knows (real ones are a few hundred bytes)."""
STATUSES = frozenset({400, 404, 422})
"""Every status some rule reads (404: only the not-persisted rule, whose one report came with it)."""


Facts = Callable[["Match", dict[str, Any], str], list[Reasoning]]
"""(the rejection, the body llmfix sent, the upstream's id) → what the rejection says about that body's reasoning
state, as :class:`Reasoning` records (e.g. "this upstream cannot verify the thinking block at messages.N.content.M":
a record naming that block's signature as foreign to it); [] when it names nothing llmfix can use."""


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    dialect: str  # "chat" | "responses" | "messages"
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
        """The rule's flags this llmfix has (a row for a flag another branch adds stays inert), then what it read."""
        return tuple((f, v) for f, v in self.rule.flags if f in FLAGS) + self.taught


def _rule(name: str, dialect: str, statuses: tuple[int, ...], pattern: str, *flags: tuple[str, bool],
          facts: Facts | None = None, reads: Callable[[bytes, str], tuple[str, ...]] | None = None) -> Rule:
    return Rule(name, dialect, frozenset(statuses), re.compile(pattern), flags, facts, reads)


_SERDE = r"Failed to deserialize the JSON body into the target type: "
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
_THINKING_BLOCK = re.compile(r"messages\.(\d+)\.content\.(\d+)(?:\.thinking\.signature: Field required|: Invalid "
                             r"`signature` in `thinking` block)")


def foreign_thinking(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    """What Anthropic's signature rejection teaches about the body llmfix sent: the block it names (``messages.N.
    content.M``) is not this upstream's, and this upstream rejects blocks (the marker drop-foreign-thinking asks
    first, its value new with every lesson). Nothing when the text names no thinking block of an older assistant
    turn: the latest one is never changed, so a rejection of it teaches nothing that could be resent."""
    hit = _THINKING_BLOCK.search(found.text)
    messages = body.get("messages")
    if hit is None or not isinstance(messages, list):
        return []
    n, m = int(hit.group(1)), int(hit.group(2))
    latest = max((i for i, msg in enumerate(messages) if isinstance(msg, dict) and msg.get("role") == "assistant"),
                 default=-1)
    content = messages[n].get("content") if n < latest and isinstance(messages[n], dict) else None
    block = content[m] if isinstance(content, list) and m < len(content) and isinstance(content[m], dict) else None
    key = block_key(block) if block is not None and block.get("type") in TYPES else None
    if key is None:
        return []
    why = f"{found.rule.name} at messages.{n}.content.{m}"
    fact = Reasoning(FOREIGN, fact_key(key, upstream), why, upstream)
    return [fact, Reasoning(FOREIGN, marker_key(upstream), reasoning_facts.lesson([fact]), upstream)]


RULES: tuple[Rule, ...] = (
    # -- Responses ----------------------------------------------------------------------------------------
    _rule("xai-model-input", "responses", (422, 400),
          r"did not match any variant of untagged enum ModelInput", NO_ARRAY_OUTPUT, IMAGE_NEEDS_URL),
    _rule("responses-no-tool-output", "responses", (400,),
          r"No tool output found for (?:function |custom tool |tool )?call"),
    _rule("responses-output-without-call", "responses", (400,),
          r"No tool call found for (?:function |custom tool )?call output"),
    _rule("responses-reasoning-missing", "responses", (400,),
          r"Item '(?P<item>[^'\s]+)' (?:of type '[^']+' )?was provided without its required 'reasoning' item: "
          r"'(?P<reasoning>[^'\s]+)'", facts=reasoning_facts.missing_reasoning),
    _rule("responses-reasoning-alone", "responses", (400,),
          r"Item '(?P<reasoning>[^'\s]+)' of type 'reasoning' was provided without its required following item",
          facts=reasoning_facts.reasoning_alone),
    _rule("responses-encrypted-content", "responses", (400,),
          r"The encrypted content (?:for item (?P<item>[^\s]+) |(?P<content>[^\s]+) )?could not be verified",
          facts=reasoning_facts.unverifiable),
    _rule("responses-item-not-persisted", "responses", (404, 400),
          r"Item with id '(?P<item>[^'\s]+)' not found\. Items are not persisted when `?store`? is set to false",
          facts=reasoning_facts.not_persisted),
    # -- Chat Completions ---------------------------------------------------------------------------------
    _rule("chat-image-in-tool-message", "chat", (400,),
          r"Image URLs are only allowed for messages with role 'user', but this message with role 'tool'",
          NO_TOOL_MEDIA),
    _rule("chat-tool-content-not-string", "chat", (400, 422),
          r"messages\[\d+\](?:\.content)?: invalid type: sequence, expected a string", NO_TOOL_TEXT_ARRAY),
    _rule("chat-unknown-variant-image", "chat", (400, 422),
          r"unknown variant `?(?:image_url|input_image|file|input_audio)`?(?:, expected `text`)?", NO_MEDIA),
    _rule("chat-untagged-content", "chat", (400, 422),
          r"messages\[\d+\]: data did not match any variant of untagged enum ChatCompletionRequestContent",
          NO_TOOL_TEXT_ARRAY, NO_MEDIA),
    _rule("chat-orphan-tool-message", "chat", (400,),
          r"(?i)messages with role ['\"]tool['\"] must be a response to a prece[e]?ding message "
          r"with ['\"]tool_calls['\"]"),
    _rule("chat-missing-tool-results", "chat", (400,),
          r"(?i)an assistant message with ['\"]tool_calls['\"] must be followed by tool messages"),
    _rule("chat-reasoning-content-deepseek", "chat", (400,),
          r"The `?reasoning_content`? in the thinking mode must be passed back to the API", REASONING_BACK),
    _rule("chat-reasoning-content-missing", "chat", (400,),
          r"Missing `?reasoning_content`? field in the assistant message at message index \d+", REASONING_BACK),
    _rule("chat-reasoning-content-kimi", "chat", (400,),
          r"thinking is enabled but reasoning_content is missing in assistant tool call message", REASONING_BACK),
    # -- Anthropic Messages -------------------------------------------------------------------------------
    _rule("messages-image-in-tool-result", "messages", (400, 422),
          r"messages\[\d+\]\.content\[\d+\]\.content\[\d+\](?:\.type)?: unknown variant `image`", NO_TOOL_RESULT_MEDIA),
    _rule("messages-system-role-serde", "messages", (400,),
          r"messages\[\d+\]\.role: unknown variant `system`, expected `user` or `assistant`", NO_SYSTEM_MESSAGES),
    _rule("messages-system-role-literal", "messages", (422,),
          r"(?s)Input should be 'user' or 'assistant'.*\bsystem\b", NO_SYSTEM_MESSAGES),
    _rule("messages-system-role-minimax", "messages", (400,),
          r"invalid message role: system \(2013\)", NO_SYSTEM_MESSAGES),
    _rule("messages-system-role-gateway", "messages", (400,),
          r"role must be either 'user' or 'assistant', but got 'system'", NO_SYSTEM_MESSAGES),
    _rule("messages-missing-tool-result", "messages", (400,),
          r"`tool_use` ids were found without `tool_result` blocks immediately after"),
    _rule("messages-orphan-tool-result", "messages", (400,),
          r"unexpected `tool_use_id` found in `tool_result` blocks"),
    _rule("messages-thinking-signature", "messages", (400,), _THINKING_BLOCK.pattern, facts=foreign_thinking),
    # -- images, on any of the three APIs (a gateway relays its vendor's text) ------------------------------
    *(rule for dialect in ("chat", "responses", "messages") for rule in (
        _rule("image-anthropic-too-large", dialect, (400,), r"image exceeds 5 MB maximum: \d+ bytes > \d+ bytes",
              ANTHROPIC_IMAGES),
        _rule("image-anthropic-too-many-pixels", dialect, (400,),
              r"image dimensions exceed max allowed size(?: for many-image requests)?: \d+ pixels", ANTHROPIC_IMAGES),
        _rule("image-anthropic-media-type", dialect, (400,),
              r"Image does not match the provided media type|The image was specified using the image/\S+ media "
              r"type, but the image appears to be an? image/|media_type: Input should be 'image/jpeg', 'image/png', "
              r"'image/gif' or 'image/webp'", ANTHROPIC_IMAGES),
        _rule("image-anthropic-undecodable", dialect, (400,), r"Could not process image", UNDECODABLE_REFUSED),
        _rule("image-openai-invalid", dialect, (400,),
              r"The image data you provided does not represent a valid image|You uploaded an unsupported image",
              OPENAI_IMAGES),
        _rule("image-openai-url-too-long", dialect, (400,), r"image_url': string too long", OPENAI_IMAGES),
    )),
    # -- a request field the upstream refuses, on any of the three APIs: read from the text (refused_fields.py) --
    *(_rule("refused-field", dialect, (400, 422), refused_fields.PATTERN, reads=refused_fields.read)
      for dialect in ("chat", "responses", "messages")),
)


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


def match(dialect: str, status: int, body: bytes) -> Match | None:
    """The known rejection ``body`` is, for a request of ``dialect`` answered ``status``; None if unknown."""
    if status not in STATUSES:
        return None
    text = error_text(body)
    if not text:
        return None
    for rule in RULES:
        if rule.dialect == dialect and status in rule.statuses and rule.pattern.search(text):
            if rule.reads is None:
                return Match(rule, text)
            if names := rule.reads(body, text):
                return Match(rule, text, tuple((fields.QUIRK + name, True) for name in names))
    return None
