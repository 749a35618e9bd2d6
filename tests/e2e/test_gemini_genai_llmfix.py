"""Google's Python SDK (``google-genai``) through a real mitmdump WITH llmfix, against the strict Gemini mock
(tests/e2e/genai_client.py; the bare-proxy controls, each broken turn 2 refused with Google's text in one upstream
request, are tests/e2e/test_gemini_genai.py).

- Each broken turn 2 of that module's list is answered 200 through llmfix, and the mock got the client's own body
  with only what the repair promises changed (the signature the mock issued in turn 1, the very bytes; the responses
  one per call, in call order; the empty content gone; the SVG a PNG; the MCP schema moved whole to
  ``parametersJsonSchema``); llmfix's JSONL log names the repair.
- Turn 1 streamed (``generate_content_stream``) through llmfix, turn 2 replayed without ``thoughtSignature``: the
  signature is given back byte for byte after an llmfix restart (a new mitmdump on the same memory file) and across
  two llmfix instances sharing one real redis-server.
- A session llmfix never heard gets Google's stand-in ``skip_thought_signature_validator`` on the first call of
  its current turn only.
- A signature the mock did not issue, or issued for another backend (Vertex): the first time two upstream requests
  (``Corrupted thought signature.``, then the resend with the signature of turn 1), the client sees 200; the next
  request of that session leaves repaired, one upstream request.

Every proxy, mock and client is on loopback and bounded in time.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types

from tests.e2e import genai_client
from tests.e2e.codex_cli import changes
from tests.e2e.gemini_cli import client_sent, start_proxy
from tests.e2e.harness import Mitmdump
from tests.redis_server import RedisServer, needs_redis, until
from tests.upstreams.gemini_canned import function_calls, text_answer
from tests.upstreams.gemini_errors import CORRUPTED, missing_signature
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream

pytestmark = pytest.mark.timeout(120)
MODEL = "gemini-3.1-pro-preview"
DONE = "both files read"
DUMMY = "skip_thought_signature_validator"
RESTORE = "restore-thought-signatures"


class Llmfix:
    """The module's llmfix proxy: a mitmdump whose memory is a sqlite file in its confdir, as a user has it;
    `restart` replaces it with a new process on the same confdir and memory file."""

    def __init__(self, upstream: MockUpstream, confdir: Path) -> None:
        self.upstream, self.confdir = upstream, confdir
        self.proxy = self._start()

    def _start(self) -> Mitmdump:
        return start_proxy(self.upstream, self.confdir, llmfix=True,
                           llmfix_memory=str(self.confdir / "llmfix-memory.sqlite3"))

    def restart(self) -> Mitmdump:
        self.proxy.stop()
        assert not self.proxy.running
        self.proxy = self._start()
        return self.proxy


@pytest.fixture(scope="module")
def llmfix(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Llmfix]:
    held = Llmfix(upstream, tmp_path_factory.mktemp("genai-llmfix"))
    try:
        yield held
    finally:
        held.proxy.stop()


@pytest.fixture
def proxy(llmfix: Llmfix) -> Mitmdump:
    return llmfix.proxy


def started_together(*starts: Callable[[], Mitmdump]) -> list[Mitmdump]:
    """Start several mitmdumps at once (each start takes seconds); if one fails, stop the others."""
    with ThreadPoolExecutor(len(starts)) as pool:
        futures = [pool.submit(start) for start in starts]
    started = [f.result() for f in futures if f.exception() is None]
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        for p in started:
            p.stop()
        raise failed[0]
    return started


def direct(upstream: MockUpstream) -> genai.Client:
    """A ``genai.Client`` straight to the mock, past no proxy at all (the mock picks Gemini's rules by the host
    header the loopback redirect would have set)."""
    options = types.HttpOptions(base_url=f"http://{upstream.address}/", timeout=60_000, client_args={
        "trust_env": False}, headers={ORIGINAL_HOST_HEADER: "generativelanguage.googleapis.com"})
    return genai.Client(api_key=genai_client.KEY, http_options=options)


def calls_of(label: str) -> tuple[dict[str, str], dict[str, str]]:
    """Two parallel ``read_file`` arguments of their own: each session is a step llmfix has not seen (two sessions
    making the same step would make its memory of that step ambiguous, and it gives back nothing then)."""
    return {"file_path": f"{label}/a.md"}, {"file_path": f"{label}/b.md"}


def turn1(upstream: MockUpstream, proxy: Mitmdump, label: str) -> tuple[list[types.Part], list[types.Content], str]:
    """Turn 1 streamed through ``proxy``: the calls (the first signed), the history ``[user, model]``, and the
    signature the mock issued with the first call, as it sent it."""
    a, b = calls_of(label)
    upstream.gemini.queue(function_calls(("read_file", a), ("read_file", b), thought="Both at once."))
    parts, history = genai_client.turn1(genai_client.client(proxy), MODEL, f"Read {a} and {b} at once.")
    issued = next(p["thoughtSignature"] for p in upstream.gemini.sent[-1].issued if "functionCall" in p)
    assert upstream.requests[-1].path.endswith(f"{MODEL}:streamGenerateContent?alt=sse")
    assert [p.function_call.args for p in parts] == [a, b] and parts[1].thought_signature is None
    assert parts[0].thought_signature == base64.b64decode(issued)  # what the SDK keeps: the bytes
    return parts, history, issued


def without_signatures(content: types.Content) -> types.Content:
    out = copy.deepcopy(content)
    for part in out.parts or []:
        part.thought_signature = None
    return out


def answered(upstream: MockUpstream, proxy: Mitmdump, history: list[types.Content], *,
             raw_tools: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[Any], list[dict[str, Any]]]:
    """Turn 2 through ``proxy``, answered 200 with the text queued: the body the client sent, what the mock
    received for it (each upstream request) and llmfix's log lines of it."""
    upstream.gemini.queue(text_answer(DONE))
    before, logged, probed = len(upstream.requests), len(changes(proxy)), len(client_sent(proxy))
    answer = genai_client.turn2(genai_client.client(proxy), MODEL, history, raw_tools=raw_tools)
    assert answer.text == DONE
    kind, sent = client_sent(proxy)[probed]  # (llmfix's resend, if any, comes after it)
    assert kind == "http"
    return json.loads(sent), upstream.requests[before:], changes(proxy)[logged:]


