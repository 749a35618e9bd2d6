"""The messages dialect, assembled from the modules of its folder."""

from __future__ import annotations

from llmfix.dialects.base import Dialect
from llmfix.dialects.messages import answers, learn, media, rejections, shape, tools, turns

MESSAGES = Dialect("messages", shape=shape.SHAPE, tools=tools, media=media.MEDIA, learn=learn, answers=answers,
                   rejections=rejections.RULES, turns=turns)
