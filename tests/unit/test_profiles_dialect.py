"""Profiles chosen by host AND dialect: a vendor's Chat and Anthropic endpoints are two upstreams."""

from __future__ import annotations

import pytest

from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.profiles import BUILTIN, ProfileTable, load_table
from llmfix.route import dialect_for

M, C, R = MESSAGES, CHAT, RESPONSES


@pytest.mark.parametrize(
    ("host", "dialect", "profile"),
    [
        ("api.deepseek.com", C, "deepseek"),
        ("api.deepseek.com", R, "deepseek"),
        ("api.deepseek.com", M, "deepseek-anthropic"),
        ("api.deepseek.com", None, "deepseek"),
        ("open.bigmodel.cn", M, "glm-anthropic"),
        ("open.bigmodel.cn", C, "glm"),
        ("api.z.ai", M, "glm-anthropic"),
        ("dashscope-intl.aliyuncs.com", M, "qwen-anthropic"),
        ("dashscope.aliyuncs.com", M, "qwen-anthropic"),
        ("coding.dashscope.aliyuncs.com", M, "qwen-anthropic"),
        ("ws123.ap-southeast-1.maas.aliyuncs.com", M, "qwen-anthropic"),
        ("api.minimax.io", M, "minimax-anthropic"),
        ("api.minimaxi.com", M, "minimax-anthropic"),
        ("api.moonshot.ai", M, "moonshot-anthropic"),
        ("api.moonshot.cn", M, "moonshot-anthropic"),
        ("api.kimi.com", M, "moonshot-anthropic"),
        ("api.anthropic.com", M, "anthropic"),
        ("api.openai.com", M, "openai"),
        ("gateway.example.com", M, "spec"),
    ],
)
def test_profile_by_host_and_dialect(host: str, dialect: Dialect | None, profile: str) -> None:
    assert ProfileTable().resolve(host, 443, None, dialect).profile.name == profile


@pytest.mark.parametrize("name", ["deepseek-anthropic", "glm-anthropic", "qwen-anthropic", "minimax-anthropic",
                                  "moonshot-anthropic"])
def test_anthropic_compatible_endpoints_take_no_system_messages(name: str) -> None:
    assert BUILTIN[name].anthropic_system_messages is False


@pytest.mark.parametrize("name", ["anthropic", "spec", "openai", "openrouter"])
def test_anthropic_and_unknown_upstreams_take_system_messages(name: str) -> None:
    assert BUILTIN[name].anthropic_system_messages is True


def test_deepseek_chat_is_text_only_but_its_messages_api_takes_images() -> None:
    t = ProfileTable()
    chat = t.resolve("api.deepseek.com", 443, "deepseek-v4-pro", C)
    assert chat.profile.media_input is False and chat.modalities == frozenset({"text"})
    messages = t.resolve("api.deepseek.com", 443, "claude-opus-5-5", M)
    assert messages.profile.media_input is True and messages.modalities is None


@pytest.mark.parametrize(
    "path",
    ["/anthropic/v1/messages", "/anthropic/v1/messages?beta=true", "/anthropic/messages",
     "/api/anthropic/v1/messages", "/apps/anthropic/v1/messages?beta=true", "/coding/v1/messages"],
)
def test_messages_dialect_under_vendor_path_prefixes(path: str) -> None:
    assert dialect_for("POST", path, "application/json") is MESSAGES


def test_profiles_file_stays_backward_compatible_and_base_picks_the_dialect_variant(tmp_path) -> None:
    cfg = tmp_path / "profiles.toml"
    cfg.write_text('[hosts."127.0.0.1:9001"]\nbase = "deepseek"\n')
    t = load_table(str(cfg))
    assert t.resolve("127.0.0.1", 9001, None, C).profile.name == "deepseek"
    assert t.resolve("127.0.0.1", 9001, None, M).profile.name == "deepseek-anthropic"
    assert t.resolve("127.0.0.1", 9001, None).profile.name == "deepseek"  # no dialect: the host's default


def test_profiles_file_per_dialect_table(tmp_path) -> None:
    cfg = tmp_path / "profiles.toml"
    cfg.write_text(
        '[hosts."llm.corp.example"]\nchat_tool_media = true\n\n'
        '[hosts."llm.corp.example".messages]\nanthropic_system_messages = false\n\n'
        '[hosts."api.deepseek.com".messages]\nanthropic_system_messages = true\n\n'
        '[models."glm-*".chat]\ninput = ["text"]\n'
    )
    t = load_table(str(cfg))
    corp_m = t.resolve("llm.corp.example", 443, None, M).profile
    corp_c = t.resolve("llm.corp.example", 443, None, C).profile
    assert corp_m.anthropic_system_messages is False and corp_m.chat_tool_media is True
    assert corp_c.anthropic_system_messages is True and corp_c.chat_tool_media is True
    assert t.resolve("api.deepseek.com", 443, None, M).profile.anthropic_system_messages is True
    assert t.resolve("api.deepseek.com", 443, None, C).profile.name == "deepseek"
    assert t.resolve("open.bigmodel.cn", 443, "glm-zz-test", C).modalities == frozenset({"text"})
    assert t.resolve("open.bigmodel.cn", 443, "glm-zz-test", M).modalities is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[hosts."h".messages]\nanthropic_system_messages = "maybe"\n', "anthropic_system_messages"),
        ('[hosts."h".messages]\nnot_a_flag = true\n', "unknown flag"),
        ('[hosts."h".messages.chat]\nmedia_input = true\n', "cannot hold another"),
        ('[hosts."h".messages]\nbase = "nope"\n', "unknown base profile"),
    ],
)
def test_bad_dialect_tables_are_refused_with_the_reason(tmp_path, text: str, error: str) -> None:
    cfg = tmp_path / "profiles.toml"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=error):
        load_table(str(cfg))