def signature_at(body: dict[str, Any], content: int) -> str | None:
    return body["contents"][content]["parts"][0].get("thoughtSignature")


def streamed(gc: genai.Client, contents: list[types.Content]) -> list[types.Part]:
    """A streamed turn's parts (thought summaries left out, as `genai_client.turn1` leaves them)."""
    stream = gc.models.generate_content_stream(model=MODEL, contents=contents, config=genai_client.config())
    return [p for chunk in stream for cand in chunk.candidates or [] for p in cand.content.parts or [] if not p.thought]


def with_signature(body: dict[str, Any], content: int, signature: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["contents"][content]["parts"][0]["thoughtSignature"] = signature
    return out


def inline(part: dict[str, Any]) -> tuple[str, bytes]:
    data = part.get("inlineData") or part["inline_data"]
    return data.get("mimeType") or data["mime_type"], base64.b64decode(data["data"])


# ------------------------------------------------------------------ each broken turn 2, answered


def expect_lost_signature(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    assert signature_at(client, 1) is None
    assert signature_at(got, 1) == issued  # the text the mock issued, as it issued it
    assert got == with_signature(client, 1, issued)


def expect_resumed_duplicates(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    answers = client["contents"][2]["parts"]
    assert len(answers) == 4 and answers[2:] == answers[:2]
    assert got["contents"][2]["parts"] == answers[:2]  # one response per call, in call order
    assert got == {**client, "contents": [*client["contents"][:2], {**client["contents"][2], "parts": answers[:2]}]}


def expect_split_responses(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    first, second = client["contents"][2:]
    assert got["contents"][:2] == client["contents"][:2] and len(got["contents"]) == 3
    assert got["contents"][2]["parts"] == [*first["parts"], *second["parts"]]  # joined, in call order
    assert {k: v for k, v in got.items() if k != "contents"} == {k: v for k, v in client.items() if k != "contents"}


def expect_call_after_text(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    user, chatter, model, answers = client["contents"]
    [before, said, put, call_turn, responses] = got["contents"]
    assert (before, said, call_turn, responses) == (user, chatter, model, answers)  # the text kept, in place
    assert put["role"] == "user" and [list(p) for p in put["parts"]] == [["text"]] and put["parts"][0]["text"]
    assert got == {**client, "contents": [user, chatter, put, model, answers]}


def expect_foreign_signature(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    assert signature_at(client, 1) != issued and signature_at(got, 1) == issued
    assert got == with_signature(client, 1, issued)


def expect_empty_text(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    assert client["contents"][0]["parts"] == [{"text": ""}]
    assert got == {**client, "contents": client["contents"][1:]}


def expect_svg_image(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    *answers, svg = client["contents"][2]["parts"]
    assert inline(svg)[0] == "image/svg+xml"
    *kept, image = got["contents"][2]["parts"]
    mime, data = inline(image)
    assert kept == answers and mime == "image/png" and data.startswith(b"\x89PNG\r\n\x1a\n")
    assert got["contents"][:2] == client["contents"][:2] and len(got["contents"]) == 3
    assert {k: v for k, v in got.items() if k != "contents"} == {k: v for k, v in client.items() if k != "contents"}


def expect_mcp_schema(client: dict[str, Any], got: dict[str, Any], issued: str) -> None:
    read_file, mcp = client["tools"][0]["functionDeclarations"]
    fitted = got["tools"][0]["functionDeclarations"]
    assert fitted[0] == read_file
    assert fitted[1] == {"name": "mcp_tool", "description": "an MCP tool", "parametersJsonSchema": mcp["parameters"]}
    assert set(fitted[1]["parametersJsonSchema"]["properties"]) == {"n"}  # nothing of the schema lost
    assert got == {**client, "tools": [{"functionDeclarations": fitted}]}


EXPECTED = {
    "lost-signature": (expect_lost_signature, {RESTORE}),
    "resumed-duplicates": (expect_resumed_duplicates, {"drop-repeated-responses"}),
    "split-responses": (expect_split_responses, {"pair-tool-calls"}),
    "call-after-text": (expect_call_after_text, {"order-gemini-turns"}),
    "foreign-signature": (expect_foreign_signature, {RESTORE}),
    "empty-text": (expect_empty_text, {"order-gemini-turns"}),
    "svg-image": (expect_svg_image, {"fit-images"}),
    "mcp-schema": (expect_mcp_schema, {"fit-tool-schemas"}),
}


@pytest.mark.parametrize("name", genai_client.BROKEN)
def test_each_broken_turn2_is_answered_with_what_its_repair_promises(upstream, proxy, name: str) -> None:
    parts, history, issued = turn1(upstream, proxy, name)
    foreign = base64.b64decode(upstream.gemini.ledger.sign_call("read_file", calls_of(name)[0],
                                                                signer="another-account"))
    broken, raw_tools, _ = genai_client.broken_histories(history, genai_client.responses_for(parts), foreign)[name]
    client, seen, logged = answered(upstream, proxy, broken, raw_tools=raw_tools)
    check, repairs = EXPECTED[name]
    if name == "foreign-signature":  # refused once, learned, resent repaired
        refused, resent = seen
        assert (refused.status, refused.reason, resent.status) == (400, "signature-invalid", 200)
        assert refused.json == client
        [retry] = [r for r in logged if r.get("event") == "retry"]
        assert (retry["status"], retry["rejection"], retry["result"]) == (400, "gemini-signature-refused",
                                                                           "resent once → 200")
        assert retry["error"].startswith(CORRUPTED)  # Google's text, as llmfix read it
        seen = [resent]
    [got] = seen
    assert got.status == 200 and got.path.endswith(f"{MODEL}:generateContent")
    check(client, got.json, issued)
    assert {r["repair"] for r in logged if "repair" in r} == repairs
    assert issued not in json.dumps(logged)  # a signature is logged as its length and digest


# ------------------------------------------------------------------ a restart, and a fleet sharing one Redis


def replayed_without_signature(upstream: MockUpstream, proxy: Mitmdump, parts: list[types.Part],
                               history: list[types.Content], issued: str) -> None:
    """Turn 2 without any ``thoughtSignature`` through ``proxy``: the mock got the very signature it issued, from
    llmfix's memory."""
    user, model = history
    client, [got], logged = answered(upstream, proxy, [user, without_signatures(model),
                                                       genai_client.responses_for(parts)])
    assert got.status == 200 and got.json == with_signature(client, 1, issued)
    assert base64.b64decode(signature_at(got.json, 1)) == parts[0].thought_signature  # the bytes of turn 1
    [record] = logged
    assert (record["repair"], record["location"]) == (RESTORE, "contents[1].parts[0].thoughtSignature")
    assert "from memory" in record["summary"] and issued not in json.dumps(logged) + proxy.output()


def test_after_an_llmfix_restart_the_signature_comes_from_its_memory_file(upstream, llmfix: Llmfix) -> None:
    parts, history, issued = turn1(upstream, llmfix.proxy, "restart")
    replayed_without_signature(upstream, llmfix.restart(), parts, history, issued)


@needs_redis
def test_two_llmfix_instances_share_the_signature_through_redis(upstream, tmp_path: Path,
                                                                redis_server: RedisServer) -> None:
    shared = {"llmfix_memory": redis_server.url, "llmfix_memory_timeout": "2s"}

    def heard() -> bool:
        with redis_server.client() as c:
            return bool(list(c.scan_iter(match=b"llmfix:reasoning-key:gemini.thought_signature:sig *")))

    a, b = started_together(lambda: start_proxy(upstream, tmp_path / "a", llmfix=True, **shared),
                            lambda: start_proxy(upstream, tmp_path / "b", llmfix=True, **shared))
    with a, b:
        parts, history, issued = turn1(upstream, a, "fleet")
        assert until(heard, 10.0)
        replayed_without_signature(upstream, b, parts, history, issued)
    for key, value in redis_server.dump().items():
        assert genai_client.KEY.encode() not in key + value


# ------------------------------------------------------------------ a session llmfix never heard


def test_a_session_llmfix_never_heard_gets_googles_stand_in_on_its_current_turn_only(upstream, proxy) -> None:
    """Two turns straight to the mock (past no llmfix), then the whole history replayed through llmfix without its
    signatures: the first call of the current turn gets the stand-in; the older turn and the second calls stay
    unsigned (Gemini checks neither)."""
    probed = len(client_sent(proxy))
    a, b = calls_of("unheard")
    c = {"file_path": "unheard/c.md"}
    gc = direct(upstream)
    upstream.gemini.queue(function_calls(("read_file", a), ("read_file", b)))
    parts, history = genai_client.turn1(gc, MODEL, "Read a.md and b.md.")
    upstream.gemini.queue(text_answer("read"))
    done = [*history, genai_client.responses_for(parts)]
    said = genai_client.turn2(gc, MODEL, done).candidates[0].content
    asked = types.Content(role="user", parts=[types.Part(text="Now c.md and a.md again.")])
    upstream.gemini.queue(function_calls(("read_file", c), ("read_file", a)))
    later = streamed(gc, [*done, said, asked])
    assert [p.function_call.args for p in later] == [c, a] and later[0].thought_signature
    user, model = history
    replay = [user, without_signatures(model), genai_client.responses_for(parts), said, asked,
              without_signatures(types.Content(role="model", parts=later)), genai_client.responses_for(later)]
    assert len(client_sent(proxy)) == probed  # llmfix heard nothing of it
    status, message = genai_client.rejection(lambda: genai_client.turn2(gc, MODEL, replay))  # the control
    assert (status, message) == (400, missing_signature("gemini", "read_file", 6))
    client, [got], logged = answered(upstream, proxy, replay)
    assert got.status == 200 and signature_at(client, 5) is None
    assert got.json == with_signature(client, 5, DUMMY)  # the current turn's first call only
    assert signature_at(got.json, 1) is None and "thoughtSignature" not in got.json["contents"][5]["parts"][1]
    [record] = logged
    assert (record["repair"], record["location"], record["after"]) == (
        RESTORE, "contents[5].parts[0].thoughtSignature", DUMMY)
    assert "Google's stand-in" in record["summary"]


# ------------------------------------------------------------------ a signature Gemini refuses


@pytest.mark.parametrize("signer", ["another-account", "vertex"])
def test_a_refused_signature_is_resent_repaired_once_then_repaired_before_it_leaves(upstream, proxy,
                                                                                    signer: str) -> None:
    """A signature the mock never issued (another account's), or one Vertex issued, replayed to the Gemini API:
    ``Corrupted thought signature.``; llmfix learns it is refused, resends with the one issued in turn 1, and the
    next request of the session, which still carries it in an older turn, leaves repaired: one upstream request."""
    parts, history, issued = turn1(upstream, proxy, f"refused-{signer}")
    user, model = history
    foreign = upstream.gemini.ledger.sign_call("read_file", calls_of(f"refused-{signer}")[0], signer=signer)
    signed = copy.deepcopy(model)
    signed.parts[0].thought_signature = base64.b64decode(foreign)
    turn2 = [user, signed, genai_client.responses_for(parts)]
    client, seen, logged = answered(upstream, proxy, turn2)
    refused, resent = seen
    assert (refused.status, refused.reason, resent.status) == (400, "signature-invalid", 200)
    assert refused.json == client and resent.json == with_signature(client, 1, issued)
    assert [r.get("event") or r["repair"] for r in logged] == [RESTORE, "retry"]
    assert logged[1]["error"].startswith(CORRUPTED) and logged[1]["result"] == "resent once → 200"

    later = [*turn2, types.Content(role="model", parts=[types.Part(text=DONE)]),
             types.Content(role="user", parts=[types.Part(text="Thanks. Anything else?")])]
    client, [got], logged = answered(upstream, proxy, later)  # learned: one upstream request
    assert got.status == 200 and signature_at(client, 1) is not None
    assert "thoughtSignature" not in got.json["contents"][1]["parts"][0]  # an older turn needs none
    expected = copy.deepcopy(client)
    del expected["contents"][1]["parts"][0]["thoughtSignature"]
    assert got.json == expected
    assert [r["repair"] for r in logged] == [RESTORE] and "refused" in logged[0]["summary"]
    for text in (json.dumps(changes(proxy)), proxy.output()):
        assert issued not in text and genai_client.KEY not in text
