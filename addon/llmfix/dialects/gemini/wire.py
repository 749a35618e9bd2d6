"""Gemini's native request shapes: ``contents`` of ``Content`` (``role``, ``parts``), each ``Part`` one data member —
``text``, ``inlineData``/``fileData``, ``functionCall``, ``functionResponse``, … — beside ``thought`` and
``thoughtSignature`` (https://ai.google.dev/api/caching#Content, #Part).

The REST API is proto3 JSON: a parser takes both spellings of a field, ``inlineData`` and ``inline_data``, even mixed
in one request (https://protobuf.dev/programming-guides/json/; LiteLLM sends ``function_call`` beside
``thoughtSignature``). The camelCase spelling clients send is typed here; the other stays as it came (an extra field)
and is read through the same accessors, so a part llmfix changes keeps the spelling and key order it was sent with.
Parts the repairs do not know are kept as :class:`OtherPart`.
"""

from __future__ import annotations

from typing import Any

from llmfix.body.media import MediaRef, ref_for_base64, ref_for_url
from llmfix.wire.base import Image, Inline, Textual, Wire, evolve, union, without


def snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def member(obj: Any, camel: str) -> Any:
    """``camel`` of a model or a dict, in either spelling; None when it has neither."""
    if isinstance(obj, dict):
        return obj[camel] if camel in obj else obj.get(snake(camel))
    value = getattr(obj, camel, None)
    if value is None:
        extra = getattr(obj, "__pydantic_extra__", None) or {}
        value = extra.get(camel, extra.get(snake(camel)))
    return value


def key_of(obj: Any, camel: str) -> str:
    """The spelling of ``camel`` that ``obj`` uses (camelCase when it has neither yet)."""
    extra = getattr(obj, "__pydantic_extra__", None) or {}
    return snake(camel) if snake(camel) in extra and camel not in extra and getattr(obj, camel, None) is None \
        else camel


class TextPart(Textual):
    type: None = None  # parts have no type member: only text, and its thought / thoughtSignature beside it
    text: str

    def signature(self) -> str | None:
        value = member(self, "thoughtSignature")
        return value if isinstance(value, str) else None


class Blob(Wire):
    mimeType: str | None = None
    data: str | None = None


class FileRef(Wire):
    mimeType: str | None = None
    fileUri: str | None = None


class MediaPart(Image):
    """``inlineData`` (base64 bytes and a MIME type) or ``fileData`` (a file URI): an image, audio, a video or a
    document, by its MIME type."""

    inlineData: Blob | None = None
    fileData: FileRef | None = None

    def _blob(self) -> Any:
        return member(self, "inlineData")

    def _mime(self) -> str:
        held = self._blob() or member(self, "fileData")
        return str(member(held, "mimeType") or "")

    def kind(self) -> str:
        major = self._mime().split("/", 1)[0].lower()
        return major if major in ("image", "audio", "video") else "file"

    def media(self) -> MediaRef:
        blob = self._blob()
        if blob is not None:
            return ref_for_base64(str(member(blob, "data") or ""), self._mime() or None, self.kind())
        return ref_for_url(str(member(member(self, "fileData"), "fileUri") or ""), self.kind())

    def inline(self) -> Inline | None:
        data = member(self._blob(), "data") if self.kind() == "image" else None
        return Inline(data, 0, self._mime() or None) if isinstance(data, str) else None

    def refitted(self, mime: str, data: str, is_base64: bool) -> MediaPart:
        key = key_of(self, "inlineData")
        blob = self._blob()
        raw = blob.to_wire() if isinstance(blob, Wire) else dict(blob)
        fields = {key_of(blob, "mimeType") if isinstance(blob, Wire) else
                  ("mime_type" if "mime_type" in raw else "mimeType"): mime, "data": data}
        return evolve(self, **{key: {**raw, **fields}})


class FunctionCall(Wire):
    id: str | None = None
    name: str | None = None
    args: Any = None


class CallPart(Wire):
    """A ``functionCall`` part, and the ``thoughtSignature`` Gemini 3 issued with it."""

    functionCall: FunctionCall | None = None

    def call(self) -> Any:
        return member(self, "functionCall")

    def name(self) -> str:
        return str(member(self.call(), "name") or "")

    def call_id(self) -> str | None:
        value = member(self.call(), "id")
        return value if isinstance(value, str) and value else None

    def args(self) -> Any:
        return member(self.call(), "args")

    def signature(self) -> str | None:
        value = member(self, "thoughtSignature")
        return value if isinstance(value, str) and value else None

    def with_signature(self, signature: str | None) -> CallPart:
        """A copy carrying ``signature`` (None: none at all), in the spelling the part already uses."""
        if signature is not None:
            return evolve(self, **{key_of(self, "thoughtSignature"): signature})
        return without(self, "thoughtSignature", "thought_signature")

    def noun(self) -> str:
        return f"functionCall {self.name()}"


class FunctionResponse(Wire):
    id: str | None = None
    name: str | None = None
    response: Any = None
    parts: list[Part] | None = None


class ResponsePart(Wire):
    """A ``functionResponse`` part: a tool result. Its media, for Gemini 3, in ``functionResponse.parts``."""

    PARTS = "functionResponse.parts"

    functionResponse: FunctionResponse | None = None

    def response(self) -> Any:
        return member(self, "functionResponse")

    def name(self) -> str:
        return str(member(self.response(), "name") or "")

    def is_result(self) -> bool:
        return True

    def result_id(self) -> str | None:
        value = member(self.response(), "id")
        return value if isinstance(value, str) and value else None

    def held(self) -> Any:
        return member(self.response(), "parts")

    def holding(self, parts: Any) -> ResponsePart:
        held = self.response()
        key = key_of(self, "functionResponse")
        if isinstance(held, Wire):
            return evolve(self, **{key: evolve(held, parts=parts)})
        return evolve(self, **{key: {**held, "parts": [p.to_wire() if isinstance(p, Wire) else p for p in parts]}})

    def noun(self) -> str:
        return f"functionResponse {self.name()}"


class OtherPart(Wire):
    """A part of a kind the repairs do not read (``executableCode``, ``codeExecutionResult``, …), kept as it came."""


def _part_tag(value: Any) -> str:
    for camel, tag in (("text", "text"), ("functionCall", "call"), ("functionResponse", "response"),
                       ("inlineData", "media"), ("fileData", "media")):
        if member(value, camel) is not None:
            return tag
    return "other"


Part = union({"text": TextPart, "call": CallPart, "response": ResponsePart, "media": MediaPart, "other": OtherPart},
             _part_tag)
FunctionResponse.model_rebuild()


class Content(Wire):
    """One turn: ``role`` ``user`` or ``model`` (the Gemini API takes none as user), and its parts."""

    PARTS = "parts"
    NOUN = "{0.role} content"

    role: str | None = None
    parts: list[Part] | None = None

    def calls(self) -> list[tuple[int, CallPart]]:
        return [(k, p) for k, p in enumerate(self.parts or ()) if isinstance(p, CallPart)]

    def responses(self) -> list[tuple[int, ResponsePart]]:
        return [(k, p) for k, p in enumerate(self.parts or ()) if isinstance(p, ResponsePart)]
