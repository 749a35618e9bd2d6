"""The API dialects llmfix speaks, one folder each, behind the small protocols of :mod:`llmfix.dialects.base`.

A dialect is everything llmfix knows of one request format: its typed models (``wire``), where its
conversation lives and how a location in it is named (``shape``), its tool calls, results and media as the
neutral views need them (``tools``, ``media``), what it learns from answers (``learn``), how its answers read
(``answers``) and its known rejections (``rejections``). :mod:`llmfix.dialects.registry` lists them; code outside
this package asks the dialect it is given and never branches on which one it is.

This module stays empty on purpose: a dialect's modules import the neutral views, which import
:mod:`llmfix.dialects.base`; importing the dialects here would make that a cycle.
"""
