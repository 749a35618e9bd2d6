"""flatten-tool-text: a Chat tool message's array of text parts becomes one string.

Bug — clients (and llmfix's own hoist, which leaves text parts behind) send ``content:
[{"type":"text",…}]`` in ``role:"tool"`` messages; DeepSeek accepts only a string there and answers 400
``Failed to deserialize the JSON body into the target type: messages[N]: invalid type: sequence,
expected a string`` (Gitlawb/openclaude #774, QwenLM/qwen-code #2320). On profiles with
``chat_tool_text_array = false`` the texts are joined with newlines; arrays holding anything but text
are left to hoist-tool-media, which runs first.
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.chat import wire as ch
from llmfix.repairs import settled
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import evolve

NAME = "flatten-tool-text"


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.profile.chat_tool_text_array:
        return items, []
    out: list[Any] = []
    changes: list[Change] = []
    for i, m in enumerate(items):
        if (
            isinstance(m, ch.Message)
            and m.role == "tool"
            and isinstance(m.content, list)
            and all(isinstance(p, ch.TextPart) for p in m.content)
        ):
            text = "\n".join(p.text for p in m.content)
            out.append(evolve(m, content=text))
            changes.append(Change(NAME, f"messages[{i}].content",
                                  f"tool message {m.tool_call_id}: {len(m.content)} text part(s) → one string",
                                  [p.to_wire() for p in m.content], text))
        else:
            out.append(m)
    return out, changes


REPAIR = Repair(NAME, _apply, needles={"chat": (b'"tool"',)},
                wanted=lambda profile, _dialect: not profile.chat_tool_text_array,
                extend=settled.local(_apply))  # each item decided on its own
