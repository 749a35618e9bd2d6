"""End to end: llmfix's metric labels stay bounded and carry no secret, whatever a client sends.

A client sends LLM requests in all three dialects to hosts and models it makes up (each request a new host name
and a new model name), with API keys in ``Authorization`` and ``x-api-key`` and a base64 image in the body, through
a real mitmdump with llmfix and ``llmfix_metrics``; a profiles file names some of those hosts and models by glob
(so their profile names carry the patterns). After a first round the set of series is taken; a second round of
thirty new hosts and models adds counts, never a series. No label value, and nothing in the whole scrape, holds a
host, a model, a key, an ``Authorization`` value or base64.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from llmfix import profiles
from llmfix.repairs import pipeline
from llmfix.retry import rejections
from tests.e2e.harness import Mitmdump, loopback_proxy
from tests.e2e.scrape import Scrape, metrics_url, scrape
from tests.images import png_b64
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
PROFILES = """
[hosts."*.gw.example.test"]
chat_tool_media = false

[models."text-only-*"]
input = ["text"]
"""
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}")
IMAGE = png_b64(7)


def body(dialect: str, model: str) -> dict[str, Any]:
    """A one-turn request with an image, in ``dialect``."""
    if dialect == "chat":
        return {"model": model, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}"}}]}]}
    if dialect == "responses":
        return {"model": model, "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "what is this"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}"}]}]}
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE}}]}]}


class Client:
    """Makes up a host, a model and keys for every request; remembers them all."""

    def __init__(self, proxy: Mitmdump) -> None:
        self.http = httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60)
        self.made_up: list[str] = []  # hosts, models and keys, as sent

    def send(self, n: int) -> None:
        for i in range(n):
            token = uuid.uuid4().hex[:10]
            dialect = ("chat", "responses", "messages")[i % 3]
            host = (f"h{token}.gw.example.test", f"llm-{token}.example.test", "api.openai.com")[(i // 3) % 3]
            if dialect == "messages" and host == "api.openai.com":
                host = "api.anthropic.com"
            model = (f"text-only-{token}", f"model-{token}")[i % 2]
            key, other = f"sk-made-up-{token}-key", f"sk-ant-{token}-other"
            self.made_up += [host, model, key, other, token]
            response = self.http.post(f"https://{host}{PATHS[dialect]}", content=json.dumps(body(dialect, model)),
                                      headers={"authorization": f"Bearer {key}", "x-api-key": other,
                                               "content-type": "application/json"})
            assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Mitmdump, str]]:
    conf = tmp_path_factory.mktemp("labels-conf")
    (conf / "profiles.toml").write_text(PROFILES)
    with MockUpstream(rules="by-host") as up, loopback_proxy(up, conf, llmfix_metrics="127.0.0.1:0",
                                                             llmfix_profiles=str(conf / "profiles.toml")) as p:
        yield p, metrics_url(p)


def assert_no_made_up_value_or_secret(m: Scrape, client: Client) -> None:
    values = {v for s in m.samples for v in s.labels.values()}
    for value in values:
        assert not any(x in value for x in client.made_up), value
        assert not BASE64_RUN.search(value) and "Bearer" not in value and "sk-" not in value, value
    assert not any(x in m.text for x in client.made_up)
    assert IMAGE[:40] not in m.text and "Bearer" not in m.text and "sk-" not in m.text
    assert not BASE64_RUN.search(m.text)


def assert_bounded_by_llmfix_names(m: Scrape) -> None:
    allowed = {
        "profile": {*profiles.BUILTIN, "unknown", "other"},
        "dialect": {"chat", "responses", "messages", "other"},
        "transport": {"http", "websocket"},
        "repair": {*pipeline.NAMES, "other"},
        "rejection": {*(r.name for r in rejections.RULES), "other"},
        "mode": {"repair", "report"},
        "backend": {"sqlite", "redis"},
    }
    for label, names in allowed.items():
        assert m.values_of(label) <= names, label


def test_label_sets_stay_the_same_under_new_hosts_and_models(proxy) -> None:
    p, url = proxy
    client = Client(p)
    client.send(18)  # every dialect × kind of host × kind of model
    first = scrape(url)
    series = first.label_sets()
    assert first.value("llmfix_requests_total") == 18
    assert first.values_of("profile") == {"spec", "openai", "anthropic"}  # the patterns' profiles are "spec"
    assert first.value("llmfix_images_total", outcome="omitted") > 0  # text-only models: their images omitted
    client.send(30)  # thirty new hosts and models, new keys
    second = scrape(url)
    assert second.value("llmfix_requests_total") == 48
    assert second.label_sets() == series  # more counts, not one more series
    for m in (first, second):
        assert_no_made_up_value_or_secret(m, client)
        assert_bounded_by_llmfix_names(m)
    client.http.close()


def test_the_log_says_where_metrics_are_served_and_nothing_else_of_them(proxy) -> None:
    p, url = proxy
    [line] = [line for line in p.output().splitlines() if "llmfix metrics" in line]
    assert line.endswith(f"llmfix metrics: serving {url}/metrics and {url}/healthz")
