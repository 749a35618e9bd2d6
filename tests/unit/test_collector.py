"""llmfix.collector: a pause several threads hold at once, given back by a thread for its image work."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

from llmfix.collector import Collector


@contextlib.contextmanager
def held_by_another_thread(c: Collector) -> Iterator[None]:
    """A pause another thread holds for the block."""
    entered, leave = threading.Event(), threading.Event()

    def other() -> None:
        with c.paused():
            entered.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    try:
        assert entered.wait(10)
        yield
    finally:
        leave.set()
        t.join(10)


def test_the_collector_runs_again_only_when_no_thread_holds_a_pause() -> None:
    c = Collector()
    assert gc.isenabled()
    with held_by_another_thread(c):
        with c.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the other thread still holds its pause
    assert gc.isenabled()


def test_a_thread_releases_its_own_pauses_for_a_block_and_takes_them_back() -> None:
    c = Collector()
    with c.paused(), c.paused():  # nested: a request whose run runs another engine call
        assert not gc.isenabled()
        with c.released():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_release_does_not_lift_another_threads_pause() -> None:
    c = Collector()
    with held_by_another_thread(c), c.paused(), c.released():
        assert not gc.isenabled()  # the other thread's pause holds
    assert gc.isenabled()


def test_a_collector_someone_turned_off_stays_off() -> None:
    c = Collector()
    gc.disable()
    try:
        with c.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
