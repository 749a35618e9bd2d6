"""Where a Gemini request keeps its conversation: ``contents`` (the Gemini API, Vertex), or ``request.contents`` inside
Code Assist's envelope (``{"model", "project", "request": {…}}``, google-gemini/gemini-cli
``packages/core/src/code_assist/converter.ts``). The model is in the path (``…/models/{model}:generateContent``)
except for Code Assist, whose envelope names it. ``:countTokens`` asks only for a count."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import FailFast, TypeAdapter

from llmfix.dialects.base import Shape
from llmfix.dialects.gemini import wire as gw

_MODEL = re.compile(r"/models/([^/:?#]+):[A-Za-z]+(?:[?#]|$)")


def _path_model(path: str) -> str | None:
    found = _MODEL.search(path)
    return found.group(1) if found else None


def _counts_only(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/").lower().endswith(":counttokens")


SHAPE = Shape(key="contents", suffixes=(":generatecontent", ":streamgeneratecontent", ":counttokens"),
              system="systemInstruction", items=TypeAdapter(Annotated[list[gw.Content], FailFast()]),
              tags=frozenset({"text", "call", "response", "media", "other", "str"}), path_model=_path_model,
              counts_only=_counts_only, envelope="request")
