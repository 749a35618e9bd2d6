"""llmfix.idset.Ids: a set grown turn by turn, never copied whole, answering as a plain set would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmfix.idset import EMPTY, Ids

ids = st.lists(st.lists(st.text("abcdef", min_size=1, max_size=3), max_size=6), max_size=40)


@given(ids)
def test_answers_as_the_union_of_what_was_added(turns: list[list[str]]) -> None:
    got: Ids = EMPTY
    plain: set[str] = set()
    history: list[tuple[Ids, set[str]]] = []
    for turn in turns:
        got = got.plus(turn)
        plain = plain | set(turn)
        history.append((got, plain))
        assert all(x in got for x in plain) and "zz" not in got
        assert got.size >= len(plain)
        assert sorted(got.common(set("abc"))) == sorted(set("abc") & plain)
        assert sorted(got.common(plain | {"zz"})) == sorted(plain)
    for old, members in history:  # an older set is never changed by what was added after it
        assert sorted(old.common(set("abcdef") | {"aa", "ab"})) == sorted(members & (set("abcdef") | {"aa", "ab"}))


def test_keeps_few_chunks_and_the_newest_value() -> None:
    got = EMPTY
    for i in range(5000):
        got = got.plus({f"id{i}": i, "same": i})
    assert len(got._chunks) <= 16  # O(log n): membership stays a few lookups
    assert got.get("same") == 4999 and got.get("id7") == 7 and got.get("nope") is None
