"""LearnedQuirks (the engine's view of learned flags) and how they combine with profiles (ProfileTable.resolve)."""

from __future__ import annotations

from llmfix.memory.sqlite_quirks import SqliteQuirkStore
from llmfix.memory.store import Quirk
from llmfix.profiles import ProfileTable, parse_table
from llmfix.retry.learned import LearnedQuirks

DAY = 86400.0


def q(flag: str, value: bool, at: float = 1000.0, host: str = "gw.test", dialect: str = "responses") -> Quirk:
    return Quirk(host, 443, dialect, flag, value, "422 xai-model-input", at)


def test_learned_once_then_known() -> None:
    store = SqliteQuirkStore(":memory:", max_age_s=DAY, clock=lambda: 1000.0)
    learned = LearnedQuirks(store, DAY, clock=lambda: 1000.0)
    assert learned.flags("gw.test", 443, "responses") == ()
    assert learned.learn(q("responses_tool_output_array", False)) is True
    assert learned.learn(q("responses_tool_output_array", False, at=1001.0)) is False  # already known: no write
    assert learned.flags("GW.TEST", 443, "responses") == (("responses_tool_output_array", False),)
    assert learned.flags("gw.test", 8443, "responses") == ()  # per port
    assert learned.flags("gw.test", 443, "chat") == ()  # per dialect
    assert [x.learned_at for x in store.quirks()] == [1000.0]


def test_loaded_from_the_store_and_expiring_without_a_restart() -> None:
    now = [1000.0]
    store = SqliteQuirkStore(":memory:", max_age_s=DAY, clock=lambda: now[0])
    store.learn(q("chat_tool_text_array", False, dialect="chat"))
    learned = LearnedQuirks(store, DAY, clock=lambda: now[0])
    assert learned.flags("gw.test", 443, "chat") == (("chat_tool_text_array", False),)
    now[0] += DAY + 1
    assert learned.flags("gw.test", 443, "chat") == () and learned.quirks() == []


def test_unlearn_keeps_the_hosts_other_quirks_in_the_store() -> None:
    store = SqliteQuirkStore(":memory:", max_age_s=DAY, clock=lambda: 1000.0)
    learned = LearnedQuirks(store, DAY, clock=lambda: 1000.0)
    learned.learn(q("responses_tool_output_array", False))
    learned.learn(q("chat_tool_text_array", False, dialect="chat"))
    learned.unlearn("gw.test", 443, "responses", "responses_tool_output_array")
    assert learned.flags("gw.test", 443, "responses") == ()
    assert [x.flag for x in store.quirks()] == ["chat_tool_text_array"]


def test_forget_by_host_and_all() -> None:
    learned = LearnedQuirks(SqliteQuirkStore(":memory:", max_age_s=DAY), DAY)
    learned.learn(q("responses_tool_output_array", False, at=2e9))
    learned.learn(q("chat_tool_text_array", False, at=2e9, host="b.test", dialect="chat"))
    assert learned.forget("gw.test") == 1
    assert learned.flags("gw.test", 443, "responses") == ()
    assert learned.forget() == 1 and learned.quirks() == []


def test_a_learned_flag_applies_over_the_builtin_profile() -> None:
    table = ProfileTable()
    plain = table.resolve("gw.test", 443, None)
    assert plain.profile.responses_tool_output_array is True
    got = table.resolve("gw.test", 443, None, learned=(("responses_tool_output_array", False),))
    assert got.profile.responses_tool_output_array is False and got.profile.name == "spec+learned"
    assert table.resolve("gw.test", 443, None).profile.responses_tool_output_array is True  # cache keyed by flags


def test_a_profiles_file_setting_for_the_host_wins_over_a_learned_one() -> None:
    table = parse_table({"hosts": {"gw.test": {"responses_tool_output_array": True},
                                   "pinned.test": {"base": "openai"}}})
    learned = (("responses_tool_output_array", False), ("chat_tool_text_array", False))
    flag_set = table.resolve("gw.test", 443, None, learned=learned).profile
    assert flag_set.responses_tool_output_array is True  # the file's flag wins
    assert flag_set.chat_tool_text_array is False  # a flag the file does not set is learned
    pinned = table.resolve("pinned.test", 443, None, learned=learned).profile
    assert pinned.responses_tool_output_array is True and pinned.chat_tool_text_array is True  # base pins all
