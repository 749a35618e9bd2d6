"""DESIGN §4's promises as checks on one (input, outcome) pair; each raises AssertionError saying what broke.

Media parts are recognised in any dialect by their ``type`` and named by their *payload* — the base64
text of a data URL or of a base64 source, an http URL, or a file id — which is exactly what llmfix
hashes for ``sha256:…`` in its change records (:mod:`llmfix.body.media`), so a dropped part can be found
in ``Change.dropped`` by its digest.
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from PIL import Image

from llmfix.body.media import digest
from llmfix.catalogue import takes
from llmfix.engine import Outcome
from llmfix.profiles import ProfileTable
from tests.upstreams import rules

MEDIA_TYPES = frozenset({"image_url", "input_image", "input_file", "file", "input_audio", "image", "document"})
SKIP_KEYS = frozenset({"type", "role"})  # structural strings a repair may legitimately rewrite
PLACEHOLDER = " omitted: "  # "[1 image from this tool result omitted: …]" (hoist), "[image omitted: …]" (omit)


def _strip_data(url: str) -> str:
    return url.partition(",")[2] if url.startswith("data:") else url


def is_media(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") in MEDIA_TYPES


def payload(part: dict[str, Any]) -> str:
    """The text llmfix hashes for this media part."""
    t = part["type"]
    if t == "image_url":
        return _strip_data(part["image_url"]["url"])
    if t == "file":
        f = part["file"]
        return _strip_data(f["file_data"]) if isinstance(f.get("file_data"), str) else str(f.get("file_id", ""))
    if t == "input_audio":
        return part["input_audio"]["data"]
    if t == "input_image":
        return _strip_data(part["image_url"]) if part.get("image_url") else part.get("file_id") or ""
    if t == "input_file":
        if part.get("file_data"):
            return _strip_data(part["file_data"])
        return part.get("file_url") or part.get("file_id") or ""
    src = part["source"]  # anthropic image / document
    if src.get("type") == "base64":
        return src["data"]
    return src.get("url") or str(src.get("file_id", src))


def kind(part: dict[str, Any]) -> str:
    t = part["type"]
    if t in ("image_url", "input_image", "image"):
        return "image"
    if t == "input_audio":
        return "audio"
    return "file"


def media(value: Any) -> Iterator[dict[str, Any]]:
    """Every media part in a JSON value, in document order."""
    if is_media(value):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from media(v)
    elif isinstance(value, list):
        for v in value:
            yield from media(v)


def strings(value: Any, key: str | None = None) -> Iterator[str]:
    """Every string leaf outside media parts, except the values of structural keys."""
    if isinstance(value, str):
        if key not in SKIP_KEYS:
            yield value
    elif is_media(value):
        return
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v, key)


def canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def body_of(raw: bytes, outcome: Outcome) -> tuple[bytes, Any]:
    """The bytes llmfix sends upstream and their JSON."""
    out = outcome.body if outcome.status == "repaired" else raw
    assert out is not None
    return out, orjson.loads(out)


# -------------------------------------------------------------------------------------------- promises


def nothing_lost(sent: dict[str, Any], got: dict[str, Any], outcome: Outcome, *, host: str, model: str | None) -> None:
    """Promise 1: every text and media part reaches the upstream, or is a visible placeholder + a dropped record.

    Also: no media part is invented or duplicated, forwarded parts keep their keys and values, media keep
    their order, and a part is only dropped for a reason the profile and the model catalogue give.
    """
    out_strings = list(strings(got))
    blanks_dropped = "drop-empty-text" in outcome.repairs  # whitespace-only blocks go, as Anthropic's rule reads it
    for text in strings(sent):
        if blanks_dropped and not text.strip():
            continue
        assert any(text in s for s in out_strings), f"text {text!r} is missing from the output"
    sent_media, got_media = list(media(sent)), list(media(got))
    fitted = fitted_of(outcome)  # an image fit-images made into one the upstream takes is the same image
    sent_count = Counter(fitted.get(canon(p), canon(p)) for p in sent_media)
    got_count = Counter(map(canon, got_media))
    extra = got_count - sent_count
    assert not extra, f"media invented or duplicated: {list(extra.elements())[:3]}"
    dropped_lines = [d for c in outcome.changes for d in c.dropped]
    resolved = ProfileTable().resolve(host, 443, model)
    for part in sent_media:
        key = fitted.get(canon(part), canon(part))
        if got_count[key] > 0:
            got_count[key] -= 1
            continue
        h = digest(payload(part))
        assert any(f"sha256:{h}" in d for d in dropped_lines), f"media part {part} vanished without a dropped record"
        assert any(PLACEHOLDER in s for s in out_strings), f"media part {part} dropped without a placeholder"
        modalities = resolved.modalities
        may_drop = (kind(part) in ("image", "audio") and not takes(kind(part), modalities)) or (
            kind(part) == "file" and modalities is not None and "pdf" not in modalities) or (
            part["type"] == "input_image" and not part.get("image_url")
            and resolved.profile.responses_image_requires_url) or (kind(part) == "image" and undecodable(part))
        assert may_drop, f"media part {part} dropped although profile {resolved.profile.name} / {model} takes it"


def fitted_of(outcome: Outcome) -> dict[bytes, bytes]:
    """canon(an image part sent) → canon(the part fit-images sent in its place), from its change records."""
    return {canon(c.before): canon(c.after) for c in outcome.changes if c.repair == "fit-images" and not c.dropped}


def undecodable(part: dict[str, Any]) -> bool:
    """Whether an inline image's bytes are no image at all (checked with Pillow, apart from llmfix's own code): an
    upstream refuses it, so dropping it for a placeholder loses nothing the model could have seen."""
    text = payload(part)
    if text.startswith(("http://", "https://")) or not text or (part["type"] == "input_image" and not \
            part.get("image_url")):
        return False
    try:
        raw = base64.b64decode(text, validate=False)
    except ValueError:
        return True
    if raw.lstrip()[:1] == b"<":
        return b"<svg" not in raw[:4096]  # an SVG is rasterized, never dropped for being one
    try:
        with Image.open(io.BytesIO(raw)) as im:
            im.load()
    except Exception:
        return True
    return False


def _owned_media(dialect: str, items: list[Any]) -> list[tuple[int, str | None, bytes]]:
    """(item index, call id of the tool result holding it or None, canonical part) of every media part, in order."""
    found: list[tuple[int, str | None, bytes]] = []
    for i, item in enumerate(items):
        if dialect == "messages" and isinstance(item, dict) and isinstance(item.get("content"), list):
            for block in item["content"]:
                owner = block.get("tool_use_id") if isinstance(block, dict) and block.get("type") == "tool_result" \
                    else None
                found += [(i, owner, canon(p)) for p in media(block)]
            continue
        owner = None
        if isinstance(item, dict):
            owner = item.get("tool_call_id") if item.get("role") == "tool" else item.get("call_id") \
                if str(item.get("type", "")).endswith("_call_output") else None
        found += [(i, owner, canon(p)) for p in media(item)]
    return found


def _result_index(dialect: str, items: list[Any], call_id: str) -> int:
    """Where the tool result for ``call_id`` is in ``items`` (a converted orphan names its call in its text)."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        if item.get("role") == "user" and any(f"tool call {call_id};" in s for s in strings(item)):
            return i  # an orphan kept as a user message (untangle-tool-run, pair-tool-calls), any dialect
        if dialect == "chat" and item.get("tool_call_id") == call_id:
            return i
        if dialect == "responses" and item.get("call_id") == call_id and "output" in item:
            return i
        if dialect == "messages" and any(isinstance(b, dict) and b.get("tool_use_id") == call_id
                                         for b in item.get("content") or [] if isinstance(item.get("content"), list)):
            return i
    raise AssertionError(f"the tool result of {call_id} is missing from the output")


