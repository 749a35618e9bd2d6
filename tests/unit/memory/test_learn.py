"""Learning tool calls from captured and hand-written responses, however the bytes are chunked."""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import brotli
import pytest
from backports import zstd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfix.memory.learn import StreamLearner, calls_in_request, learn_json_response
from llmfix.memory.store import ToolCall

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# Expected calls, in order, as they appear in the captured streams.
CAPTURES: dict[str, tuple[str, str, list[ToolCall]]] = {
    "droid-chat": (
        "chat",
        "droid/two_images__turn1_response.sse.txt",
        [
            ToolCall("call_mock_a", "Read", '{"file_path": "/home/dev/project/a.png"}', "chat"),
            ToolCall("call_mock_b", "Read", '{"file_path": "/home/dev/project/b.png"}', "chat"),
        ],
    ),
    "codex-responses": (
        "responses",
        "codex/turn1_response.sse.txt",
        [ToolCall("call_mock883ae17f536f41f8a10f_0", "view_image", '{"path": "/home/dev/project/x.png"}', "responses")],
    ),
    "claude-code-messages": (
        "messages",
        "claude-code/single_png__turn1_response.sse.txt",
        [ToolCall("toolu_mock_003_0", "Read", '{"file_path": "/home/dev/project/a.png"}', "messages")],
    ),
}


def capture(name: str) -> tuple[str, bytes, list[ToolCall]]:
    dialect, path, expected = CAPTURES[name]
    return dialect, (FIXTURES / path).read_bytes(), expected


def learn(dialect: str, chunks: Iterable[bytes], **kw: Any) -> list[ToolCall]:
    got: list[ToolCall] = []
    learner = StreamLearner(dialect, got.extend, **kw)
    for chunk in chunks:
        assert learner.feed(chunk) is None
    learner.feed(b"")
    return got


