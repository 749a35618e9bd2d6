"""Anthropic Messages (``POST …/v1/messages``): messages, content blocks, tool_use and tool_result.

Shapes follow the types of anthropics/anthropic-sdk-python (docs/evidence.md, "Where the wire shapes come from").
Block types the repairs do not know (thinking, documents, server tools…) are kept as :class:`OtherBlock`.
"""

from __future__ import annotations

from typing import Any, Literal

from llmfix.body.media import MediaRef, ref_for_base64, ref_for_file_id, ref_for_url
from llmfix.wire.base import Image, Inline, Textual, Wire, evolve, union


class TextBlock(Textual):
    type: Literal["text"]
    text: str


class ImageBlock(Image):
    """``{"type":"image","source":{"type":"base64","media_type","data"} | {"type":"url","url"} | file}``; also a
    ``document`` (a PDF, or plain text)."""

    type: Literal["image", "document"]
    source: dict[str, Any]

    def media(self) -> MediaRef:
        kind = "image" if self.type == "image" else "document"
        src = self.source
        if src.get("type") == "base64":
            return ref_for_base64(str(src.get("data", "")), src.get("media_type"), kind)
        if src.get("type") == "url":
            return ref_for_url(str(src.get("url", "")), kind)
        return ref_for_file_id(str(src.get("file_id", src)), kind)

    def kind(self) -> str:
        if self.type == "image":
            return "image"
        return "text" if self.source.get("type") in ("text", "content") else "file"

    def inline(self) -> Inline | None:
        data = self.source.get("data") if self.type == "image" and self.source.get("type") == "base64" else None
        if not isinstance(data, str):
            return None
        media_type = self.source.get("media_type")
        return Inline(data, 0, media_type if isinstance(media_type, str) else None)

    def refitted(self, mime: str, data: str, is_base64: bool) -> ImageBlock:
        return evolve(self, source={**self.source, "media_type": mime, "data": data})


class OtherBlock(Wire):
    type: str | None = None


def _inner_tag(v: Any) -> str:
    t = v.get("type") if isinstance(v, dict) else getattr(v, "type", None)
    if t == "text":
        return "text"
    if t in ("image", "document"):
        return "media"
    return "other"


InnerBlock = union({"text": TextBlock, "media": ImageBlock, "other": OtherBlock}, _inner_tag)


class ToolUse(Wire):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any = None


class ToolResult(Wire):
    PARTS = "content"
    RESULT_ID = "tool_use_id"
    NOUN = "tool_result {0.tool_use_id}"

    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[InnerBlock] | None = None


def _block_tag(v: Any) -> str:
    t = v.get("type") if isinstance(v, dict) else getattr(v, "type", None)
    if t in ("tool_use", "tool_result"):
        return t
    return _inner_tag(v)


Block = union({"text": TextBlock, "media": ImageBlock, "tool_use": ToolUse, "tool_result": ToolResult,
               "other": OtherBlock}, _block_tag)


class Message(Wire):
    PARTS = "content"
    NOUN = "{0.role} message"

    role: str
    content: str | list[Block]


class MessagesRequest(Wire):
    messages: list[Message]
    model: str | None = None
