"""The chat dialect, assembled from the modules of its folder."""

from __future__ import annotations

from llmfix.dialects.base import Dialect
from llmfix.dialects.chat import answers, learn, media, rejections, shape, signatures, tools

CHAT = Dialect("chat", shape=shape.SHAPE, tools=tools, media=media.MEDIA, learn=learn, answers=answers,
               rejections=rejections.RULES, signatures=signatures)
