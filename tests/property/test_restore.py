"""restore-tool-media under generated input: llmfix on both legs of a gateway (DESIGN §2, §6).

The client's request (Responses or Messages, generated as in ``test_promises``) goes to a gateway on an
unknown host and passes untouched; the gateway then sends its own version upstream through the same
llmfix — same dialect, or converted from Responses to Chat — with each tool result's media
``dropped``, already ``hoisted`` into a user message, or ``intact`` (``tests/property/gateway.py``).

While the client's request is in flight, the gateway's request reaches the upstream with every media
part of the client exactly as many times as the client sent it (never twice), or with a ``dropped``
record; the upstream of that host accepts it; the texts the gateway sent are all there; and sending
the result again changes nothing. Once the client's request has ended, nothing is restored.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.dialects.registry import named
from llmfix.engine import Request, Settings
from llmfix.memory.media_window import MediaWindow
from tests.property import gateway, promises
from tests.property.budget import BUDGET
from tests.property.strategies import CONVERSATIONS, HOSTS, KEYS, PATHS
from tests.property.test_promises import Tick

GATEWAY_HOST = "gateway.internal.example"
LEGS = [
    *[("responses", "responses", h) for h in ("openai", "xai", "spec")],
    *[("responses", "chat", h) for h in ("openai", "xai", "anthropic", "spec")],
    *[("messages", "messages", h) for h in ("anthropic", "spec")],
]
CLIENT_CONSTRAINTS = {"responses": "xai", "messages": "anthropic"}  # what every target and the converter can take


def tool_call_ids(items: list[dict[str, Any]]) -> list[str]:
    ids = [i["call_id"] for i in items if str(i.get("type", "")).endswith("_call_output")]
    for m in items:
        if isinstance(m.get("content"), list):
            ids += [b["tool_use_id"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    return ids


def payloads(value: Any, dialect: str | None = None) -> Counter[str]:
    """Media payloads in ``value``; for a Chat target only those Chat can carry (not file_id-only images)."""
    return Counter(promises.payload(p) for p in promises.media(value)
                   if dialect != "chat" or p["type"] != "input_image" or p.get("image_url"))


@pytest.mark.parametrize(("client_dialect", "gateway_dialect", "target"), LEGS)
@BUDGET
@given(data=st.data())
def test_gateway_leg_gets_the_clients_media_back_once(client_dialect: str, gateway_dialect: str, target: str,
                                                      data: st.DataObject) -> None:
    conv = data.draw(CONVERSATIONS[client_dialect](CLIENT_CONSTRAINTS[client_dialect]), label="client")
    ids = tool_call_ids(conv.body()[conv.key])
    fates = dict(zip(ids, data.draw(st.lists(st.sampled_from(gateway.FATES), min_size=len(ids), max_size=len(ids)),
                                     label="gateway"), strict=True))
    client_ended = data.draw(st.booleans(), label="client request ended")
    window = MediaWindow(0.0, clock=Tick())
    settings = Settings(window=window)
    client_raw, client = conv.raw(), conv.body()
    first = engine.process(Request(named(client_dialect), GATEWAY_HOST, 443, client_raw, None, "client"), settings)
    # untouched, but for the images of a model that takes none (grok-code-fast-1 is text-only by the catalogue)
    # and images the gateway's strict reading refuses (fit-images): the gateway gets them as llmfix sent them
    assert set(first.repairs) <= {"omit-unsupported-media", "fit-images"}, [c.line() for c in first.changes]
    if client_ended:
        window.finish("client")
    client = promises.body_of(client_raw, first)[1]  # what the gateway received from llmfix

    items = client[conv.key]
    forwarded = {"responses": gateway.responses, "chat": gateway.to_chat, "messages": gateway.messages}[gateway_dialect]
    sent = {"model": conv.model, KEYS[gateway_dialect]: forwarded(items, fates), **conv.top}
    raw = gateway.dumps(sent)
    host = HOSTS[target]
    outcome = engine.process(Request(named(gateway_dialect), host.name, 443, raw, None, "gateway"), settings)
    assert outcome.status != "failed", outcome.reason
    event(f"{gateway_dialect}/{target}: {'+'.join(outcome.repairs) or 'untouched'}")
    out, got = promises.body_of(raw, outcome)

    restored = [c for c in outcome.changes if c.repair == "restore-tool-media"]
    if client_ended:
        assert not restored, "media came back from a request that had already ended"
        expected = payloads(sent)
    else:
        expected = payloads(client, gateway_dialect) | payloads(sent)
    fitted = {promises.payload(c.after): promises.payload(c.before)  # an image fitted to the target's limits
              for c in outcome.changes if c.repair == "fit-images" and not c.dropped}
    have = Counter(fitted.get(p, p) for p in payloads(got).elements())
    assert not have - expected, f"media duplicated or invented: {list((have - expected).elements())[:3]}"
    missing = sum((expected - have).values())
    dropped = sum(len(c.dropped) for c in outcome.changes)
    assert missing <= dropped, f"{missing} media part(s) missing from the upstream request, {dropped} recorded"
    for text in promises.strings(sent):
        assert any(text in s for s in promises.strings(got)), f"text {text!r} is missing"
    promises.accepted(host.rules, PATHS[gateway_dialect], got)

    again = engine.process(Request(named(gateway_dialect), host.name, 443, out, None, "gateway-again"), settings)
    assert again.status == "untouched", f"not idempotent: {[c.line() for c in again.changes]}"