def media_in_place(dialect: str, sent_items: list[Any], got_items: list[Any]) -> None:
    """Promise 1, "in the same order relative to its tool call": each tool result's media reach the upstream
    in their order, at or after that result; other media keep their relative order.

    Checked for the parts that occur once in the request (copies of one image are interchangeable, so their
    places are ambiguous; ``nothing_lost`` counts them)."""
    got = _owned_media(dialect, got_items)
    sent = _owned_media(dialect, sent_items)
    once = {p for p, n in Counter(p for _, _, p in sent).items() if n == 1}
    used: set[int] = set()
    by_owner: dict[str | None, list[int]] = {}
    for _, owner, part in sent:
        if part not in once:
            continue
        floor = _result_index(dialect, got_items, owner) if owner else -1  # "": an empty id, renamed
        match = next((n for n, (i, _, p) in enumerate(got) if n not in used and p == part and i >= floor), None)
        if match is None:  # dropped (nothing_lost checks the record and the placeholder), or moved too early
            early = [i for n, (i, _, p) in enumerate(got) if n not in used and p == part]
            assert not early, f"a media part of {owner} moved before its tool result (to item {early[0]})"
            continue
        used.add(match)
        by_owner.setdefault(owner, []).append(match)
    for owner, positions in by_owner.items():
        assert positions == sorted(positions), f"media of {owner or 'non-tool messages'} changed their order"


