"""Routing: which requests are LLM requests of which dialect, and which upstream profile applies."""

from __future__ import annotations

import pytest

from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.profiles import ProfileTable, load_table, parse_table
from llmfix.route import dialect_for


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        ("/v1/chat/completions", CHAT),
        ("/api/v1/chat/completions", CHAT),
        ("/openai/v1/chat/completions?api-version=2024-10-21", CHAT),
        ("/zen/go/v1/chat/completions", CHAT),
        ("/chat/completions/", CHAT),
        ("/v1/responses", RESPONSES),
        ("/openai/v1/responses", RESPONSES),
        ("/backend-api/codex/responses", RESPONSES),
        ("/v1/messages", MESSAGES),
        ("/api/anthropic/v1/messages?beta=true", MESSAGES),
    ],
)
def test_llm_paths_route_to_their_dialect(path: str, dialect: Dialect) -> None:
    assert dialect_for("POST", path, "application/json") is dialect


@pytest.mark.parametrize(
    ("method", "path", "ctype"),
    [
        ("GET", "/v1/responses", None),  # retrieval, not a request to repair
        ("GET", "/v1/models", None),
        ("POST", "/v1/embeddings", "application/json"),
        ("POST", "/v1/responses/resp_123/cancel", "application/json"),
        ("POST", "/v1/messages/count_tokens", "application/json"),
        ("POST", "/v1/chat/completions", "multipart/form-data; boundary=x"),
        ("POST", "/upload", "application/json"),
        ("POST", "/index.html", "text/html"),
        ("OPTIONS", "/v1/chat/completions", None),
    ],
)
def test_other_traffic_is_not_routed(method: str, path: str, ctype: str | None) -> None:
    assert dialect_for(method, path, ctype) is None


def test_missing_content_type_still_routes() -> None:
    assert dialect_for("POST", "/v1/responses", None) is RESPONSES


@pytest.mark.parametrize(
    ("host", "profile"),
    [
        ("api.openai.com", "openai"),
        ("API.OPENAI.COM", "openai"),
        ("myco.openai.azure.com", "openai"),
        ("api.x.ai", "xai"),
        ("api.anthropic.com", "anthropic"),
        ("api.deepseek.com", "deepseek"),
        ("openrouter.ai", "openrouter"),
        ("gateway.example.com", "spec"),
        ("127.0.0.1", "spec"),
    ],
)
def test_builtin_profiles_by_host(host: str, profile: str) -> None:
    assert ProfileTable().resolve(host, 443, None).profile.name == profile


def test_profile_flags_differ_where_upstreams_differ() -> None:
    t = ProfileTable()
    assert t.resolve("api.openai.com", 443, None).profile.responses_tool_output_array is True
    assert t.resolve("api.x.ai", 443, None).profile.responses_tool_output_array is False
    assert t.resolve("api.deepseek.com", 443, None).profile.chat_tool_text_array is False
    assert t.resolve("unknown.example", 443, None).profile.chat_tool_media is False  # strict spec reading


def test_user_overrides_by_host_port_and_model(tmp_path) -> None:
    cfg = tmp_path / "profiles.toml"
    cfg.write_text(
        '[hosts."127.0.0.1:8443"]\nbase = "xai"\n\n'
        '[hosts."*.corp.example"]\nchat_tool_media = true\n\n'
        '[models."my-grok-*"]\nresponses_tool_output_array = false\ninput = ["text"]\n'
    )
    t = load_table(str(cfg))
    assert t.resolve("127.0.0.1", 8443, None).profile.name == "xai"
    assert t.resolve("127.0.0.1", 9000, None).profile.name == "spec"
    assert t.resolve("llm.corp.example", 443, None).profile.chat_tool_media is True
    r = t.resolve("api.openai.com", 443, "my-grok-1")
    assert r.profile.responses_tool_output_array is False
    assert r.modalities == frozenset({"text"})


def test_model_catalogue_decides_image_input() -> None:
    t = ProfileTable()
    assert "image" in (t.resolve("api.x.ai", 443, "grok-4.3").modalities or ())
    assert t.resolve("api.x.ai", 443, "grok-3-mini").modalities == frozenset({"text"})  # prefix fallback
    assert t.resolve("api.x.ai", 443, "grok-code-fast-1").modalities == frozenset({"text"})
    assert t.resolve("api.deepseek.com", 443, "deepseek-chat").modalities == frozenset({"text"})
    assert t.resolve("gateway.example", 443, "totally-new-model-9").modalities is None  # unknown: assume it takes all


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"hostz": {}}, "unknown section"),
        ({"hosts": {"a": {"base": "nope"}}}, "unknown base profile"),
        ({"hosts": {"a": {"chat_tool_medias": True}}}, "unknown flag"),
        ({"hosts": {"a": {"chat_tool_media": "yes please"}}}, "chat_tool_media"),
        ({"models": {"m": {"input": "text"}}}, "input must be a list"),
        ({"models": {"m": 3}}, "must be a table"),
    ],
)
def test_bad_profiles_are_rejected_with_the_reason(doc: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_table(doc, "profiles.toml")
