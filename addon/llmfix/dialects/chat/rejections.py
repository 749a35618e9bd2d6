"""What Chat Completions upstreams answer a request they refuse with (:mod:`llmfix.retry.rules` for the shape).

- OpenAI 400 ``Image URLs are only allowed for messages with role 'user', but this message with role 'tool'
  contains an image URL.`` (All-Hands-AI/OpenHands #7700).
- DeepSeek 400 ``messages[N]: invalid type: sequence, expected a string`` (Gitlawb/openclaude #774) and
  ``messages[N]: unknown variant `image_url`, expected `text``` (its V4 API), the V3-era ``data did not match any
  variant of untagged enum ChatCompletionRequestContent``; relays to Grok: ``unknown variant image_url``.
- Pairing texts (orphan tool messages, missing results: the OpenAI API reference's message rules): the pairing
  repairs are always on, so they teach nothing.
- Thinking mode wanting each turn's ``reasoning_content`` back: DeepSeek 400 ``The `reasoning_content` in the
  thinking mode must be passed back to the API.`` (also without the backticks, and through gateways as ``Error
  from provider (DeepSeek): …`` or ``[invalid_request_error] …``; api-docs.deepseek.com, thinking mode), its older
  ``Missing `reasoning_content` field in the assistant message at message index N``, Kimi 400 ``thinking is
  enabled but reasoning_content is missing in assistant tool call message at index N``. They teach
  ``chat_reasoning_content``, so that a gateway in front of DeepSeek or Kimi gets restore-reasoning-content (and
  the one resend, when memory has the reasoning).
- Gemini's OpenAI-compatible door (its errors a JSON array, ``[{"error": …}]``: coreply/coreply #18; every string of
  the body is read alike, so the envelope does not matter here): a tool call of the current turn without the
  thought signature its answer carried, the Gemini API's ``Function call is missing a thought_signature in
  functionCall parts. … function call `default_api:shell` , position 2. …`` (manthanabc/paws #103,
  lbjlaq/Antigravity-Manager #2157; through a relay to Vertex: ``… in the 3. content block is missing a
  `thought_signature`.``), teaches ``chat_thought_signatures``, so that a gateway in front of Gemini gets
  restore-tool-call-signatures; a signature it did not issue, ``Corrupted thought signature.`` (google-gemini/gemini-cli
  #13467), ``Thought signature is not valid`` (Vertex, decolua/9router #301), ``Invalid thought signature.``, names
  no call: every signature of the rejected request is taught as refused by that upstream (:mod:`.signature_facts`).
  Its ``Schema`` refusing a tool's ``parameters``, ``Invalid JSON payload received. Unknown name "$schema" at
  'tools[0].function_declarations[3].parameters': Cannot find field.`` (QwenLM/qwen-code #1186), teaches
  ``tool_schema_openapi``, so that a gateway in front of the door gets fit-tool-schemas.
"""

from __future__ import annotations

from llmfix.dialects.chat import signature_facts
from llmfix.retry.rules import (
    NO_MEDIA,
    NO_TOOL_MEDIA,
    NO_TOOL_TEXT_ARRAY,
    REASONING_BACK,
    Rule,
    rule,
)

SIGNATURES_BACK = ("chat_thought_signatures", True)  # restore-tool-call-signatures' flag
SCHEMAS = ("tool_schema_openapi", True)  # fit-tool-schemas' flag

RULES: tuple[Rule, ...] = (
    rule("chat-image-in-tool-message", (400,),
         r"Image URLs are only allowed for messages with role 'user', but this message with role 'tool'",
         NO_TOOL_MEDIA),
    rule("chat-tool-content-not-string", (400, 422),
         r"messages\[\d+\](?:\.content)?: invalid type: sequence, expected a string", NO_TOOL_TEXT_ARRAY),
    rule("chat-unknown-variant-image", (400, 422),
         r"unknown variant `?(?:image_url|input_image|file|input_audio)`?(?:, expected `text`)?", NO_MEDIA),
    rule("chat-untagged-content", (400, 422),
         r"messages\[\d+\]: data did not match any variant of untagged enum ChatCompletionRequestContent",
         NO_TOOL_TEXT_ARRAY, NO_MEDIA),
    rule("chat-orphan-tool-message", (400,),
         r"(?i)messages with role ['\"]tool['\"] must be a response to a prece[e]?ding message "
         r"with ['\"]tool_calls['\"]"),
    rule("chat-missing-tool-results", (400,),
         r"(?i)an assistant message with ['\"]tool_calls['\"] must be followed by tool messages"),
    rule("chat-reasoning-content-deepseek", (400,),
         r"The `?reasoning_content`? in the thinking mode must be passed back to the API", REASONING_BACK),
    rule("chat-reasoning-content-missing", (400,),
         r"Missing `?reasoning_content`? field in the assistant message at message index \d+", REASONING_BACK),
    rule("chat-reasoning-content-kimi", (400,),
         r"thinking is enabled but reasoning_content is missing in assistant tool call message", REASONING_BACK),
    rule("chat-gemini-signature-missing", (400,), r"missing a `?thought_signature`?", SIGNATURES_BACK),
    rule("chat-gemini-signature-refused", (400,),
         r"Corrupted thought signature|Thought signature is not valid|Invalid thought signature",
         facts=signature_facts.refused),
    rule("chat-gemini-schema", (400,),
         r"Invalid JSON payload received\. Unknown name \"[^\"]+\" at "
         r"'(?:request\.)?tools\[\d+\]\.function_declarations\[\d+\]\.parameters", SCHEMAS),
)
