"""Learning tool calls from responses, without touching them.

A model's tool calls are declared in the response that issues them; a broken client may later drop
the declaration from its history (B2). This module reads those calls so memory can restore them:

- :class:`StreamLearner` watches an SSE response chunk by chunk as mitmproxy's stream callable sees it
  (transfer-decoded, still content-encoded, chunk boundaries unrelated to event boundaries) and reports
  each call once it is complete;
- :func:`learn_json_response` reads a non-streamed JSON response;
- :func:`calls_in_request` reads the calls a request's own history declares.

Invariants: the learner only observes; it never changes, delays or drops a byte of the response, and
``feed`` never raises (an internal error, an undecodable body or a raising callback logs one warning
and ends learning for that stream). Each call id is reported at most once per stream, and a call
whose pieces may have been lost (an oversized event was dropped) is never reported with partial
arguments. Work per chunk is proportional to the chunk; buffers are bounded by ``max_buffer``.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import orjson

from llmfix.memory.store import ToolCall

logger = logging.getLogger(__name__)

DIALECTS = ("chat", "responses", "messages")

OnCalls = Callable[[list[ToolCall]], None]


# -- shapes shared by requests, JSON responses and streams ---------------------------------------


def _json_text(value: Any) -> str:
    """The JSON text of an already-parsed value (Anthropic ``input``, or non-string arguments)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _chat_call(tc: Any) -> ToolCall | None:
    """A Chat ``tool_calls[]`` entry (function or custom) → ToolCall, or None if incomplete."""
    if not isinstance(tc, dict):
        return None
    call_id = tc.get("id")
    if tc.get("type") == "custom" and isinstance(custom := tc.get("custom"), dict):
        name, args, kind = custom.get("name"), custom.get("input", ""), "custom"
    else:
        fn = tc.get("function")
        if not isinstance(fn, dict):
            return None
        name, args, kind = fn.get("name"), fn.get("arguments", ""), "function"
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    return ToolCall(call_id, name, _json_text(args if args is not None else ""), "chat", kind)


_RESPONSES_KINDS = {"function_call": "function", "custom_tool_call": "custom"}


def _responses_call(item: Any) -> ToolCall | None:
    """A Responses ``function_call`` / ``custom_tool_call`` item → ToolCall, or None."""
    if not isinstance(item, dict):
        return None
    item_type = item.get("type")
    kind = _RESPONSES_KINDS.get(item_type) if isinstance(item_type, str) else None
    if kind is None:
        return None
    call_id, name = item.get("call_id"), item.get("name")
    args = item.get("arguments" if kind == "function" else "input", "")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    return ToolCall(call_id, name, _json_text(args if args is not None else ""), "responses", kind)


def _anthropic_call(block: Any) -> ToolCall | None:
    """An Anthropic ``tool_use`` block → ToolCall (arguments = JSON text of ``input``), or None."""
    if not isinstance(block, dict) or block.get("type") != "tool_use":
        return None
    call_id, name = block.get("id"), block.get("name")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    return ToolCall(call_id, name, _json_text(block.get("input", {})), "messages")


def _check_dialect(dialect: str) -> None:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _calls_in_response_object(dialect: str, obj: Any) -> list[ToolCall]:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    calls: list[ToolCall | None]
    if dialect == "chat":
        calls = [
            _chat_call(tc)
            for choice in _dicts(obj.get("choices"))
            if isinstance(message := choice.get("message"), dict)
            for tc in _dicts(message.get("tool_calls"))
        ]
    elif dialect == "responses":
        calls = [_responses_call(item) for item in _dicts(obj.get("output"))]
    else:
        calls = [_anthropic_call(block) for block in _dicts(obj.get("content"))]
    return [c for c in calls if c is not None]


def learn_json_response(dialect: str, body: bytes) -> list[ToolCall]:
    """Tool calls in a non-streamed response body (already content-decoded). Never raises."""
    try:
        _check_dialect(dialect)
        return _calls_in_response_object(dialect, orjson.loads(body))
    except Exception as e:
        logger.warning("llmfix learn: cannot read tool calls from a %s JSON response: %s", dialect, e)
        return []


