"""The gemini dialect, assembled from the modules of its folder."""

from __future__ import annotations

from llmfix.dialects.base import Dialect
from llmfix.dialects.gemini import answers, learn, media, rejections, shape, tools, turns

GEMINI = Dialect("gemini", shape=shape.SHAPE, tools=tools, media=media.MEDIA, learn=learn, answers=answers,
                 rejections=rejections.RULES, turns=turns)
