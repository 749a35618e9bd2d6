"""Chat Completions (``POST …/chat/completions``): messages, content parts and tool calls.

Shapes follow the OpenAI spec (openai/openai-openapi ``openapi.yaml``; docs/evidence.md, "Where the wire shapes
come from"). Part types the repairs do not know are kept as :class:`OtherPart`; message roles are free strings, so
an unknown role is kept as it came.
"""

from __future__ import annotations

from typing import Any, Literal

from llmfix.body.media import MediaRef, ref_for_base64, ref_for_url
from llmfix.memory.learn_base import json_text
from llmfix.wire.base import Image, Inline, Media, Textual, Wire, data_url, evolve, union


class TextPart(Textual):
    type: Literal["text"]
    text: str


class ImageUrl(Wire):
    url: str
    detail: str | None = None


class ImagePart(Image):
    type: Literal["image_url"]
    image_url: ImageUrl

    def media(self) -> MediaRef:
        return ref_for_url(self.image_url.url, "image")

    def inline(self) -> Inline | None:
        return data_url(self.image_url.url)

    def refitted(self, mime: str, data: str, is_base64: bool) -> ImagePart:
        url = f"data:{mime}{';base64' if is_base64 else ''},{data}"
        return evolve(self, image_url=evolve(self.image_url, url=url))


class FilePart(Media):
    """``{"type":"file","file":{"file_data"|"file_id", "filename"}}``."""

    type: Literal["file"]
    file: dict[str, Any]

    def media(self) -> MediaRef:
        data = self.file.get("file_data")
        if isinstance(data, str):
            return ref_for_url(data, "file") if data.startswith("data:") else ref_for_base64(data, None, "file")
        return ref_for_url(str(self.file.get("file_id", "")), "file")


class AudioPart(Media):
    KIND = "audio"

    type: Literal["input_audio"]
    input_audio: dict[str, Any]

    def media(self) -> MediaRef:
        fmt = self.input_audio.get("format")
        return ref_for_base64(str(self.input_audio.get("data", "")), f"audio/{fmt}" if fmt else None, "audio")


class OtherPart(Wire):
    type: str | None = None


Part = union({"text": TextPart, "image_url": ImagePart, "file": FilePart, "input_audio": AudioPart, "other": OtherPart})
MediaPart = ImagePart | FilePart | AudioPart
MEDIA_PARTS = (ImagePart, FilePart, AudioPart)


class Function(Wire):
    name: str
    arguments: str


class ToolCall(Wire):
    id: str
    type: str = "function"
    function: Function | None = None

    def declared(self) -> tuple[str, str, str] | None:
        """The call's (name, kind, arguments as JSON text), read as the learner reads them from an answer (custom,
        else function); None when it names no tool."""
        custom = (self.__pydantic_extra__ or {}).get("custom")
        if self.type == "custom" and isinstance(custom, dict):
            name, args, kind = custom.get("name"), custom.get("input", ""), "custom"
        elif self.function is not None:
            name, args, kind = self.function.name, self.function.arguments, "function"
        else:
            return None
        return (name, kind, json_text(args if args is not None else "")) if isinstance(name, str) and name else None


class Message(Wire):
    PARTS = "content"

    role: str
    content: str | list[Part] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    def is_result(self) -> bool:  # a message is a tool result by its role
        return self.role == "tool"

    def result_id(self) -> str | None:
        return self.tool_call_id if self.role == "tool" else None

    def noun(self) -> str:
        return f"tool message {self.tool_call_id}" if self.role == "tool" else f"{self.role} message"


class ChatRequest(Wire):
    messages: list[Message]
    model: str | None = None


def text_of(content: str | list[Any] | None) -> str:
    """All text of a message's content, parts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart))
