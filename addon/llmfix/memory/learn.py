"""Learning tool calls (and reasoning) from responses, without touching them.

A model's tool calls are declared in the response that issues them; a broken client may later drop
the declaration from its history (Factory Droid trims its ``tool_calls``, see untangle-tool-run). This
module reads those calls so memory can restore them, and the :class:`~llmfix.memory.store.Reasoning` records
the reasoning repairs need:

- :class:`StreamLearner` watches an SSE response chunk by chunk as mitmproxy's stream callable sees it
  (transfer-decoded, still content-encoded, chunk boundaries unrelated to event boundaries) and reports
  each call once it is complete; :meth:`StreamLearner.feed_event` takes one event already framed (a
  WebSocket message of the Responses API carries one stream event, the JSON of an SSE ``data:`` line);
- an event that is an error object (``data: {"error": {…}}``, or a bare JSON chunk of one with no ``data:``, as
  Gemini reports a rejection inside a 200 stream: googleapis/js-genai ``processStreamResponse`` checks every chunk
  for an ``error`` key) goes to ``on_error`` when one is given, never to the assembler;
- :func:`learn_json_response` reads a non-streamed JSON response;
- :func:`calls_in_request` reads the calls a request's own history declares.

The shapes of each dialect live in its ``learn`` module (``dialects/*/learn.py``: its calls in requests and JSON
answers, its reasoning, and an SSE ``Assembler``); Content-Encoding is :mod:`llmfix.body.codec`'s.

Invariants: the learner only observes; it never changes, delays or drops a byte of the response, and
``feed`` never raises (an internal error, an undecodable body or a raising callback logs one warning
and ends learning for that stream). Each call id is reported at most once per stream, and a call
whose pieces may have been lost (an oversized event was dropped) is never reported with partial
arguments. Work per chunk is proportional to the chunk; buffers are bounded by ``max_buffer``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson

from llmfix.body import codec
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import named
from llmfix.memory.learn_base import Asked, Assembler
from llmfix.memory.store import Reasoning, ToolCall

logger = logging.getLogger(__name__)

OnCalls = Callable[[list[ToolCall]], None]
OnReasoning = Callable[[list[Reasoning]], None]
OnError = Callable[[bytes], None]
"""Gets the JSON text of an error event (``{"error": {…}}`` or ``[{"error": {…}}]``) as the stream carried it."""
ERROR_HEAD = 256
"""An error event names its ``"error"`` key within this many bytes (Google's bodies, pretty-printed, do in 4)."""


def error_of(data: bytes) -> dict[str, Any] | None:
    """The error object of an event's JSON, ``{"error": {…}}`` or Google's array of one (``[{"error": {…}}]``);
    None when it holds none (or is no JSON)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, list) and value:
        value = value[0]
    error = value.get("error") if isinstance(value, dict) else None
    return error if isinstance(error, dict) else None


def is_error_event(data: bytes) -> bool:
    """Is this event's JSON an error object (:func:`error_of`)? A cheap look at the head first: only a candidate is
    parsed."""
    if data.find(b'"error"', 0, ERROR_HEAD) == -1 or data[:ERROR_HEAD].lstrip()[:1] not in (b"{", b"["):
        return False
    return error_of(data) is not None


def _dialect(dialect: Dialect | str) -> Dialect:
    """``dialect``, or the dialect of that name (ValueError for a name no dialect has)."""
    return named(dialect) if isinstance(dialect, str) else dialect


def learn_json_response(dialect: Dialect | str, body: bytes, *, upstream: str = "",
                        on_reasoning: OnReasoning | None = None,
                        request: Callable[[], Any] | None = None) -> list[ToolCall]:
    """Tool calls in a non-streamed response body (already content-decoded); its :class:`Reasoning` records,
    stamped with ``upstream``, go to ``on_reasoning`` (``request``: the parsed body of the request it answers, read
    only if a record needs it, see :class:`~llmfix.memory.learn_base.Asked`). Never raises."""
    try:
        learner = _dialect(dialect).learn
        obj = orjson.loads(body)
        if not isinstance(obj, dict) and not (isinstance(obj, list) and learner.ARRAYS):
            raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
        if on_reasoning is not None:
            asked = Asked(upstream, request) if request is not None else Asked(upstream)
            records = [r if r.upstream else Reasoning(r.kind, r.key, r.value, upstream)
                       for r in learner.reasoning_in_response(obj, asked)]
            if records:
                on_reasoning(records)
        return learner.calls_in_response(obj)
    except Exception as e:
        logger.warning("llmfix learn: cannot read tool calls from a %s JSON response: %s", dialect, e)
        return []


def calls_in_request(dialect: Dialect | str, body: dict[str, Any], known: Callable[[Any], bool] = lambda _: False
                     ) -> list[ToolCall]:
    """Tool calls that a request's history declares, in order. Malformed entries are skipped.

    ``known(call_id)``: calls to leave out unread (each turn re-sends the whole history, and the ones
    remembered a moment ago need no ToolCall built again)."""
    learner = _dialect(dialect).learn
    if not isinstance(body, dict):
        return []
    return learner.calls_in_request(body, known)


# -- the stream learner ------------------------------------------------------------------------------


class StreamLearner:
    """Feed it the raw chunks of a streamed (SSE) response exactly as mitmproxy's stream callable receives them.

    ``on_calls`` receives the calls completed by each chunk (each call id once per stream), and at end
    of stream (``feed(b"")``) whatever is still pending with an id and a name. ``on_reasoning`` receives
    the :class:`Reasoning` records an assembler reports, each stamped with ``upstream`` when it has none;
    ``request`` gives the parsed body of the request the stream answers (:class:`~llmfix.memory.learn_base.Asked`);
    ``on_error`` receives each error event (:func:`is_error_event`), in the stream's order.
    """

    def __init__(
        self,
        dialect: Dialect | str,
        on_calls: OnCalls,
        *,
        on_reasoning: OnReasoning | None = None,
        upstream: str = "",
        content_encoding: str | None = None,
        max_buffer: int = 8 * 1024 * 1024,
        label: str = "",
        request: Callable[[], Any] | None = None,
        on_error: OnError | None = None,
    ) -> None:
        self.dialect = _dialect(dialect)
        self._on_calls = on_calls
        self._on_reasoning = on_reasoning
        self._on_error = on_error
        self.upstream = upstream
        self._max_buffer = max_buffer
        self._label = label or f"{dialect} stream"
        asked = Asked(upstream, request) if request is not None else Asked(upstream)
        self._assembler: Assembler = self.dialect.learn.Assembler(asked)
        self._buf = bytearray()  # decoded, LF-normalised bytes of the event(s) not yet complete
        self._cr = False  # the previous decoded piece ended in b"\r"
        self._bom_checked = False
        self._skipping = False  # dropping an oversized event up to its blank line
        self._warned_oversize = False
        self._emitted: set[str] = set()
        self._ended = False
        self.stopped = False
        self._decoders: list[codec.StreamDecoder] = []
        try:
            self._decoders = codec.stream_decoders(content_encoding, max_buffer)
        except ValueError as e:
            self._stop(str(e))

    def feed(self, chunk: bytes) -> None:
        """Observe one chunk; ``b""`` means end of stream. Never raises."""
        if self.stopped or self._ended:
            return
        out: list[ToolCall | Reasoning] = []
        try:
            if not self._decoders:
                if chunk:
                    self._take(chunk, out)
            else:
                for piece in codec.decode_pieces(self._decoders, chunk):
                    self._take(piece, out)
            if not chunk:
                self._ended = True
                self._end(out)
        except Exception as e:
            self._stop(f"{type(e).__name__}: {e}")
        self._report_safely(out)

    def feed_event(self, event: bytes | str) -> None:
        """Observe one whole stream event, the JSON text of one SSE ``data:`` field (a WebSocket message of
        the Responses API is exactly that); a ``[DONE]`` or a terminal event ends what is pending. Never raises.
        Not content-encoded (a WebSocket message is already whole and decompressed)."""
        if self.stopped or self._ended:
            return
        out: list[ToolCall | Reasoning] = []
        try:
            data = event.encode() if isinstance(event, str) else bytes(event)
            if len(data) > self._max_buffer:
                self._oversized()
            else:
                self._event(data, b"", out)
        except Exception as e:
            self._stop(f"{type(e).__name__}: {e}")
        self._report_safely(out)

    def end(self) -> None:
        """The stream (or socket) ended: report whatever is pending. Never raises."""
        if self.stopped or self._ended:
            return
        self._ended = True
        out: list[ToolCall | Reasoning] = []
        try:
            self._assembler.finish(out)
        except Exception as e:
            self._stop(f"{type(e).__name__}: {e}")
        self._report_safely(out)

    # -- internals ---------------------------------------------------------------------------------

    def _stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = True
            self._buf = bytearray()
            logger.warning("llmfix learn: stopped learning tool calls from %s: %s", self._label, reason)

    def _report_safely(self, out: list[ToolCall | Reasoning]) -> None:
        try:
            self._report(out)  # what was completed before any error is sound
        except Exception as e:
            self._stop(f"a learner's callback failed: {type(e).__name__}: {e}")

    def _report(self, out: list[ToolCall | Reasoning]) -> None:
        fresh: list[ToolCall] = []
        thoughts: list[Reasoning] = []
        for got in out:
            if isinstance(got, Reasoning):
                thoughts.append(got if got.upstream or not self.upstream else
                                Reasoning(got.kind, got.key, got.value, self.upstream))
            elif got.call_id not in self._emitted:
                self._emitted.add(got.call_id)
                fresh.append(got)
        if fresh:
            self._on_calls(fresh)
        if thoughts and self._on_reasoning is not None:
            self._on_reasoning(thoughts)

    def _take(self, data: bytes, out: list[ToolCall | Reasoning]) -> None:
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

    def _dispatch(self, event: bytes, out: list[ToolCall | Reasoning]) -> None:
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
            if not data_lines:  # a bare JSON chunk (Gemini's error inside a 200 stream), or nothing to read
                if self._on_error is not None and is_error_event(event):
                    self._on_error(event)
                return
            data = b"\n".join(data_lines)
        self._event(data, name, out)

    def _event(self, data: bytes, name: bytes, out: list[ToolCall | Reasoning]) -> None:
        """One event's data (``name``: its SSE ``event:`` field, or empty) to the assembler."""
        if len(data) < 16 and data.strip() == b"[DONE]":
            self._assembler.finish(out)
            return
        if self._on_error is not None and is_error_event(data):
            self._on_error(data)
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

    def _end(self, out: list[ToolCall | Reasoning]) -> None:
        if self._cr:
            self._cr = False
        if not self._bom_checked:
            self._bom_checked = True
        if self._buf and not self._skipping:
            self._dispatch(bytes(self._buf).strip(b"\n"), out)
        self._buf = bytearray()
        self._assembler.finish(out)
