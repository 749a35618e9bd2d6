"""Native Gemini bodies the property tests (tests/property/test_gemini_promises.py) found mishandled, each shrunk to
the smallest request that shows it, sent through the engine as the addon sends it and judged by the strict mock's
rules (tests/upstreams/gemini_rules.py)."""

from __future__ import annotations

import json
from typing import Any

from llmfix import engine
from llmfix.body.conversation import loads, parse
from llmfix.dialects.registry import GEMINI
from llmfix.profiles import ProfileTable
from llmfix.repairs import drop_repeated_responses
from llmfix.repairs.base import Context
from llmfix.repairs.settled import KNOWN
from tests.upstreams import gemini_rules

HOST = "generativelanguage.googleapis.com"
PATH = "/v1beta/models/gemini-3-flash-preview:streamGenerateContent?alt=sse"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAC0lEQVR4nGNgQAYAAA4AAamRc7EAAAAASUVORK5CYII="


def run(body: dict[str, Any]) -> tuple[engine.Outcome, dict[str, Any]]:
    raw = json.dumps(body).encode()
    out = engine.process(engine.request(GEMINI, HOST, 443, PATH, raw, None, "f"), engine.Settings())
    assert out.status != "failed", out.reason
    return out, json.loads(out.body) if out.body is not None else body


def image() -> dict[str, Any]:
    return {"inlineData": {"mimeType": "image/png", "data": PNG}}


def test_a_repaired_history_with_a_multimodal_function_response_is_sent_with_its_image() -> None:
    """A Gemini 3 response holding its image in ``functionResponse.parts``, in a history that needs a signature:
    the repair's report lays the nested image out too (it used to raise on it, and the body left unrepaired)."""
    for key in ("functionResponse", "function_response"):
        body = {"contents": [
            {"role": "user", "parts": [{"text": "what is in a.png?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a.png"}}}]},
            {"role": "user", "parts": [{key: {"name": "read_file", "response": {"output": "an image"},
                                              "parts": [image(), {"text": "a caption"}]}}]}]}
        out, got = run(body)
        assert out.status == "repaired"
        assert got["contents"][2] == body["contents"][2]
        assert got["contents"][1]["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
        assert gemini_rules.check(got) is None


def test_an_orphan_snake_case_response_with_its_own_parts_is_kept_as_text_with_its_image() -> None:
    """A ``function_response`` (snake_case, proto3 JSON takes it) that answers no call is kept as text naming it, and
    the image it held comes with it as a part of the content (the repair used to raise on the untyped part)."""
    body = {"contents": [
        {"role": "user", "parts": [{"text": "look at a.png"}]},
        {"role": "model", "parts": [{"text": "I looked."}]},
        {"role": "user", "parts": [{"function_response": {"name": "read_file", "response": {"output": "an image"},
                                                          "parts": [image()]}}, {"text": "and now?"}]}]}
    out, got = run(body)
    assert out.status == "repaired"
    parts = got["contents"][2]["parts"]
    assert '{"output": "an image"}' in parts[0]["text"]
    assert parts[1:] == [image(), {"text": "and now?"}]
    assert gemini_rules.check(got) is None


def call(path: str) -> dict[str, Any]:
    return {"functionCall": {"name": "read_file", "args": {"path": path}}}


def response(path: str) -> dict[str, Any]:
    return {"functionResponse": {"name": "read_file", "response": {"output": f"contents of {path}"}}}


def test_id_less_responses_split_over_two_user_contents_are_put_together_after_their_calls() -> None:
    """Two calls without ids, their responses sent in two user contents (Gemini refuses that: the count of responses
    after a call turn must match): the second moves into the first content, still a functionResponse — not text
    beside a "no result was recorded" answer, as it was while only responses with ids were followed there."""
    signed = {**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"}
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt and b.txt"}]},
        {"role": "model", "parts": [signed, call("b.txt")]},
        {"role": "user", "parts": [response("a.txt")]},
        {"role": "user", "parts": [response("b.txt"), image()]}]}
    assert gemini_rules.check(body) is not None
    out, got = run(body)
    assert out.status == "repaired"
    assert got["contents"] == [*body["contents"][:2],
                               {"role": "user", "parts": [response("a.txt"), response("b.txt"), image()]}]
    assert gemini_rules.check(got) is None


