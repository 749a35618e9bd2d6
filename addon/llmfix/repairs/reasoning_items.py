"""What the two reasoning-item repairs share: reading Responses items as reasoning items and the items they
produced, asking the memory about them, removing an item's ``id``, and showing a reasoning item in a change
record without its ``encrypted_content`` (only its size and hash).

Vocabulary. A *reasoning item* is an input item of type ``reasoning``; its *name* is its ``id``, or, when a
client sends it without one, the id the memory knows for its ``encrypted_content`` (``responses.sealed``). A
*produced* item is one a model issues (a call, an assistant message, a server tool call): not a reasoning item,
not a tool output, not a user/system/developer message, not an ``item_reference``. A reasoning item's *run* is
the produced items after it up to the next reasoning item or input message (tool outputs skipped): the items of
its response, as far as the request alone can tell. Its *turn* is the same both ways: the produced items around
it up to the nearest reasoning item or input message on each side (where a client that moved it put it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llmfix.body.media import human_size
from llmfix.dialects.responses import learn as lr
from llmfix.dialects.responses import wire as rs
from llmfix.memory.store import Reasoning
from llmfix.repairs.base import Apply, Context, Extend, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import without

_INPUT_ROLES = frozenset({"user", "system", "developer"})


def active(ctx: Context) -> bool:
    """Whether a reasoning repair can know anything here: with a reasoning memory (the repairs serve only
    Responses requests: :func:`repair`)."""
    return ctx.reasoning is not None


def repair(name: str, apply: Apply, extend: Extend) -> Repair:
    """A reasoning repair: Responses only, for bodies with an item id or an encrypted content."""
    return Repair(name, apply, needles={"responses": (b'"id"', b"encrypted_content")}, extend=extend)


def extra(item: Any, key: str) -> Any:
    return (getattr(item, "__pydantic_extra__", None) or {}).get(key)


def kind(item: Any) -> str | None:
    t = getattr(item, "type", None)
    if t is None and isinstance(item, rs.Message):
        return "message"
    return t if isinstance(t, str) else None


def item_id(item: Any) -> str | None:
    """The item's ``id`` when it is one llmfix can name (a string of reasonable length)."""
    value = extra(item, "id")
    return value if isinstance(value, str) and 0 < len(value) <= lr.MAX_ID_CHARS else None


def is_reasoning(item: Any) -> bool:
    return isinstance(item, rs.OtherItem) and item.type == "reasoning"


def encrypted(item: Any) -> str | None:
    value = extra(item, "encrypted_content")
    return value if isinstance(value, str) and value else None


def is_tool_output(item: Any) -> bool:
    return isinstance(item, rs.ToolOutput) or (kind(item) or "").endswith("_call_output")


def produced(item: Any) -> bool:
    if is_reasoning(item) or is_tool_output(item) or kind(item) == "item_reference":
        return False
    return not (isinstance(item, rs.Message) and item.role in _INPUT_ROLES)


def has_text(item: Any) -> bool:
    """Whether a reasoning item carries a summary or reasoning text a reader (or another upstream) can use."""
    for key in ("summary", "content"):
        parts = extra(item, key)
        if isinstance(parts, list) and any(isinstance(p, dict) and p.get("text") for p in parts):
            return True
    return False


def run(items: list[Any], i: int) -> list[int]:
    """The indices of the produced items in the run of the reasoning item at ``i``."""
    out: list[int] = []
    for j in range(i + 1, len(items)):
        item = items[j]
        if is_tool_output(item):
            continue
        if not produced(item):
            break
        out.append(j)
    return out


def turn(items: list[Any], i: int) -> list[int]:
    """The indices of the produced items in the turn of the reasoning item at ``i``."""
    before: list[int] = []
    for j in range(i - 1, -1, -1):
        if is_tool_output(items[j]):
            continue
        if not produced(items[j]):
            break
        before.append(j)
    return [*reversed(before), *run(items, i)]


def ids(items: list[Any], start: int = 0) -> dict[int, str]:
    """Index → id of the items of ``items[start:]`` an upstream may have issued: reasoning and produced items (a
    client mints the ids of its own messages and tool outputs, Codex's ``msg_<uuid>`` and ``fco_…``)."""
    out: dict[int, str] = {}
    for k in range(start, len(items)):
        item = items[k]
        if (is_reasoning(item) or produced(item)) and (x := item_id(item)) is not None:
            out[k] = x
    return out


def names(items: list[Any], ctx: Context, *, start: int = 0) -> dict[int, str]:
    """Index → name of the reasoning items of ``items[start:]`` that have one."""
    out: dict[int, str] = {}
    unnamed: dict[int, str] = {}
    for i in range(start, len(items)):
        item = items[i]
        if not is_reasoning(item):
            continue
        name = item_id(item)
        if name is not None:
            out[i] = name
        elif (content := encrypted(item)) is not None:
            unnamed[i] = lr.sealed_key(content)
    if unnamed:
        known = recall(ctx, lr.SEALED, unnamed.values())
        out.update({i: known[h].value for i, h in unnamed.items() if h in known and known[h].value})
    return out


def recall(ctx: Context, kind_: str, keys: Iterable[str]) -> dict[str, Reasoning]:
    store = ctx.reasoning
    keys = list(keys)
    return store.recall(kind_, keys) if store is not None and keys else {}


def strip_id(item: Any) -> Any:
    return without(item, "id")


def shown(item: Any) -> Any:
    """The item as a change record shows it: an ``encrypted_content`` as its size and hash, never its value."""
    wire = item.to_wire()
    content = encrypted(item)
    if isinstance(wire, dict) and content is not None:
        wire = {**wire, "encrypted_content": f"<encrypted {human_size(len(content))} sha256:"
                                             f"{lr.sealed_key(content)[:8]}>"}
    return wire


def id_removed(name: str, item: Any, index: int, why: str) -> Change:
    x = item_id(item)
    return Change(name, f"input[{index}].id", f"{kind(item) or 'item'} {x}: id removed, {why} (the item stays, with "
                  "its call_id, name, arguments and content)", x, None)


@dataclass(frozen=True, slots=True)
class Marked:
    """What the fast path keeps of a prefix: the upstream's latest teaching it was settled under (a
    :func:`llmfix.dialects.responses.learn.marker` value, None when there was none)."""

    marker: str | None


