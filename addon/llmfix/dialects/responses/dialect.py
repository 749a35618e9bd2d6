"""The responses dialect, assembled from the modules of its folder."""

from __future__ import annotations

from llmfix.dialects.base import Dialect
from llmfix.dialects.responses import answers, learn, media, rejections, shape, tools

RESPONSES = Dialect("responses", shape=shape.SHAPE, tools=tools, media=media.MEDIA, learn=learn, answers=answers,
                    rejections=rejections.RULES)
