"""Google's error bodies and the exact texts of the Gemini strict mock.

A `GeminiError` is what a rule found (status, message, gRPC status, field violations); `GeminiError.body(backend)`
wraps it the way each door of Gemini does:

- the Gemini API (``generativelanguage.googleapis.com/v1beta/models/…``) and Vertex: ``{"error": {"code",
  "message", "status"[, "details"]}}``;
- Code Assist (``cloudcode-pa.googleapis.com/v1internal:…``): the same wrapped in a JSON array, with Google's
  ``errors: [{"message", "domain": "global", "reason": "badRequest"}]`` (google-gemini/gemini-cli #5443, #16543);
- the OpenAI-compatible door (``/v1beta/openai/chat/completions``): wrapped in a JSON array
  (FuzzAnything/PromptFuzz #42, coreply/coreply #18, manthanabc/paws #103);
- a ``streamGenerateContent`` asked for without ``alt=sse`` answers a JSON array, its errors likewise (inferred from
  the two above; not seen on the native door).

``details`` carries a ``google.rpc.BadRequest`` with one ``fieldViolations`` entry per line for the JSON-payload
errors (``Invalid JSON payload received. …``), as the OpenAI-compatible door's report shows them (PromptFuzz #42).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Backend = Literal["gemini", "vertex", "code-assist", "door"]
BACKENDS: tuple[Backend, ...] = ("gemini", "vertex", "code-assist", "door")

STATUS_NAMES = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
                500: "INTERNAL", 503: "UNAVAILABLE"}
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"

# --- pairing and structure (Google's texts, as clients report them) ---------------------------------------------
COUNT_MISMATCH = ("Please ensure that the number of function response parts is equal to the number of function call "
                  "parts of the function call turn.")  # gemini-cli #4217, #6379, #16543, #21830
CALL_PLACEMENT = ("Please ensure that function call turn comes immediately after a user turn or after a function "
                  "response turn.")  # gemini-cli #11814, #26486
EMPTY_TEXT = ("Unable to submit request because it has an empty text parameter. Add a value to the parameter and try "
              "again. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/gemini")
VALID_ROLE = "Please use a valid role: user, model."
GENERIC = "Request contains an invalid argument."

# --- thought signatures ------------------------------------------------------------------------------------------
CORRUPTED = "Corrupted thought signature."  # gemini-cli #13467, RooCodeInc/Roo-Code PR #10554
# decolua/9router #301 (Claude Code → 9router → a gemini-cli backend)
VERTEX_INVALID_SIGNATURE = ("Unable to submit request because Thought signature is not valid.. Learn more: "
                            "https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/gemini")


def missing_signature(backend: Backend, name: str, position: int) -> str:
    """The missing-signature text of ``backend`` for the call ``name`` in content number ``position`` (1-based).

    Gemini API and its OpenAI-compatible door (lbjlaq/Antigravity-Manager #2157, manthanabc/paws #103); Vertex and
    Code Assist (google-gemini/gemini-cli #14437, GewoonJaap/gemini-cli-openai #156). Whether Google counts from 0
    or 1 is not known; this mock counts from 1 (the "3. content block" reads as an ordinal)."""
    if backend in ("vertex", "code-assist"):
        return (f"Unable to submit request because function call `default_api:{name}` in the {position}. content "
                "block is missing a `thought_signature`. Learn more: "
                "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures")
    return ("Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
            "correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
            f"function call `default_api:{name}` , position {position}. Please refer to "
            "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")


def invalid_signature(backend: Backend) -> str:
    """A signature this backend did not issue (another backend's, edited, truncated)."""
    return VERTEX_INVALID_SIGNATURE if backend in ("vertex", "code-assist") else CORRUPTED


def unknown_name(name: str, at: str) -> str:
    """The proto3 JSON parser's line for a key the message does not have (one line per key)."""
    return f'Invalid JSON payload received. Unknown name "{name}" at \'{at}\': Cannot find field.'


def not_repeating(name: str, at: str) -> str:
    """A list given for a singular field (``"type": ["string", "null"]``)."""
    return (f'Invalid JSON payload received. Unknown name "{name}" at \'{at}\': Proto field is not repeating, cannot '
            'start list.')


@dataclass(frozen=True)
class GeminiError:
    """One rejection of the Gemini mock: what a user would read, and which rule said it (``reason``)."""

    message: str
    reason: str
    status: int = 400
    violations: tuple[str, ...] = field(default=())  # BadRequest.fieldViolations descriptions

    @property
    def grpc_status(self) -> str:
        return STATUS_NAMES.get(self.status, "UNKNOWN")

    def error(self, backend: Backend) -> dict[str, Any]:
        """The ``error`` object of this rejection as ``backend`` writes it."""
        error: dict[str, Any] = {"code": self.status, "message": self.message}
        if backend == "code-assist":
            error["errors"] = [{"message": self.message, "domain": "global", "reason": "badRequest"}]
        error["status"] = self.grpc_status
        if self.violations:
            error["details"] = [{"@type": BAD_REQUEST,
                                 "fieldViolations": [{"description": v} for v in self.violations]}]
        return error

    def body(self, backend: Backend, *, array: bool = False) -> Any:
        """The whole error body: an object, or a one-element array for Code Assist, the door and ``array``."""
        wrapped = {"error": self.error(backend)}
        return [wrapped] if array or backend in ("code-assist", "door") else wrapped


def payload_errors(lines: list[str], reason: str) -> GeminiError:
    """Several JSON-payload lines in one 400, joined as Google joins them (one ``\\n`` between lines)."""
    return GeminiError("\n".join(lines), reason, violations=tuple(lines))


def field_errors(lines: list[str], reason: str) -> GeminiError:
    """Semantic validation lines (``* GenerateContentRequest.…``), each on its own line, the last one ended too."""
    return GeminiError("".join(f"* GenerateContentRequest.{line}\n" for line in lines), reason)


def not_found(path: str) -> GeminiError:
    return GeminiError(f"The requested URL {path} was not found on this server.", "unknown-url", status=404)