def calls_in_request(dialect: str, body: dict[str, Any], known: Callable[[Any], bool] = lambda _: False
                     ) -> list[ToolCall]:
    """Tool calls that a request's history declares, in order. Malformed entries are skipped.

    ``known(call_id)``: calls to leave out unread (each turn re-sends the whole history, and the ones
    remembered a moment ago need no ToolCall built again)."""
    _check_dialect(dialect)
    if not isinstance(body, dict):
        return []
    calls: list[ToolCall | None]
    if dialect == "chat":
        calls = [
            _chat_call(tc)
            for msg in _dicts(body.get("messages"))
            if msg.get("role") == "assistant"
            for tc in _dicts(msg.get("tool_calls"))
            if not known(tc.get("id"))
        ]
    elif dialect == "responses":
        calls = [_responses_call(item) for item in _dicts(body.get("input"))
                 if isinstance(kind := item.get("type"), str) and kind in _RESPONSES_KINDS
                 and not known(item.get("call_id"))]
    else:
        calls = [
            _anthropic_call(block)
            for msg in _dicts(body.get("messages"))
            if msg.get("role") == "assistant"
            for block in _dicts(msg.get("content"))
            if not known(block.get("id"))
        ]
    return [c for c in calls if c is not None]


# -- content decoding ------------------------------------------------------------------------------


class _Decoder(Protocol):
    def decode(self, data: bytes) -> Iterator[bytes]: ...


class _ZlibDecoder:
    """gzip (possibly multi-member) or zlib/raw deflate, output in pieces of at most ``limit`` bytes."""

    def __init__(self, encoding: str, limit: int) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._limit = limit
        self._head = b""  # deflate: bytes held until the zlib header can be recognised
        self._d: Any = zlib.decompressobj(47) if self._gzip else None

    def decode(self, data: bytes) -> Iterator[bytes]:
        if self._d is None:
            self._head += data
            if len(self._head) < 2 and data:
                return
            data, self._head = self._head, b""
            cmf_flg = int.from_bytes(data[:2]) if len(data) >= 2 else 0
            is_zlib = data[:1] and data[0] & 0x0F == 8 and cmf_flg % 31 == 0
            self._d = zlib.decompressobj(15 if is_zlib else -15)
        while data:
            out = self._d.decompress(data, self._limit)
            if out:
                yield out
            if self._d.eof:  # end of a gzip member; another may follow
                data = self._d.unused_data
                if data and self._gzip:
                    self._d = zlib.decompressobj(47)
                    continue
                return
            data = self._d.unconsumed_tail


class _BrotliDecoder:
    """br. The output limit is soft (brotli hands out at least ~32 KiB at a time)."""

    def __init__(self, limit: int) -> None:
        import brotli

        self._d = brotli.Decompressor()
        self._limit = limit

    def decode(self, data: bytes) -> Iterator[bytes]:
        if not data:
            return
        if self._d.is_finished():
            raise ValueError("data after the end of the brotli stream")
        out = self._d.process(data, output_buffer_limit=self._limit)
        # can_accept_more_data() only reports buffered *input*; output held back by the limit is
        # drained with empty input until none is left (brotli 1.2).
        while out:
            yield out
            out = self._d.process(b"", output_buffer_limit=self._limit) if not self._d.is_finished() else b""


class _ZstdDecoder:
    """zstd, possibly several frames."""

    def __init__(self, limit: int) -> None:
        try:
            from compression.zstd import ZstdDecompressor  # type: ignore[import-not-found]
        except ImportError:
            from backports.zstd import ZstdDecompressor
        self._new = ZstdDecompressor
        self._d = ZstdDecompressor()
        self._limit = limit

    def decode(self, data: bytes) -> Iterator[bytes]:
        while data:
            yield self._d.decompress(data, self._limit)
            while not self._d.needs_input and not self._d.eof:
                yield self._d.decompress(b"", self._limit)
            if not self._d.eof:
                return
            data = self._d.unused_data
            self._d = self._new()


def _make_decoders(content_encoding: str | None, limit: int) -> list[_Decoder]:
    """Decoders to apply in order (the reverse of the encodings listed); ValueError if unknown."""
    decoders: list[_Decoder] = []
    for enc in reversed([e.strip().lower() for e in (content_encoding or "").split(",")]):
        if enc in ("", "identity"):
            continue
        try:
            if enc in ("gzip", "x-gzip", "deflate"):
                decoders.append(_ZlibDecoder(enc, limit))
            elif enc == "br":
                decoders.append(_BrotliDecoder(limit))
            elif enc == "zstd":
                decoders.append(_ZstdDecoder(limit))
            else:
                raise ValueError(f"unsupported content-encoding {enc!r}")
        except ImportError as e:
            raise ValueError(f"no decoder for content-encoding {enc!r}: {e}") from e
    return decoders


def _decode_all(decoders: list[_Decoder], data: bytes) -> Iterator[bytes]:
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    for piece in first.decode(data):
        if piece:
            yield from _decode_all(rest, piece)


