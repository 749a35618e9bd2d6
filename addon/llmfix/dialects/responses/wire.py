"""Responses API (``POST …/responses``): input items, their content parts, tool calls and outputs.

Shapes follow the OpenAI spec (openai/openai-openapi ``openapi.yaml``; docs/evidence.md, "Where the wire shapes
come from"). Items and parts of types the repairs do not know are kept as :class:`OtherItem` / :class:`OtherPart`.
``input`` may also be a plain string.
"""

from __future__ import annotations

from typing import Any, Literal

from llmfix.body.media import MediaRef, ref_for_file_id, ref_for_url
from llmfix.wire.base import Image, Inline, Media, Textual, Wire, data_url, evolve, union


class InputText(Textual):
    type: Literal["input_text"]
    text: str


class OutputText(Textual):
    type: Literal["output_text"]
    text: str


class InputImage(Image):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None

    def media(self) -> MediaRef:
        if self.image_url:
            return ref_for_url(self.image_url, "image")
        return ref_for_file_id(self.file_id or "", "image")

    def inline(self) -> Inline | None:
        return data_url(self.image_url)

    def by_file_id(self) -> bool:
        return not self.image_url

    def refitted(self, mime: str, data: str, is_base64: bool) -> InputImage:
        return evolve(self, image_url=f"data:{mime}{';base64' if is_base64 else ''},{data}")


class InputFile(Media):
    type: Literal["input_file"]
    file_id: str | None = None
    file_data: str | None = None
    file_url: str | None = None
    filename: str | None = None

    def media(self) -> MediaRef:
        if self.file_data:
            if self.file_data.startswith("data:"):
                return ref_for_url(self.file_data, "file")
            return ref_for_url(f"data:application/octet-stream;base64,{self.file_data}", "file")
        if self.file_url:
            return ref_for_url(self.file_url, "file")
        return ref_for_file_id(self.file_id or "", "file")


class OtherPart(Wire):
    type: str | None = None


Part = union({"input_text": InputText, "output_text": OutputText, "input_image": InputImage, "input_file": InputFile,
              "other": OtherPart})
TEXT_PARTS = (InputText, OutputText)
MEDIA_PARTS = (InputImage, InputFile)


class Message(Wire):
    """An input message; ``type:"message"`` is optional (EasyInputMessage)."""

    PARTS = "content"
    NOUN = "{0.role} message"

    type: Literal["message"] | None = None
    role: str
    content: str | list[Part]


class FunctionCall(Wire):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class CustomToolCall(Wire):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str


class ToolOutput(Wire):
    """``function_call_output`` or ``custom_tool_call_output``: output is a string or an array of parts."""

    PARTS = "output"
    RESULT_ID = "call_id"
    NOUN = "{0.type} {0.call_id}"

    type: Literal["function_call_output", "custom_tool_call_output"]
    call_id: str | None = None
    output: str | list[Part]


class OtherItem(Wire):
    type: str | None = None


def _item_tag(v: Any) -> str:
    if isinstance(v, dict):
        t = v.get("type")
        if t is None and "role" in v:
            return "message"
    else:
        t = getattr(v, "type", None)
    if t in ("function_call_output", "custom_tool_call_output"):
        return "tool_output"
    if t in ("message", "function_call", "custom_tool_call"):
        return t
    return "other"


Item = union({"message": Message, "function_call": FunctionCall, "custom_tool_call": CustomToolCall,
              "tool_output": ToolOutput, "other": OtherItem}, _item_tag)
TOOL_CALLS = (FunctionCall, CustomToolCall)


class ResponsesRequest(Wire):
    input: str | list[Item]
    model: str | None = None