def test_a_whitespace_only_content_between_a_call_turn_and_its_responses_goes() -> None:
    """A model content of one whitespace-only text part, stored between the calls and their responses, splits them
    (Gemini: the response count after a call turn must match); it goes. A whitespace-only part beside other parts
    stays as sent."""
    signed = {**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"}
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt"}, {"text": " \n"}]},
        {"role": "model", "parts": [signed]},
        {"role": "model", "parts": [{"text": " "}]},
        {"role": "user", "parts": [response("a.txt")]}]}
    assert gemini_rules.check(body) is not None
    out, got = run(body)
    assert out.status == "repaired"
    assert got["contents"] == [body["contents"][0], body["contents"][1], body["contents"][3]]
    assert gemini_rules.check(got) is None


def test_a_repeated_response_in_a_later_user_content_is_dropped_as_a_copy() -> None:
    """Two id-less calls, answered over two user contents, the first response repeated in the second one and the
    second repeated right after itself: the copies go (the later ones), and each call keeps its own response — the
    copy of the first is not taken for the answer to the second call, with the second kept only as text."""
    signed = {**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"}
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt and b.txt"}]},
        {"role": "model", "parts": [signed, call("b.txt")]},
        {"role": "user", "parts": [response("a.txt")]},
        {"role": "user", "parts": [response("a.txt"), response("b.txt"), image(), response("b.txt"), image()]}]}
    out, got = run(body)
    assert got["contents"] == [*body["contents"][:2],
                               {"role": "user", "parts": [response("a.txt"), response("b.txt"), image()]}]
    assert {c.repair for c in out.changes} == {"drop-repeated-responses", "pair-tool-calls"}
    assert gemini_rules.check(got) is None


def test_a_user_content_holding_only_a_copy_goes_whole() -> None:
    """The one response of a call turn sent again in a user content of its own, the last one of the request: the
    copy goes, and the content with it, rather than leave a content without parts, which Gemini refuses."""
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt"}]},
        {"role": "model", "parts": [{**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"}]},
        {"role": "user", "parts": [response("a.txt")]},
        {"role": "user", "parts": [response("a.txt")]}]}
    _, got = run(body)
    assert got["contents"] == body["contents"][:3]
    assert gemini_rules.check(got) is None


def test_a_content_left_with_only_whitespace_once_its_response_moved_back_goes() -> None:
    """Responses split over two user contents, the second with a whitespace-only text before its response: the
    response moves back beside the first, and the content left with only the whitespace goes in the same pass, so
    the repaired body needs nothing more when sent again."""
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt and b.txt"}]},
        {"role": "model", "parts": [{**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"},
                                    call("b.txt")]},
        {"role": "user", "parts": [response("a.txt")]},
        {"role": "user", "parts": [{"text": " "}, response("b.txt")]},
        {"role": "model", "parts": [{"text": "Both read."}]},
        {"role": "user", "parts": [{"text": "thanks"}]}]}
    _, got = run(body)
    both = {"role": "user", "parts": [response("a.txt"), response("b.txt")]}
    assert got["contents"] == [*body["contents"][:2], both, *body["contents"][4:]]
    again, _ = run(got)
    assert again.status == "untouched"