# -- per-dialect assemblers --------------------------------------------------------------------------


class _Assembler(Protocol):
    def wants(self, event: bytes) -> bool:
        """Cheap pre-check on the raw event bytes: may this event matter?"""
        ...

    def on_event(self, data: Any, out: list[ToolCall]) -> None: ...

    def finish(self, out: list[ToolCall]) -> None:
        """End of stream (or [DONE]): report whatever is pending and complete enough."""
        ...

    def forget_partial(self) -> None:
        """An event was lost: drop calls that may be missing a piece."""
        ...


class _ChatAssembler:
    """``choices[i].delta.tool_calls[]`` reassembled by (choice index, tool-call index)."""

    def __init__(self) -> None:
        # (choice index, tool-call index) -> [id, name, argument fragments, kind]
        self._pending: dict[tuple[Any, Any], list[Any]] = {}

    def wants(self, event: bytes) -> bool:
        return b"tool_calls" in event or (bool(self._pending) and b"finish_reason" in event)

    def on_event(self, data: Any, out: list[ToolCall]) -> None:
        for choice in _dicts(data.get("choices") if isinstance(data, dict) else None):
            ci = choice.get("index", 0)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                for pos, tc in enumerate(_dicts(delta.get("tool_calls"))):
                    self._add(ci, tc.get("index", pos), tc, out)
            if choice.get("finish_reason"):
                self._emit([k for k in self._pending if k[0] == ci], out)

    def _add(self, ci: Any, ti: Any, tc: dict[str, Any], out: list[ToolCall]) -> None:
        key = (ci, ti)
        call_id = tc.get("id")
        entry = self._pending.get(key)
        if entry is not None and isinstance(call_id, str) and call_id and entry[0] and call_id != entry[0]:
            self._emit([key], out)  # a vendor reusing one index for several whole calls
            entry = None
        if entry is None:
            entry = self._pending[key] = [None, None, [], "function"]
        if isinstance(call_id, str) and call_id and not entry[0]:
            entry[0] = call_id
        if tc.get("type") == "custom" or isinstance(tc.get("custom"), dict):
            entry[3] = "custom"
        fn = tc.get("custom") if entry[3] == "custom" else tc.get("function")
        if isinstance(fn, dict):
            name, piece = fn.get("name"), fn.get("input" if entry[3] == "custom" else "arguments")
            if isinstance(name, str) and name and not entry[1]:
                entry[1] = name
            if isinstance(piece, str):
                entry[2].append(piece)

    def _emit(self, keys: list[tuple[Any, Any]], out: list[ToolCall]) -> None:
        for key in keys:  # insertion order: the order the calls began
            call_id, name, pieces, kind = self._pending.pop(key)
            if call_id and name:
                out.append(ToolCall(call_id, name, "".join(pieces), "chat", kind))

    def finish(self, out: list[ToolCall]) -> None:
        self._emit(list(self._pending), out)

    def forget_partial(self) -> None:
        self._pending.clear()


class _ResponsesAssembler:
    """Responses ``function_call`` / ``custom_tool_call`` items, keyed by item id, reported by call_id."""

    _ITEM_EVENTS = ("response.output_item.added", "response.output_item.done")
    _DELTA_EVENTS = ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta")
    _DONE_EVENTS = ("response.function_call_arguments.done", "response.custom_tool_call_input.done")
    _FINAL_EVENTS = ("response.completed", "response.incomplete")

    def __init__(self) -> None:
        # item key -> [call_id, name, argument fragments, kind]
        self._pending: dict[str, list[Any]] = {}
        self._by_index: dict[Any, str] = {}

    def wants(self, event: bytes) -> bool:
        return b"_call" in event

    def _key(self, data: dict[str, Any], item_id: Any) -> str | None:
        if isinstance(item_id, str) and item_id in self._pending:
            return item_id
        key = self._by_index.get(data.get("output_index"))
        return key if key in self._pending else None

    def on_event(self, data: Any, out: list[ToolCall]) -> None:
        if not isinstance(data, dict):
            return
        kind = data.get("type")
        if kind in self._ITEM_EVENTS:
            item = data.get("item")
            call = _responses_call(item)
            if call is None or not isinstance(item, dict):
                return
            key = item.get("id") if isinstance(item.get("id"), str) else f"#{data.get('output_index')}"
            if kind == "response.output_item.done":
                entry = self._pending.pop(key, None)
                if entry is not None and not call.arguments and entry[2]:
                    call = ToolCall(call.call_id, call.name, "".join(entry[2]), "responses", call.kind)
                out.append(call)
            elif key not in self._pending:
                self._pending[key] = [call.call_id, call.name, [call.arguments] if call.arguments else [], call.kind]
                self._by_index[data.get("output_index")] = key
        elif kind in self._DELTA_EVENTS:
            key = self._key(data, data.get("item_id"))
            if key is not None and isinstance(piece := data.get("delta"), str):
                self._pending[key][2].append(piece)
        elif kind in self._DONE_EVENTS:
            key = self._key(data, data.get("item_id"))
            full = data.get("arguments" if kind == self._DONE_EVENTS[0] else "input")
            if key is not None and isinstance(full, str):
                self._pending[key][2] = [full]
        elif kind in self._FINAL_EVENTS:
            response = data.get("response")
            if isinstance(response, dict):
                out.extend(c for c in map(_responses_call, _dicts(response.get("output"))) if c is not None)
                self.forget_partial()

    def finish(self, out: list[ToolCall]) -> None:
        for call_id, name, pieces, kind in self._pending.values():
            out.append(ToolCall(call_id, name, "".join(pieces), "responses", kind))
        self.forget_partial()

    def forget_partial(self) -> None:
        self._pending.clear()
        self._by_index.clear()


