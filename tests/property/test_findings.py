"""The smallest failing examples of what the generated and hostile inputs found, kept as regression tests.

Fixed in llmfix (each test failed before its fix):
- restore-tool-media put back media a gateway had already moved out of the tool result itself (into a
  user message after the run: pi-ai, LiteLLM, sub2api; or after each result: Droid) — the upstream got
  every such image twice. (The first fix then missed an image the user had also pasted after the result:
  the heavy profile found it; the client's own later copies are now told apart.)
- untangle-tool-run turned an undeclared tool message into a user message keeping its image even for a
  model that takes no images — DeepSeek answered 400 ``unknown variant `image_url```.
- hoist-tool-media moved a file part out of a tool message into a user message for a text-only model —
  DeepSeek answered 400 ``unknown variant `file```.
- untangle-tool-run stripped the trailing newlines of an undeclared tool result's text (a result of
  ``"\n"`` vanished entirely).

Fixed in engine.py, codec.py and learn.py, from these findings:
- a decompression bomb was decoded in full before the size limit was checked (a 64 KB body cost 64 MB);
- a Responses item whose ``type`` is a list or an object made ``engine.process`` raise (found by
  ``test_fuzz`` under the heavy profile).

Fixed later (profiles.py, the ``media_input`` flag, false for ``deepseek``):
- a DeepSeek model the catalogue does not know (``deepseek-flash``, the id of the Droid captures' mock)
  was assumed to take images, so its tool images were hoisted into a user message DeepSeek rejects.
"""

from __future__ import annotations

import json
import tracemalloc
import zlib
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.engine import Request, Settings
from llmfix.memory.media_window import MediaWindow
from llmfix.memory.recall import Recall
from llmfix.memory.sqlite import SqliteStore
from tests.property.test_promises import Tick
from tests.upstreams import rules

IMAGE = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAHnOcQAAA"
         "AABJRU5ErkJggg==")


def process(dialect: Dialect, host: str, body: dict[str, Any], flow: str = "f", **settings: Any) -> engine.Outcome:
    return engine.process(Request(dialect, host, 443, json.dumps(body).encode(), None, flow), Settings(**settings))


def sent(outcome: engine.Outcome, body: dict[str, Any]) -> dict[str, Any]:
    return json.loads(outcome.body) if outcome.body else body


# ------------------------------------------------------------------------------------ fixed


def responses_client() -> dict[str, Any]:
    return {"model": "gpt-4.1", "input": [
        {"role": "user", "content": "look at a.png"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "a.png"}, {"type": "input_image", "image_url": IMAGE,
                                                               "detail": "auto"}]},
    ]}


def responses_gateway_hoisted() -> dict[str, Any]:
    body = responses_client()
    body["input"][2] = {**body["input"][2], "output": "a.png"}
    body["input"].append({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Attached image(s) from tool result:"},
        {"type": "input_image", "image_url": IMAGE, "detail": "auto"}]})
    return body


@pytest.mark.parametrize("host", ["api.openai.com", "api.x.ai", "llm.internal.example"])
def test_restore_does_not_duplicate_media_the_gateway_already_moved(host: str) -> None:
    window = MediaWindow(0.0, clock=Tick())
    assert process(RESPONSES, "gateway.example", responses_client(), "client", window=window).status \
        == "untouched"
    body = responses_gateway_hoisted()
    got = sent(process(RESPONSES, host, body, "gateway", window=window), body)
    assert json.dumps(got).count(IMAGE) == 1


