"""What Gemini's upstreams answer a request they refuse with (:mod:`llmfix.retry.rules` for the shape). Errors come as
``{"error": {…}}``, from Code Assist and the OpenAI-compatible door wrapped in a JSON array, and maybe inside a 200
stream; every string of the body is read alike (:func:`llmfix.retry.rejections.error_text`), so the envelope does not
matter here.

- A missing thought signature (Gemini 3): ``Function call is missing a thought_signature in functionCall parts. …
  function call `default_api:shell` , position 2. …`` (the Gemini API; lbjlaq/Antigravity-Manager #2157), ``Unable
  to submit request because function call `default_api:read_file` in the 3. content block is missing a
  `thought_signature`.`` (Vertex and Code Assist; google-gemini/gemini-cli #14437). It teaches
  ``gemini_thought_signatures``: from then on restore-thought-signatures gives the current turn's calls their
  signatures (from memory, else Google's documented dummy) before the request leaves, whatever the model's name.
- A signature it did not issue: ``Corrupted thought signature.`` (google-gemini/gemini-cli #13467: after a switch
  from Google login to an API key), ``Unable to submit request because Thought signature is not valid..`` (Vertex;
  decolua/9router #301), ``Invalid thought signature.``. It names no part: every signature of the rejected request
  is taught as refused by this upstream (:mod:`.signature_facts`).
- Pairing texts (google-gemini/gemini-cli #6379, #11814): ``Please ensure that the number of function response parts
  is equal to the number of function call parts of the function call turn.``, ``Please ensure that function call
  turn comes immediately after a user turn or after a function response turn.``: the pairing repairs are always on.
- Tool declarations the ``Schema`` proto refuses: ``Invalid JSON payload received. Unknown name "$schema" at
  'tools[0].function_declarations[3].parameters': Cannot find field.`` (QwenLM/qwen-code #1186,
  router-for-me/CLIProxyAPI #97): fit-tool-schemas is always on for Gemini; on a gateway llmfix has no profile
  for, the text teaches ``tool_schema_openapi``.
"""

from __future__ import annotations

from llmfix.dialects.gemini import signature_facts
from llmfix.retry.rules import Rule, rule

SIGNATURES = ("gemini_thought_signatures", True)
SCHEMAS = ("tool_schema_openapi", True)

RULES: tuple[Rule, ...] = (
    rule("gemini-signature-missing", (400,),
         r"missing a `?thought_signature`?", SIGNATURES),
    rule("gemini-signature-refused", (400,),
         r"Corrupted thought signature|Thought signature is not valid|Invalid thought signature",
         facts=signature_facts.refused),
    rule("gemini-response-count", (400,),
         r"number of function response parts is equal to the number of function call parts"),
    rule("gemini-call-placement", (400,),
         r"function call turn comes immediately after a user turn or after a function response turn"),
    rule("gemini-schema", (400,),
         r"Invalid JSON payload received\. Unknown name \"[^\"]+\" at "
         r"'(?:request\.)?tools\[\d+\]\.function_declarations\[\d+\]\.parameters", SCHEMAS),
)