class _AnthropicAssembler:
    """``tool_use`` content blocks; ``input_json_delta`` fragments joined per block index."""

    def __init__(self) -> None:
        # block index -> [id, name, input (from content_block_start), fragments]
        self._pending: dict[Any, list[Any]] = {}

    def wants(self, event: bytes) -> bool:
        return b"tool_use" in event or (
            bool(self._pending) and (b"input_json_delta" in event or b"content_block_stop" in event)
        )

    def on_event(self, data: Any, out: list[ToolCall]) -> None:
        if not isinstance(data, dict):
            return
        kind, index = data.get("type"), data.get("index")
        if kind == "content_block_start":
            call = _anthropic_call(data.get("content_block"))
            if call is not None:
                self._pending[index] = [call.call_id, call.name, call.arguments, []]
        elif kind == "content_block_delta" and index in self._pending:
            delta = data.get("delta")
            if isinstance(delta, dict) and isinstance(piece := delta.get("partial_json"), str):
                self._pending[index][3].append(piece)
        elif kind == "content_block_stop" and index in self._pending:
            self._emit(index, out)

    def _emit(self, index: Any, out: list[ToolCall]) -> None:
        call_id, name, start_input, pieces = self._pending.pop(index)
        out.append(ToolCall(call_id, name, "".join(pieces) or start_input, "messages"))

    def finish(self, out: list[ToolCall]) -> None:
        for index in list(self._pending):
            self._emit(index, out)

    def forget_partial(self) -> None:
        self._pending.clear()


_ASSEMBLERS: dict[str, Callable[[], _Assembler]] = {
    "chat": _ChatAssembler,
    "responses": _ResponsesAssembler,
    "messages": _AnthropicAssembler,
}


# -- the stream learner ------------------------------------------------------------------------------


