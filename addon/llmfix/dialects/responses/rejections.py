"""What Responses upstreams answer a request they refuse with (:mod:`llmfix.retry.rules` for the shape).

- xAI 422 ``Failed to deserialize the JSON body into the target type: input: data did not match any variant of
  untagged enum ModelInput`` for a tool output that is an array, or an ``input_image`` without ``image_url``
  (openclaw/openclaw #57981), also without the ``input:`` path and with a position suffix.
- Pairing texts (``No tool output found for function call …``, ``No tool call found for function call output with
  call_id …``; openai/codex): the pairing repair is always on, so they teach nothing.
- Reasoning items (OpenAI, ``param: "input"``): ``Item 'fc_…' of type 'function_call' was provided without its
  required 'reasoning' item: 'rs_…'.`` (also ``msg_…`` / ``message``, and without the ``of type`` part), ``Item
  'rs_…' of type 'reasoning' was provided without its required following item.``, ``The encrypted content for
  item rs_… could not be verified. Reason: …`` (code ``invalid_encrypted_content``; older ``The encrypted content
  gAAA...DQ== could not be verified.``) and, with ``store: false``, ``Item with id 'rs_…' not found. Items are not
  persisted when `store` is set to false.`` (a 404 in the one report of it, so 404 is read for that rule alone).
  They teach facts about the body (:mod:`.reasoning_facts`), never flags.
"""

from __future__ import annotations

from llmfix.dialects.responses import reasoning_facts as rf
from llmfix.retry.rules import IMAGE_NEEDS_URL, NO_ARRAY_OUTPUT, Rule, rule

RULES: tuple[Rule, ...] = (
    rule("xai-model-input", (422, 400),
         r"did not match any variant of untagged enum ModelInput", NO_ARRAY_OUTPUT, IMAGE_NEEDS_URL),
    rule("responses-no-tool-output", (400,),
         r"No tool output found for (?:function |custom tool |tool )?call"),
    rule("responses-output-without-call", (400,),
         r"No tool call found for (?:function |custom tool )?call output"),
    rule("responses-reasoning-missing", (400,),
         r"Item '(?P<item>[^'\s]+)' (?:of type '[^']+' )?was provided without its required 'reasoning' item: "
         r"'(?P<reasoning>[^'\s]+)'", facts=rf.missing_reasoning),
    rule("responses-reasoning-alone", (400,),
         r"Item '(?P<reasoning>[^'\s]+)' of type 'reasoning' was provided without its required following item",
         facts=rf.reasoning_alone),
    rule("responses-encrypted-content", (400,),
         r"The encrypted content (?:for item (?P<item>[^\s]+) |(?P<content>[^\s]+) )?could not be verified",
         facts=rf.unverifiable),
    rule("responses-item-not-persisted", (404, 400),
         r"Item with id '(?P<item>[^'\s]+)' not found\. Items are not persisted when `?store`? is set to false",
         facts=rf.not_persisted),
)
