"""The responses dialect, assembled from the modules of its folder."""

from __future__ import annotations

from llmfix.dialects.base import Dialect
from llmfix.dialects.responses import answers, learn, media, rejections, shape, tools

RESPONSES = Dialect("responses", shape=shape, tools=tools, media=media, learn=learn, answers=answers,
                    rejections=rejections.RULES)