def split_at(data: bytes, points: Iterable[int]) -> list[bytes]:
    cuts = [0, *sorted(set(points)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@contextmanager
def learn_warnings() -> Iterator[list[logging.LogRecord]]:
    """Warnings of llmfix.memory.learn (usable inside hypothesis tests, unlike caplog)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("llmfix.memory.learn")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def sse(*events: dict[str, Any] | str, event_lines: bool = False) -> bytes:
    out = []
    for ev in events:
        if isinstance(ev, str):
            out.append(f"data: {ev}\n\n")
        else:
            head = f"event: {ev['type']}\n" if event_lines else ""
            out.append(f"{head}data: {json.dumps(ev)}\n\n")
    return "".join(out).encode()


# -- the captured streams ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", CAPTURES)
def test_expected_values_come_from_the_capture(name: str) -> None:
    _, raw, expected = capture(name)
    for c in expected:
        assert c.call_id.encode() in raw
        assert c.name.encode() in raw
        for key, value in json.loads(c.arguments).items():  # Anthropic splits them over deltas
            assert json.dumps(key)[1:-1].encode() in raw
            assert json.dumps(value)[1:-1].encode() in raw


@pytest.mark.parametrize("name", CAPTURES)
def test_capture_fed_whole_reports_each_call_when_complete(name: str) -> None:
    dialect, raw, expected = capture(name)
    got: list[ToolCall] = []
    learner = StreamLearner(dialect, got.extend)
    learner.feed(raw)
    assert got == expected  # complete before the end of the stream: finish_reason / item done / block stop
    learner.feed(b"")
    assert got == expected


@pytest.mark.parametrize("name", CAPTURES)
def test_capture_fed_byte_by_byte(name: str) -> None:
    dialect, raw, expected = capture(name)
    assert learn(dialect, pieces(raw, 1)) == expected


@pytest.mark.parametrize("name", CAPTURES)
@given(data=st.data())
def test_capture_fed_in_random_pieces(name: str, data: st.DataObject) -> None:
    dialect, raw, expected = capture(name)
    points = data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=60))
    assert learn(dialect, split_at(raw, points)) == expected


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_capture_with_other_line_ends(name: str, newline: bytes) -> None:
    dialect, raw, expected = capture(name)
    converted = raw.replace(b"\n", newline)
    assert learn(dialect, [converted]) == expected
    assert learn(dialect, pieces(converted, 1)) == expected


def _gzip_two_members(raw: bytes) -> bytes:
    half = len(raw) // 2
    return gzip.compress(raw[:half]) + gzip.compress(raw[half:])


def _raw_deflate(raw: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(raw) + c.flush()


ENCODINGS = {
    "gzip": gzip.compress,
    "x-gzip": _gzip_two_members,
    "deflate": zlib.compress,
    "deflate-raw": _raw_deflate,
    "br": brotli.compress,
    "zstd": zstd.compress,
    "zstd-frames": lambda raw: zstd.compress(raw[:100]) + zstd.compress(raw[100:]),
}


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("size", [1, 7, 4096])
def test_compressed_capture_in_small_pieces(name: str, encoding: str, size: int) -> None:
    dialect, raw, expected = capture(name)
    body = ENCODINGS[encoding](raw)
    header = encoding.split("-")[0] if encoding != "x-gzip" else encoding
    assert learn(dialect, pieces(body, size), content_encoding=header) == expected


def test_stacked_encodings_are_undone_in_reverse() -> None:
    dialect, raw, expected = capture("codex-responses")
    body = brotli.compress(gzip.compress(raw))
    assert learn(dialect, pieces(body, 5), content_encoding="gzip, br") == expected


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd"])
def test_compression_bomb_event_is_dropped(encoding: str) -> None:
    """A megabyte event from a few compressed bytes is decoded in bounded pieces and dropped."""
    dialect, raw, expected = capture("droid-chat")
    body = ENCODINGS[encoding](b": " + b"x" * 4_000_000 + b"\n\n" + raw)
    with learn_warnings() as warnings:
        assert learn(dialect, pieces(body, 1000), content_encoding=encoding, max_buffer=1024) == expected
    assert len(warnings) == 1


# -- hand-written streams ------------------------------------------------------------------------------


def chat_chunk(delta: dict[str, Any], finish: str | None = None, choice: int = 0) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": choice, "delta": delta, "finish_reason": finish}],
    }


def fragments(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


ARGS_A = '{"file_path": "/home/dev/project/a.png", "note": "ünïcode \\" quote"}'
ARGS_B = '{"pattern": "TODO", "path": "src"}'


def openai_style_chat_stream(finish: str | None = "tool_calls", done: bool = True) -> bytes:
    events: list[dict[str, Any] | str] = [
        chat_chunk({"role": "assistant", "content": "Let me look."}),
        chat_chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_a", "type": "function", "function": {"name": "Read", "arguments": ""}}
                ]
            }
        ),
        *(chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments(ARGS_A)),
        chat_chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_b", "type": "function", "function": {"name": "Grep", "arguments": ""}}
                ]
            }
        ),
        *(chat_chunk({"tool_calls": [{"index": 1, "function": {"arguments": f}}]}) for f in fragments(ARGS_B, 3)),
    ]
    if finish:
        events.append(chat_chunk({}, finish))
    events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": {"total_tokens": 9}})
    if done:
        events.append("[DONE]")
    return sse(*events)


CHAT_EXPECTED = [ToolCall("call_a", "Read", ARGS_A, "chat"), ToolCall("call_b", "Grep", ARGS_B, "chat")]


def test_chat_arguments_split_over_many_chunks() -> None:
    raw = openai_style_chat_stream()
    assert learn("chat", [raw]) == CHAT_EXPECTED
    assert learn("chat", pieces(raw, 1)) == CHAT_EXPECTED
    assert learn("chat", pieces(raw, 33)) == CHAT_EXPECTED


@given(points=st.lists(st.integers(1, len(openai_style_chat_stream()) - 1), max_size=80))
def test_chat_fragments_in_random_pieces(points: list[int]) -> None:
    assert learn("chat", split_at(openai_style_chat_stream(), points)) == CHAT_EXPECTED


def test_chat_calls_are_reported_at_finish_reason_not_before() -> None:
    got: list[ToolCall] = []
    learner = StreamLearner("chat", got.extend)
    raw = openai_style_chat_stream()
    finish = raw.index(b'"finish_reason": "tool_calls"')
    learner.feed(raw[:finish])
    assert got == []
    learner.feed(raw[finish:])
    assert got == CHAT_EXPECTED


@pytest.mark.parametrize(("finish", "done"), [(None, True), (None, False), ("stop", False)])
def test_chat_calls_are_reported_at_done_or_end_or_any_finish_reason(finish: str | None, done: bool) -> None:
    assert learn("chat", [openai_style_chat_stream(finish, done)]) == CHAT_EXPECTED


def test_chat_calls_per_choice_and_reused_index() -> None:
    raw = sse(
        chat_chunk({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "A", "arguments": "{}"}}]}, None, 0),
        chat_chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "B", "arguments": "{"}}]}, None, 1),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}, None, 1),
        # a vendor that sends every whole call at index 0 with a new id
        chat_chunk({"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "C", "arguments": "[]"}}]}, None, 0),
        chat_chunk({}, "tool_calls", 1),
        chat_chunk({}, "tool_calls", 0),
    )
    assert learn("chat", [raw]) == [
        ToolCall("c0", "A", "{}", "chat"),
        ToolCall("c1", "B", "{}", "chat"),
        ToolCall("c2", "C", "[]", "chat"),
    ]


def test_chat_custom_tool_call() -> None:
    raw = sse(
        chat_chunk(
            {"tool_calls": [{"index": 0, "id": "c", "type": "custom", "custom": {"name": "patch", "input": "a"}}]}
        ),
        chat_chunk({"tool_calls": [{"index": 0, "custom": {"input": "b"}}]}),
        chat_chunk({}, "tool_calls"),
    )
    assert learn("chat", [raw]) == [ToolCall("c", "patch", "ab", "chat", "custom")]


def test_chat_call_without_id_or_name_is_not_reported() -> None:
    raw = sse(
        chat_chunk({"tool_calls": [{"index": 0, "function": {"name": "A", "arguments": "{}"}}]}),
        chat_chunk({"tool_calls": [{"index": 1, "id": "c1", "function": {"arguments": "{}"}}]}),
        chat_chunk({}, "tool_calls"),
    )
    assert learn("chat", [raw]) == []


def responses_event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n"
CUSTOM_ITEM = {"id": "ctc_1", "type": "custom_tool_call", "call_id": "call_p1", "name": "apply_patch"}
FUNCTION_ITEM = {"id": "fc_2", "type": "function_call", "call_id": "call_f2", "name": "shell"}


def responses_stream(*, with_done: bool = True, with_completed: bool = True) -> bytes:
    events = [
        responses_event("response.created", response={"id": "resp_1", "output": [], "parallel_tool_calls": True}),
        responses_event("response.output_item.added", output_index=0, item={**CUSTOM_ITEM, "input": ""}),
        *(
            responses_event("response.custom_tool_call_input.delta", item_id="ctc_1", output_index=0, delta=d)
            for d in fragments(PATCH, 7)
        ),
        responses_event("response.output_item.added", output_index=1, item={**FUNCTION_ITEM, "arguments": ""}),
        *(
            responses_event("response.function_call_arguments.delta", item_id="fc_2", output_index=1, delta=d)
            for d in fragments('{"cmd": ["ls"]}', 2)
        ),
    ]
    if with_done:
        events += [
            responses_event("response.custom_tool_call_input.done", item_id="ctc_1", output_index=0, input=PATCH),
            responses_event("response.output_item.done", output_index=0, item={**CUSTOM_ITEM, "input": PATCH}),
            responses_event(
                "response.output_item.done", output_index=1, item={**FUNCTION_ITEM, "arguments": '{"cmd": ["ls"]}'}
            ),
        ]
    if with_completed:
        events.append(
            responses_event(
                "response.completed",
                response={
                    "id": "resp_1",
                    "output": [
                        {**CUSTOM_ITEM, "input": PATCH},
                        {**FUNCTION_ITEM, "arguments": '{"cmd": ["ls"]}'},
                        {
                            "id": "fc_3",
                            "type": "function_call",
                            "call_id": "call_f3",
                            "name": "late",
                            "arguments": "{}",
                        },
                    ],
                },
            )
        )
    return sse(*events, event_lines=True)


RESPONSES_EXPECTED = [
    ToolCall("call_p1", "apply_patch", PATCH, "responses", "custom"),
    ToolCall("call_f2", "shell", '{"cmd": ["ls"]}', "responses"),
]


def test_responses_custom_and_function_calls_each_reported_once() -> None:
    late = ToolCall("call_f3", "late", "{}", "responses")
    assert learn("responses", [responses_stream()]) == [*RESPONSES_EXPECTED, late]
    assert learn("responses", pieces(responses_stream(), 3)) == [*RESPONSES_EXPECTED, late]


def test_responses_completed_alone_is_enough() -> None:
    raw = sse(responses_event("response.completed", response={"output": [{**FUNCTION_ITEM, "arguments": "{}"}]}))
    assert learn("responses", [raw]) == [ToolCall("call_f2", "shell", "{}", "responses")]


def test_responses_truncated_stream_reports_assembled_deltas_at_end() -> None:
    assert learn("responses", [responses_stream(with_done=False, with_completed=False)]) == RESPONSES_EXPECTED


def anthropic_stream() -> bytes:
    def block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": delta}

    return sse(
        {"type": "message_start", "message": {"id": "msg_1", "content": [], "role": "assistant"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        block_delta(0, {"type": "text_delta", "text": "I'll read it."}),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}},
        },
        *(block_delta(1, {"type": "input_json_delta", "partial_json": f}) for f in ["", *fragments(ARGS_A, 5)]),
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "Ls", "input": {"path": "é"}},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        },
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
        event_lines=True,
    )


def test_anthropic_deltas_joined_and_input_without_deltas() -> None:
    expected = [
        ToolCall("toolu_1", "Read", ARGS_A, "messages"),
        ToolCall("toolu_2", "Ls", '{"path": "é"}', "messages"),
    ]
    assert learn("messages", [anthropic_stream()]) == expected
    assert learn("messages", pieces(anthropic_stream(), 2)) == expected


def test_sse_framing_details() -> None:
    first = json.dumps(
        chat_chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "N", "arguments": ""}}]})
    )
    second = chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}, "tool_calls")
    head, _, tail = first.partition(" ")  # JSON may break between tokens; the lines join with "\n"
    raw = (
        "\ufeff: a comment line\n\n"
        ": keep-alive\nid: 1\nretry: 1000\nevent: chunk\n"
        f"data:{head}\ndata:{tail}\n\n"  # one event's data over two lines, no space after the colon
        f"data: {json.dumps(second)}\n"  # last event without its blank line
    ).encode()
    expected = [ToolCall("c", "N", '{"a": 1}', "chat")]
    assert learn("chat", [raw]) == expected
    assert learn("chat", pieces(raw, 1)) == expected


# -- failure handling ------------------------------------------------------------------------------------


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    dialect=st.sampled_from(["chat", "responses", "messages"]),
    encoding=st.sampled_from([None, "gzip", "br", "zstd", "deflate"]),
    body=st.binary(max_size=400),
    points=st.lists(st.integers(1, 399), max_size=10),
)
def test_garbage_never_raises_and_warns_at_most_once(
    dialect: str, encoding: str | None, body: bytes, points: list[int]
) -> None:
    with learn_warnings() as warnings:
        learn(dialect, split_at(body, [p for p in points if p < len(body)]), content_encoding=encoding)
    assert len(warnings) <= 1


@given(
    dialect=st.sampled_from(["chat", "responses", "messages"]),
    text=st.text(alphabet=st.sampled_from(list('data: {}[]"\n\r_calltool_usetypeindex0123,')), max_size=300),
)
def test_sse_like_garbage_never_raises(dialect: str, text: str) -> None:
    with learn_warnings() as warnings:
        learn(dialect, pieces(text.encode(), 3))
    assert len(warnings) <= 1


@pytest.mark.parametrize("size", [10, 100_000])
def test_invalid_json_warns_once_and_stops_learning(caplog: pytest.LogCaptureFixture, size: int) -> None:
    good, _, _ = capture("droid-chat")[1].partition(b"data: [DONE]")
    raw = good + b'data: {"choices": [{"delta": {"tool_calls": [oops\n\n' + openai_style_chat_stream()
    with caplog.at_level(logging.WARNING, logger="llmfix.memory.learn"):
        got = learn("chat", pieces(raw, size), label="flow 42")
    assert [c.call_id for c in got] == ["call_mock_a", "call_mock_b"]  # complete before the bad event
    [record] = [r for r in caplog.records if r.name == "llmfix.memory.learn"]
    assert "invalid JSON" in record.getMessage()
    assert "flow 42" in record.getMessage()


def test_raising_callback_warns_once_and_stops(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[list[ToolCall]] = []

    def on_calls(batch: list[ToolCall]) -> None:
        calls.append(batch)
        raise RuntimeError("memory is on fire")

    learner = StreamLearner("messages", on_calls)
    with caplog.at_level(logging.WARNING, logger="llmfix.memory.learn"):
        for chunk in pieces(anthropic_stream(), 20):
            learner.feed(chunk)
        learner.feed(b"")
    assert len(calls) == 1
    [record] = [r for r in caplog.records if r.name == "llmfix.memory.learn"]
    assert "memory is on fire" in record.getMessage()
    assert learner.stopped


@pytest.mark.parametrize(("encoding", "body"), [("compress", b"data: x\n\n"), ("gzip", b"\x1f\x8bnot gzip at all")])
def test_undecodable_body_warns_once(caplog: pytest.LogCaptureFixture, encoding: str, body: bytes) -> None:
    with caplog.at_level(logging.WARNING, logger="llmfix.memory.learn"):
        assert learn("chat", [body, body, body], content_encoding=encoding) == []
    assert len([r for r in caplog.records if r.name == "llmfix.memory.learn"]) == 1


def test_oversized_events_are_dropped_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    huge = chat_chunk({"content": "x" * 5000})
    first = chat_chunk({"tool_calls": [{"index": 0, "id": "lost", "function": {"name": "A", "arguments": "{"}}]})
    huge_fragment = chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"k": "' + "y" * 5000}}]})
    rest = chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]})
    after = chat_chunk({"tool_calls": [{"index": 1, "id": "kept", "function": {"name": "B", "arguments": "{}"}}]})
    raw = sse(huge, first, huge_fragment, rest, huge, after, chat_chunk({}, "tool_calls"), "[DONE]")
    with caplog.at_level(logging.WARNING, logger="llmfix.memory.learn"):
        for size in (1, 100, len(raw)):
            assert learn("chat", pieces(raw, size), max_buffer=1024) == [ToolCall("kept", "B", "{}", "chat")]
    records = [r for r in caplog.records if r.name == "llmfix.memory.learn"]
    assert len(records) == 3  # one per stream
    assert "larger than 1024 bytes" in records[0].getMessage()


def test_oversized_responses_delta_falls_back_to_the_done_item(caplog: pytest.LogCaptureFixture) -> None:
    item = {**FUNCTION_ITEM, "arguments": ""}
    huge = "x" * 3000
    raw = sse(
        responses_event("response.output_item.added", output_index=0, item=item),
        responses_event("response.function_call_arguments.delta", item_id="fc_2", output_index=0, delta=huge),
        responses_event("response.function_call_arguments.delta", item_id="fc_2", output_index=0, delta="!"),
        responses_event("response.output_item.done", output_index=0, item={**item, "arguments": "{}"}),
    )
    with caplog.at_level(logging.WARNING, logger="llmfix.memory.learn"):
        assert learn("responses", pieces(raw, 64), max_buffer=1024) == [ToolCall("call_f2", "shell", "{}", "responses")]
    [record] = [r for r in caplog.records if r.name == "llmfix.memory.learn"]
    assert "larger than 1024 bytes" in record.getMessage()


def test_unknown_dialect_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        StreamLearner("cohere", print)
    with pytest.raises(ValueError, match="unknown dialect"):
        calls_in_request("cohere", {})


# -- non-streamed responses ------------------------------------------------------------------------------


JSON_ANSWERS: dict[str, tuple[dict[str, Any], list[ToolCall]]] = {
    "chat": ({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "Read", "arguments": ARGS_A}},
                        {"id": "call_b", "type": "function", "function": {"name": "Grep", "arguments": ARGS_B}},
                    ],
                },
            }
        ],
    }, CHAT_EXPECTED),
    "responses": ({
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {**CUSTOM_ITEM, "input": PATCH, "status": "completed"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
            {**FUNCTION_ITEM, "arguments": '{"cmd": ["ls"]}', "status": "completed"},
        ],
    }, RESPONSES_EXPECTED),
    "messages": ({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.png"}},
        ],
        "stop_reason": "tool_use",
    }, [ToolCall("toolu_1", "Read", '{"file_path": "a.png"}', "messages")]),
}
"""A JSON answer of each dialect with tool calls among other output, and the calls learned from it."""


@pytest.mark.parametrize("dialect", list(JSON_ANSWERS))
def test_learn_json_answer_gives_its_calls_in_order(dialect: str) -> None:
    answer, expected = JSON_ANSWERS[dialect]
    assert learn_json_response(dialect, json.dumps(answer).encode()) == expected


def test_learn_json_error_body_is_not_a_problem(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="llmfix.memory.learn"):
        assert learn_json_response("chat", b'{"error": {"message": "bad"}}') == []
    assert caplog.records == []


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b'{"choices": [', b"\xff\xfe"])
def test_learn_json_bad_input_warns(caplog: pytest.LogCaptureFixture, body: bytes) -> None:
    with caplog.at_level(logging.WARNING, logger="llmfix.memory.learn"):
        assert learn_json_response("chat", body) == []
    assert len([r for r in caplog.records if r.name == "llmfix.memory.learn"]) == 1


# -- calls declared in requests ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_calls_in_droid_request_declares_only_the_first_call(version: str) -> None:
    body = json.loads((FIXTURES / f"droid/{version}__two_images__turn2.json").read_bytes())
    assert calls_in_request("chat", body) == [
        ToolCall("call_mock_a", "Read", '{"file_path":"/home/dev/project/a.png"}', "chat")
    ]


def test_calls_in_codex_request() -> None:
    body = json.loads((FIXTURES / "codex/turn2_request.json").read_bytes())
    assert calls_in_request("responses", body) == [
        ToolCall("call_mock883ae17f536f41f8a10f_0", "view_image", '{"path": "/home/dev/project/x.png"}', "responses")
    ]


def test_calls_in_claude_code_request() -> None:
    body = json.loads((FIXTURES / "claude-code/single_png__turn2.json").read_bytes())
    assert calls_in_request("messages", body) == [
        ToolCall("toolu_mock_003_0", "Read", '{"file_path": "/home/dev/project/a.png"}', "messages")
    ]


def test_calls_in_request_skips_malformed_entries() -> None:
    chat = {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "F", "arguments": {"x": 1}}},
                    {"id": "b", "type": "custom", "custom": {"name": "P", "input": "raw"}},
                    {"id": "", "function": {"name": "F", "arguments": "{}"}},
                    {"id": "c"},
                    "junk",
                ],
            },
            {"role": "user", "tool_calls": [{"id": "u", "function": {"name": "F", "arguments": "{}"}}]},
            "junk",
        ]
    }
    assert calls_in_request("chat", chat) == [
        ToolCall("a", "F", '{"x": 1}', "chat"),
        ToolCall("b", "P", "raw", "chat", "custom"),
    ]
    assert calls_in_request("responses", {"input": "just a string"}) == []
    assert calls_in_request("responses", {"input": [{"type": "function_call", "call_id": "x"}]}) == []
    messages = {
        "messages": [
            {"role": "user", "content": [{"type": "tool_use", "id": "u", "name": "N", "input": {}}]},
            {"role": "assistant", "content": "plain text"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "N"}]},
        ]
    }
    assert calls_in_request("messages", messages) == [ToolCall("t", "N", "{}", "messages")]


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_events_fed_one_by_one_teach_what_the_stream_teaches(name: str) -> None:
    """A WebSocket message of the Responses API is one stream event, the JSON of an SSE ``data:`` line:
    fed event by event (``feed_event``), a captured stream teaches the very calls it teaches as bytes."""
    dialect, raw, expected = capture(name)
    got: list[ToolCall] = []
    learner = StreamLearner(dialect, got.extend)
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if data:
            learner.feed_event("\n".join(data))
    learner.end()
    assert got == expected


def test_reasoning_records_reach_their_callback_stamped_with_the_upstream() -> None:
    """What an assembler reports as Reasoning goes to ``on_reasoning`` (never to ``on_calls``), named after
    the upstream the learner was made for when the assembler did not name one."""
    from llmfix.memory.learn_base import Out
    from llmfix.memory.store import Reasoning

    class Thinks:
        def wants(self, event: bytes) -> bool:
            return True

        def on_event(self, data: Any, out: Out) -> None:
            out.append(Reasoning("test.kind", str(data["n"]), "thought"))
            out.append(Reasoning("test.kind", "named", "v", "other:1/chat"))
            out.append(ToolCall(f"call_{data['n']}", "Read", "{}", "chat"))

        def finish(self, out: Out) -> None: ...

        def forget_partial(self) -> None: ...

    calls: list[ToolCall] = []
    thoughts: list[Reasoning] = []
    learner = StreamLearner("chat", calls.extend, on_reasoning=thoughts.extend, upstream="api.test:443/chat")
    learner._assembler = Thinks()
    learner.feed_event('{"n": 1}')
    assert calls == [ToolCall("call_1", "Read", "{}", "chat")]
    assert thoughts == [Reasoning("test.kind", "1", "thought", "api.test:443/chat"),
                        Reasoning("test.kind", "named", "v", "other:1/chat")]