def test_a_last_content_left_with_only_whitespace_after_another_user_content_goes() -> None:
    """The same split as the last content of the request: once its response moved back, the whitespace left after the
    user content that now holds both responses goes too, as it will on the next turn, so this request is the start
    of the next one."""
    turn = [{"role": "user", "parts": [{"text": "read a.txt and b.txt"}]},
            {"role": "model", "parts": [{**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"},
                                        call("b.txt")]},
            {"role": "user", "parts": [response("a.txt")]},
            {"role": "user", "parts": [{"text": " "}, response("b.txt")]}]
    _, now = run({"contents": turn})
    _, later = run({"contents": [*turn, {"role": "model", "parts": [{"text": "Both read."}]},
                                 {"role": "user", "parts": [{"text": "thanks"}]}]})
    assert now["contents"] == [*turn[:2], {"role": "user", "parts": [response("a.txt"), response("b.txt")]}]
    assert later["contents"][:3] == now["contents"]


def test_id_less_copies_are_counted_by_name() -> None:
    """Two identical id-less reads and a shell call, each response sent twice in a row: the copies of each name go as
    long as that name has more responses than calls, so both reads keep their answer and the shell call its own (a
    budget counted over all names took the second read's answer for a copy and kept the shell call's copy)."""
    shell = {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}
    listed = {"functionResponse": {"name": "run_shell_command", "response": {"output": "a.txt"}}}
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt twice, then list"}]},
        {"role": "model", "parts": [{**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"},
                                    call("a.txt"), shell]},
        {"role": "user", "parts": [response("a.txt"), response("a.txt"), response("a.txt"), response("a.txt"),
                                   listed, listed]}]}
    _, got = run(body)
    assert got["contents"] == [*body["contents"][:2],
                               {"role": "user", "parts": [response("a.txt"), response("a.txt"), listed]}]
    assert gemini_rules.check(got) is None


def test_an_empty_text_between_a_response_and_its_image_does_not_hide_its_copy() -> None:
    """A resumed client's repeated responses, the first one's image after an empty text part: the empty part goes
    first, so the second response with the same image is seen as the copy it is and goes, and each call keeps its own
    response (else the copy answered the second call and that call's response was kept only as text)."""
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt and b.txt"}]},
        {"role": "model", "parts": [{**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"},
                                    call("b.txt")]},
        {"role": "user", "parts": [response("a.txt"), {"text": ""}, image(), response("a.txt"), image(),
                                   response("b.txt")]}]}
    _, got = run(body)
    assert got["contents"] == [*body["contents"][:2],
                               {"role": "user", "parts": [response("a.txt"), image(), response("b.txt")]}]
    assert gemini_rules.check(got) is None


def test_the_certain_check_is_not_sure_of_new_items_that_begin_inside_a_group_of_responses() -> None:
    """The session above settled at the end of its first response content, then sent that response again in a
    content of its own. On the next turn the prefix is not parsed (each earlier item is KNOWN), so the copy cannot
    be told from there: drop-repeated-responses' check must say it is not sure — the whole repair drops the copy."""
    body = {"contents": [
        {"role": "user", "parts": [{"text": "read a.txt"}]},
        {"role": "model", "parts": [{**call("a.txt"), "thoughtSignature": "skip_thought_signature_validator"}]},
        {"role": "user", "parts": [response("a.txt")]},
        {"role": "user", "parts": [response("a.txt")]}]}
    conv = parse(GEMINI, loads(json.dumps(body).encode()))
    assert conv is not None
    model = "gemini-3.1-pro-preview"
    profile = ProfileTable().resolve("generativelanguage.googleapis.com", 443, model, GEMINI).profile
    ctx = Context(GEMINI, profile, model, None)
    repair = drop_repeated_responses.REPAIR
    assert repair.apply(conv.items, ctx)[1]  # the whole repair drops the copy
    assert repair.extend is not None
    assert repair.extend(None, conv.items[:3], 0, ctx) == ()  # the settled prefix: nothing to drop in it
    next_turn = [KNOWN, KNOWN, KNOWN, conv.items[3]]
    assert repair.extend((), next_turn, 3, ctx) is None
