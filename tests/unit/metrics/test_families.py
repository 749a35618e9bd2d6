"""Events → metric values, every label through the bounded label functions."""

from __future__ import annotations

import json

import pytest

from llmfix import events
from llmfix.metrics import labels
from llmfix.metrics.families import Families


def value(f: Families, name: str, **labels: str) -> float | None:
    return f.registry.get_sample_value(name, labels)


def test_a_request_counts_once_with_its_time_and_bytes() -> None:
    f = Families()
    f.observe(events.RequestSeen("http", "responses", "xai+learned", "repaired", 1000, 700, 0.003))
    assert value(f, "llmfix_requests_total", profile="xai", dialect="responses", transport="http",
                 outcome="repaired") == 1
    assert value(f, "llmfix_request_seconds_count", dialect="responses", transport="http") == 1
    assert value(f, "llmfix_request_seconds_bucket", dialect="responses", transport="http", le="0.0025") == 0
    assert value(f, "llmfix_request_seconds_bucket", dialect="responses", transport="http", le="0.005") == 1
    assert value(f, "llmfix_request_received_bytes_total", dialect="responses", transport="http") == 1000
    assert value(f, "llmfix_request_sent_bytes_total", dialect="responses", transport="http") == 700


def test_a_repair_counts_the_request_per_repair_and_each_change_and_images() -> None:
    f = Families()
    f.observe(events.Repaired("http", "messages", "anthropic", "repair", ("fit-images", "pair-tool-calls"),
                              ("fit-images", "fit-images", "pair-tool-calls"), 1, 1))
    common = {"profile": "anthropic", "dialect": "messages", "mode": "repair"}
    assert value(f, "llmfix_repairs_total", repair="fit-images", **common) == 1
    assert value(f, "llmfix_changes_total", repair="fit-images", **common) == 2
    assert value(f, "llmfix_changes_total", repair="pair-tool-calls", **common) == 1
    assert value(f, "llmfix_images_total", profile="anthropic", outcome="fitted") == 1
    assert value(f, "llmfix_images_total", profile="anthropic", outcome="omitted") == 1


def test_retries_and_quirks() -> None:
    f = Families()
    f.observe(events.Retried("websocket", "responses", "xai-model-input", "still_rejected"))
    f.observe(events.QuirkLearned("http", "responses", "responses_tool_output_array"))
    f.observe(events.QuirkLearned("http", "messages", "messages.foreign_thinking"))
    assert value(f, "llmfix_retries_total", dialect="responses", transport="websocket", rejection="xai-model-input",
                 outcome="still_rejected") == 1
    assert value(f, "llmfix_quirks_learned_total", dialect="responses", quirk="responses_tool_output_array") == 1
    assert value(f, "llmfix_quirks_learned_total", dialect="messages", quirk="messages.foreign_thinking") == 1


def test_memory_state_keeps_the_newest_and_one_backend() -> None:
    f = Families()
    f.observe(events.MemoryState("redis", True, seq=5))
    f.observe(events.MemoryState("redis", False, seq=4))  # replayed late: older than what came meanwhile
    assert value(f, "llmfix_memory_up", backend="redis") == 1
    f.observe(events.MemoryState("redis", False, seq=6))
    assert value(f, "llmfix_memory_up", backend="redis") == 0
    f.observe(events.MemoryState("sqlite", True, seq=7))  # the memory option changed
    assert value(f, "llmfix_memory_up", backend="sqlite") == 1
    assert value(f, "llmfix_memory_up", backend="redis") is None
    f.observe(events.MemoryFailOpen("redis", "timeout"))
    assert value(f, "llmfix_memory_fail_open_total", backend="redis", reason="timeout") == 1


@pytest.mark.parametrize(
    ("given", "label"),
    [("xai", "xai"), ("xai+learned", "xai"), ("spec+*.gw.example.test", "spec"),
     ("openai+api.openai.com:443", "openai"), ("deepseek-anthropic", "deepseek-anthropic"),
     ("api.example.test", "other"), (None, "unknown")],
)
def test_profile_label_is_the_built_in_profile(given, label) -> None:
    assert labels.profile(given) == label


def test_made_up_names_become_other() -> None:
    """The bound does not rest on the events being right: a name llmfix does not define is ``other``."""
    f = Families()
    f.observe(events.RequestSeen("http", "api.example.test", "evil.example.test+x", "weird", 1, 1, 0.001))
    f.observe(events.Repaired("tcp", "chat", "spec+*.gw.example.test", "fix", ("sk-123",), ("sk-123",), 0, 0))
    f.observe(events.Retried("http", "chat", "Bearer sk-123", "sometimes"))
    f.observe(events.QuirkLearned("http", "chat", "Bearer sk-123"))
    f.observe(events.QuirkLearned("http", "chat", "api.example.test"))
    f.observe(events.MemoryFailOpen("redis://user:pw@host", "because"))
    text = json.dumps([(m.name, s.labels) for m in f.registry.collect() for s in m.samples])
    assert "example" not in text and "sk-" not in text and "Bearer" not in text and "pw" not in text
    assert value(f, "llmfix_requests_total", profile="other", dialect="other", transport="http",
                 outcome="other") == 1
    assert value(f, "llmfix_changes_total", repair="other", profile="spec", dialect="chat", mode="other") == 1
    assert value(f, "llmfix_quirks_learned_total", dialect="chat", quirk="other") == 2
    assert value(f, "llmfix_memory_fail_open_total", backend="other", reason="other") == 1


def test_each_instance_has_its_own_registry() -> None:
    a, b = Families(), Families()
    a.observe(events.RequestSeen("http", "chat", "openai", "untouched", 1, 1, 0.001))
    assert value(a, "llmfix_requests_total", profile="openai", dialect="chat", transport="http",
                 outcome="untouched") == 1
    assert value(b, "llmfix_requests_total", profile="openai", dialect="chat", transport="http",
                 outcome="untouched") is None