def test_restore_does_not_duplicate_media_a_droid_like_gateway_put_after_each_result() -> None:
    window = MediaWindow(0.0, clock=Tick())
    process(RESPONSES, "gateway.example", responses_client(), "client", window=window)
    chat = {"model": "gpt-4.1", "messages": [
        {"role": "user", "content": "look at a.png"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.png"},
        {"role": "user", "content": [{"type": "text", "text": "Image content from tool result:"},
                                     {"type": "image_url", "image_url": {"url": IMAGE}}]},
    ]}
    outcome = process(CHAT, "api.openai.com", chat, "gateway", window=window)
    assert outcome.status == "untouched", [c.line() for c in outcome.changes]


def test_restore_still_puts_back_what_is_really_missing() -> None:
    window = MediaWindow(0.0, clock=Tick())
    process(RESPONSES, "gateway.example", responses_client(), "client", window=window)
    body = responses_client()
    body["input"][2] = {**body["input"][2], "output": "a.png"}
    got = sent(process(RESPONSES, "api.openai.com", body, "gateway", window=window), body)
    assert got["input"][2]["output"] == responses_client()["input"][2]["output"]


def test_restore_still_puts_back_an_image_the_user_also_pasted_later() -> None:
    """The client's own copy of the image in a later user message is not the gateway's moved copy."""
    window = MediaWindow(0.0, clock=Tick())
    client = responses_client()
    client["input"].append({"role": "user", "content": [{"type": "input_text", "text": "and this one?"},
                                                        {"type": "input_image", "image_url": IMAGE, "detail": "auto"}]})
    process(RESPONSES, "gateway.example", client, "client", window=window)
    body = json.loads(json.dumps(client))
    body["input"][2]["output"] = "a.png"  # the gateway dropped the tool result's image, kept the user's
    got = sent(process(RESPONSES, "api.openai.com", body, "gateway", window=window), body)
    assert got == client


def test_restore_does_not_let_an_earlier_result_claim_a_later_results_moved_image() -> None:
    """Found by the heavy profile: t1's image dropped, t3's (the same image) moved after t3 by the gateway."""
    data = IMAGE.partition(",")[2]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}

    def turn(tool_id: str, content: Any) -> list[dict[str, Any]]:
        return [{"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "Read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": content}]}]

    client = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [
        {"role": "user", "content": "go"}, *turn("t1", [image]),
        {"role": "assistant", "content": "and?"},
        {"role": "user", "content": [{"type": "text", "text": "again"}, image]},
        *turn("t3", [image])]}
    window = MediaWindow(0.0, clock=Tick())
    process(MESSAGES, "gateway.example", client, "client", window=window)
    body = json.loads(json.dumps(client))
    del body["messages"][2]["content"][0]["content"]  # t1: dropped
    body["messages"][6]["content"] = [{"type": "tool_result", "tool_use_id": "t3"}, image]  # t3: moved after it
    got = sent(process(MESSAGES, "api.anthropic.com", body, "gateway", window=window), body)
    assert json.dumps(got).count(data) == 3
    assert got["messages"][2] == client["messages"][2]


def deepseek_orphan(content: str | list[dict[str, Any]], model: str = "deepseek-chat") -> dict[str, Any]:
    return {"model": model, "messages": [
        {"role": "user", "content": "read a.png"},
        {"role": "assistant", "content": "reading"},  # Droid-like: the declaration is gone
        {"role": "tool", "tool_call_id": "call_1", "content": content},
    ]}


def test_an_undeclared_tool_image_is_not_sent_to_a_text_only_model() -> None:
    body = deepseek_orphan([{"type": "text", "text": "a.png"}, {"type": "image_url", "image_url": {"url": IMAGE}}])
    outcome = process(CHAT, "api.deepseek.com", body)
    got = sent(outcome, body)
    assert rules.check("deepseek", "/v1/chat/completions", got) is None
    assert IMAGE not in json.dumps(got) and "omitted: model deepseek-chat does not take image input" in json.dumps(got)
    assert any("sha256:" in d for c in outcome.changes for d in c.dropped)


def test_an_undeclared_tool_result_keeps_its_text_verbatim() -> None:
    for content in ("\n", "total 8\n-rw-r--r-- a.png\n\n"):
        body = deepseek_orphan(content, "gpt-4.1")
        got = sent(process(CHAT, "api.openai.com", body), body)
        assert got["messages"][-1]["role"] == "user" and got["messages"][-1]["content"].endswith(content)


def one_call(model: str, content: list[dict[str, Any]], ask: str = "read the report") -> dict[str, Any]:
    """A Chat conversation: the user asks, the assistant declares call c1, the tool message answers it."""
    return {"model": model, "messages": [
        {"role": "user", "content": ask},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": content},
    ]}


def test_a_tool_file_is_not_hoisted_for_a_text_only_model() -> None:
    body = one_call("deepseek-chat", [
        {"type": "text", "text": "report.pdf"},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0x", "filename": "r.pdf"}}])
    outcome = process(CHAT, "api.deepseek.com", body)
    got = sent(outcome, body)
    assert rules.check("deepseek", "/v1/chat/completions", got) is None
    assert "does not take file input" in json.dumps(got)
    assert [d for c in outcome.changes for d in c.dropped]


def test_a_tool_file_is_still_hoisted_for_a_model_that_takes_pdfs() -> None:
    body = one_call("gpt-4.1", [
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0x", "filename": "r.pdf"}}])
    got = sent(process(CHAT, "api.openai.com", body), body)
    assert got["messages"][-1]["role"] == "user" and got["messages"][-1]["content"][1]["type"] == "file"


# ------------------------------------------------------------- outside engine.py, codec.py and learn.py


def test_deepseek_with_an_uncatalogued_model_gets_no_image_parts() -> None:
    body = one_call("deepseek-flash", [{"type": "text", "text": "a.png"},
                                       {"type": "image_url", "image_url": {"url": IMAGE}}], "read a.png")
    outcome = process(CHAT, "api.deepseek.com", body)
    got = sent(outcome, body)
    assert rules.check("deepseek", "/v1/chat/completions", got) is None
    assert "a.png" in got["messages"][2]["content"] and "image" in got["messages"][2]["content"]  # placeholder
    dropped = [d for c in outcome.changes for d in c.dropped]
    assert len(dropped) == 1 and "profile deepseek" in dropped[0] and "<image/png" in dropped[0]


def test_a_drop_names_the_profile_only_when_the_profile_flag_caused_it() -> None:
    from llmfix.profiles import parse_table

    table = parse_table({"models": {"deepseek-vision-*": {"input": ["text", "image"]}}})
    body = one_call("deepseek-vision-1", [
        {"type": "text", "text": "a.pdf"},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}}])
    dropped = [d for c in process(CHAT, "api.deepseek.com", body, table=table).changes for d in c.dropped]
    assert len(dropped) == 1 and "does not take file input" in dropped[0] and "profile" not in dropped[0]


def test_a_profiles_file_input_still_wins_over_a_text_only_upstream_profile() -> None:
    from llmfix.profiles import parse_table

    table = parse_table({"models": {"deepseek-vision-*": {"input": ["text", "image"]}}})
    assert table.resolve("api.deepseek.com", 443, "deepseek-vision-1").modalities == {"text", "image"}
    assert table.resolve("api.deepseek.com", 443, "deepseek-flash").modalities == {"text"}
    assert table.resolve("api.openai.com", 443, "some-new-model").modalities is None  # unknown: take what comes


def gzip_bomb(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(b'{"messages":[{"role":"tool","content":"') + b"".join(
        c.compress(b"A" * (1 << 20)) for _ in range(size >> 20)) + c.compress(b'"}]}') + c.flush()


def test_a_decompression_bomb_is_refused_without_inflating_it() -> None:
    bomb = gzip_bomb(64 << 20)
    tracemalloc.start()
    try:
        outcome = engine.process(Request(CHAT, "api.openai.com", 443, bomb, "gzip"), Settings(max_body=1 << 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcome.status == "failed" and "exceeds llmfix_max_body" in (outcome.reason or "")
    assert peak < 8 << 20, f"peak {peak >> 20} MB to refuse a {len(bomb) >> 10} KB body"


@pytest.mark.parametrize("kind", [["function_call"], {"function_call": 1}], ids=["list", "object"])
def test_an_unhashable_item_type_is_bad_input_not_a_crash(kind: Any) -> None:
    raw = json.dumps({"model": "gpt-4.1", "input": [{"type": kind}]}).encode()
    memory = Recall(SqliteStore(":memory:"))
    try:
        outcome = engine.process(Request(RESPONSES, "api.openai.com", 443, raw), Settings(memory=memory))
    finally:
        memory.close()
    assert outcome.status in ("failed", "untouched")