class StreamLearner:
    """Feed it the raw chunks of a streamed (SSE) response exactly as mitmproxy's stream callable receives them.

    ``on_calls`` receives the calls completed by each chunk (each call id once per stream), and at end
    of stream (``feed(b"")``) whatever is still pending with an id and a name.
    """

    def __init__(
        self,
        dialect: str,
        on_calls: OnCalls,
        *,
        content_encoding: str | None = None,
        max_buffer: int = 8 * 1024 * 1024,
        label: str = "",
    ) -> None:
        _check_dialect(dialect)
        self.dialect = dialect
        self._on_calls = on_calls
        self._max_buffer = max_buffer
        self._label = label or f"{dialect} stream"
        self._assembler = _ASSEMBLERS[dialect]()
        self._buf = bytearray()  # decoded, LF-normalised bytes of the event(s) not yet complete
        self._cr = False  # the previous decoded piece ended in b"\r"
        self._bom_checked = False
        self._skipping = False  # dropping an oversized event up to its blank line
        self._warned_oversize = False
        self._emitted: set[str] = set()
        self._ended = False
        self.stopped = False
        self._decoders: list[_Decoder] = []
        try:
            self._decoders = _make_decoders(content_encoding, max_buffer)
        except ValueError as e:
            self._stop(str(e))

    def feed(self, chunk: bytes) -> None:
        """Observe one chunk; ``b""`` means end of stream. Never raises."""
        if self.stopped or self._ended:
            return
        out: list[ToolCall] = []
        try:
            if not self._decoders:
                if chunk:
                    self._take(chunk, out)
            else:
                for piece in _decode_all(self._decoders, chunk):
                    self._take(piece, out)
            if not chunk:
                self._ended = True
                self._end(out)
        except Exception as e:
            self._stop(f"{type(e).__name__}: {e}")
        try:
            self._report(out)  # calls completed before any error are sound
        except Exception as e:
            self._stop(f"on_calls callback failed: {type(e).__name__}: {e}")

    # -- internals ---------------------------------------------------------------------------------

    def _stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = True
            self._buf = bytearray()
            logger.warning("llmfix learn: stopped learning tool calls from %s: %s", self._label, reason)

    def _report(self, out: list[ToolCall]) -> None:
        fresh: list[ToolCall] = []
        for call in out:
            if call.call_id not in self._emitted:
                self._emitted.add(call.call_id)
                fresh.append(call)
        if fresh:
            self._on_calls(fresh)

    def _take(self, data: bytes, out: list[ToolCall]) -> None:
        """Append decoded bytes, with CRLF / CR line ends normalised to LF, and dispatch whole events."""
        if not self._bom_checked:
            if len(data) < 3 and b"\xef\xbb\xbf".startswith(bytes(self._buf) + data):
                self._buf += data  # might still be a BOM; wait for more
                return
            data, self._buf = bytes(self._buf) + data, bytearray()
            self._bom_checked = True
            data = data.removeprefix(b"\xef\xbb\xbf")
        if self._cr or b"\r" in data:
            if self._cr:
                data, self._cr = b"\r" + data, False
            if data.endswith(b"\r"):  # maybe the first half of a CRLF
                data, self._cr = data[:-1], True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._skipping:
            data = self._skip(data)
        buf = self._buf
        pos = len(buf) - 1 if buf else 0  # a boundary may straddle the old end; nothing earlier holds one
        buf += data
        consumed = 0
        while (end := buf.find(b"\n\n", pos)) != -1:
            if end - consumed > self._max_buffer:
                self._oversized()
            else:
                self._dispatch(bytes(buf[consumed:end]), out)
            consumed = pos = end + 2
        if consumed:
            del buf[:consumed]
        if len(buf) > self._max_buffer + 1:  # + 1: a complete event of max_buffer bytes may await its blank line
            self._oversized()
            self._skipping = True
            self._buf = bytearray(b"\n" if buf.endswith(b"\n") else b"")

    def _skip(self, data: bytes) -> bytes:
        """While dropping an oversized event: discard up to and including its terminating blank line."""
        joined = (b"\n" if self._buf.endswith(b"\n") else b"") + data
        end = joined.find(b"\n\n")
        if end == -1:
            self._buf = bytearray(b"\n" if joined.endswith(b"\n") else b"")
            return b""
        self._skipping = False
        self._buf = bytearray()
        return joined[end + 2 :]

    def _oversized(self) -> None:
        """An event exceeds max_buffer: it is dropped, and with it every call it may have belonged to."""
        if not self._warned_oversize:
            self._warned_oversize = True
            logger.warning(
                "llmfix learn: dropped an SSE event larger than %d bytes in %s; calls in progress are not learned",
                self._max_buffer,
                self._label,
            )
        self._assembler.forget_partial()

    def _dispatch(self, event: bytes, out: list[ToolCall]) -> None:
        name = b""
        if event.startswith(b"data: ") and b"\n" not in event:  # the common case: one data line
            data = event[6:]
        else:
            data_lines: list[bytes] = []
            for line in event.split(b"\n"):
                if line[:1] in (b"d", b"e"):  # data: / event: (comments start with ":"; id:, retry: ignored)
                    field, _, value = line.partition(b":")
                    value = value[1:] if value.startswith(b" ") else value
                    if field == b"data":
                        data_lines.append(value)
                    elif field == b"event":
                        name = value
            if not data_lines:
                return
            data = b"\n".join(data_lines)
        if len(data) < 16 and data.strip() == b"[DONE]":
            self._assembler.finish(out)
            return
        if not self._assembler.wants(data):
            return
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"invalid JSON in an SSE event ({e})") from None
        if name and isinstance(parsed, dict) and "type" not in parsed:
            parsed["type"] = name.decode("utf-8", "replace")
        self._assembler.on_event(parsed, out)

    def _end(self, out: list[ToolCall]) -> None:
        if self._cr:
            self._cr = False
        if not self._bom_checked:
            self._bom_checked = True
        if self._buf and not self._skipping:
            self._dispatch(bytes(self._buf).strip(b"\n"), out)
        self._buf = bytearray()
        self._assembler.finish(out)