def same_top_level(sent: dict[str, Any], got: dict[str, Any], key: str) -> None:
    """Promise 2 (minimal change): every top-level field but the message list is kept, in order, as sent."""
    assert list(got) == list(sent), f"top-level keys changed: {list(sent)} → {list(got)}"
    for k, v in sent.items():
        if k != key:
            assert got[k] == v, f"top-level field {k!r} changed"


def _may_change(item: Any) -> bool:
    """Items a repair rewrites: tool results, and the assistant message whose declarations come back."""
    if not isinstance(item, dict):
        return True
    return item.get("role") == "tool" or bool(item.get("tool_calls")) or item.get("role") == "assistant" or \
        str(item.get("type", "")).endswith("_call_output")


def _placeholder_of(sent: Any, got: Any, dropped: list[str]) -> bool:
    """``got`` is the placeholder text part a repair put where media part ``sent`` was, with a dropped record."""
    return is_media(sent) and isinstance(got, dict) and got.get("type") in ("text", "input_text") \
        and PLACEHOLDER in str(got.get("text", "")) \
        and any(f"sha256:{digest(payload(sent))}" in d for d in dropped)


def _same_but_dropped_media(sent: Any, got: Any, dropped: list[str], fitted: dict[bytes, bytes] | None = None
                            ) -> bool:
    """``got`` equals ``sent`` (keys, order, values) except for media parts replaced by their placeholders, or by the
    image fit-images made of them (``fitted``, see :func:`fitted_of`)."""
    if isinstance(sent, dict) and isinstance(got, dict):
        if _placeholder_of(sent, got, dropped):
            return True
        if fitted and is_media(sent) and fitted.get(canon(sent)) == canon(got):
            return True
        return list(sent) == list(got) and all(_same_but_dropped_media(sent[k], got[k], dropped, fitted)
                                               for k in sent)
    if isinstance(sent, list) and isinstance(got, list):
        return len(sent) == len(got) and all(
            _same_but_dropped_media(a, b, dropped, fitted) for a, b in zip(sent, got, strict=True))
    return orjson.dumps(sent) == orjson.dumps(got)


def dropped_of(outcome: Any) -> list[str]:
    """The ``dropped`` records of an outcome's changes (each names the part's ``sha256:…``)."""
    return [d for c in outcome.changes for d in c.dropped]


def untouched_items_kept(sent_items: list[Any], got_items: list[Any], dropped: list[str] | None = None,
                         may_change: Callable[[int], bool] | None = None,
                         fitted: dict[bytes, bytes] | None = None) -> None:
    """Promise 2 (minimal change): every other item reaches the upstream with the same keys, order and values —
    or, where a change record drops media (a model that takes none), with each dropped part replaced by its
    placeholder and nothing else different; or with an image fit-images fitted (``fitted``) in place of one the
    upstream would refuse. ``may_change(k)``: items a repair may legitimately rewrite."""
    got = Counter(orjson.dumps(i) for i in got_items)
    for k, item in enumerate(sent_items):
        if (may_change or (lambda k: _may_change(sent_items[k])))(k):
            continue
        key = orjson.dumps(item)
        if got[key] > 0:
            got[key] -= 1
            continue
        match = next((g for g in got_items if got[orjson.dumps(g)] > 0 and (dropped or fitted) and any(media(item))
                      and _same_but_dropped_media(item, g, dropped or [], fitted)), None)
        assert match is not None, f"an item no repair should touch changed or vanished: {item}"
        got[orjson.dumps(match)] -= 1


def accepted(rule_set: str, path: str, got: dict[str, Any]) -> None:
    """The strict upstream accepts what llmfix sends (tests/upstreams/rules.py)."""
    rejection = rules.check(rule_set, path, got)
    assert rejection is None, f"{rule_set} rejects the output: {rejection.status} {rejection.reason}: " \
                              f"{rejection.body}"


def is_prefix(earlier: list[Any], later: list[Any]) -> None:
    """Promise 4 (cache-stable prefixes): turn N's repaired list is, item by item and byte by byte (orjson, key
    order kept), the start of turn N+1's."""
    assert len(later) >= len(earlier), f"turn N+1 has fewer items ({len(later)}) than turn N ({len(earlier)})"
    for i, (a, b) in enumerate(zip(earlier, later, strict=False)):
        assert orjson.dumps(a) == orjson.dumps(b), f"item {i} differs between turn N and turn N+1:\n{a}\n{b}"
