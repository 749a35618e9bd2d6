"""Gemini CLI-like sessions for the bench: the native Gemini API (``generativelanguage.googleapis.com``).

Built from Gemini CLI 0.61.0's turn-2 capture (``tests/fixtures/gemini-cli/turn2_request.json``: the user's prompt,
a model content with two signed ``read_file`` calls, the user content with their ``functionResponse`` parts and
``inlineData`` images; ``systemInstruction``, 15 ``functionDeclarations``, ``generationConfig``), its history grown
with that client's tool round trips, inserted after the prompt and before the capture's own round trip:

- a model content with one ``functionCall`` (``run_shell_command``, id ``run_shell_command_<ms>_0`` as Gemini CLI
  names them) carrying a ``thoughtSignature``: an opaque base64 string of 1.1–2.9 KB, seeded random bytes behind
  ``Ci`` (a protobuf's first bytes, as Gemini's signatures start), new for every call;
- the next user content with that call's ``functionResponse`` (same id and name, ``{"output": …}``);
- every 25th round trip, the model's text answer and the user's next prompt (a new turn).

Valid as it is — every model content's first call signed, each call answered once in the next user content in
call order, no empty part, roles alternating — so llmfix's Gemini repairs leave it alone (``check()`` runs it
through ``engine.process`` and says so). Sent to ``/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent
?alt=sse``, the path Gemini CLI posts to, whose model (Gemini 3) turns restore-thought-signatures on.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import bodies
import orjson

HOST = "generativelanguage.googleapis.com"
MODEL = "gemini-3.1-pro-preview"
PATH = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
TURN_EVERY = 25  # round trips between two user prompts in the padded history


@cache
def _capture() -> dict:
    return bodies._fixture("gemini-cli/turn2_request.json")


def signature(rng: random.Random) -> str:
    """An opaque thought signature of 1.1–2.9 KB (what a Gemini 3 model's look like: base64 of a protobuf)."""
    return base64.b64encode(b"\x0a" + rng.randbytes(rng.randrange(800, 2200))).decode()


def round_trip(s: int, k: int) -> list[dict]:
    """Session ``s``'s ``k``-th tool round trip as Gemini CLI replays it: a signed call, then its response."""
    rng = random.Random(s * 1_000_003 + k)
    cid = f"run_shell_command_{1796188000000 + 1000 * s + k}_0"
    args = {"command": f"rg -n handler_{s}_{k} src", "description": "Find the handler"}
    return [
        {"role": "model", "parts": [{"functionCall": {"id": cid, "name": "run_shell_command", "args": args},
                                     "thoughtSignature": signature(rng)}]},
        {"role": "user", "parts": [{"functionResponse": {"id": cid, "name": "run_shell_command",
                                                         "response": {"output": bodies._tool_output(k)}}}]},
    ]


def _prompt_break(s: int, k: int) -> list[dict]:
    """The model's answer ending a turn and the user's next prompt."""
    return [{"role": "model", "parts": [{"text": f"Found handler_{s}_{k} in src/handler.rs."}]},
            {"role": "user", "parts": [{"text": f"Now look for the callers of handler_{s}_{k}."}]}]


def history(s: int, size: int) -> list[dict]:
    """Session ``s``'s padding: round trips (and a new prompt every :data:`TURN_EVERY`) making the capture ``size``
    bytes long."""
    left = size - len(orjson.dumps(_capture()))
    out: list[dict] = []
    k = 0
    while left > 0:
        if k and k % TURN_EVERY == 0:
            brk = _prompt_break(s, k)
            out += brk
            left -= sum(len(orjson.dumps(c)) + 1 for c in brk)
        trip = round_trip(s, k)
        out += trip
        left -= sum(len(orjson.dumps(c)) + 1 for c in trip)
        k += 1
    return out


def body(s: int, size: int, new: list[dict]) -> bytes:
    """Session ``s`` at ``size`` bytes (prompt, padding, the capture's round trip) plus the ``new`` contents."""
    cap = _capture()
    contents = [cap["contents"][0], *_history(s, size), *cap["contents"][1:], *new]
    return orjson.dumps({**cap, "contents": contents})


@cache
def _history(s: int, size: int) -> tuple[dict, ...]:
    return tuple(history(s, size))


class Appending:
    """One long Gemini CLI session of ``size`` bytes, each request the one before plus one round trip (as the
    sweep's ``bodies.Session``): the warm-ups (``i < 0``) are its earlier turns; after ``growth`` of the size a new
    session starts, whose first request (:meth:`starts`) is llmfix's first sight of it, set apart."""

    EARLIER = 8

    def __init__(self, size: int, growth: float = 0.1, first: int = 0) -> None:
        self.size, self.first = size, first
        per_turn = sum(len(orjson.dumps(c)) + 1 for c in round_trip(0, 0))
        self.length = max(2 * self.EARLIER, int(size * growth / per_turn))

    def _at(self, i: int) -> tuple[int, int]:
        return divmod(i + self.EARLIER, self.length)

    def starts(self, i: int) -> bool:
        return i >= 0 and self._at(i)[1] == 0

    def __call__(self, i: int) -> bytes:
        s, k = self._at(i)
        s += self.first
        return body(s, self.size, [c for j in range(k + 1) for c in round_trip(s, 100_000 + j)])


def first_sight(size: int, first: int = 0) -> Callable[[int], bytes]:
    """Request ``i``: the first request of its own session (new ids, outputs and signatures in all its history)."""

    def request(i: int) -> bytes:
        s = first + (i + 3 if i >= 0 else -i - 1)  # warm-ups: sessions 0..2
        _history.cache_clear()  # one body per session: holding them all would only grow the bench
        return body(s, size, round_trip(s, 100_000))

    return request


def check(requests: list[bytes], tmp: Path, factory: Any = None) -> set[str]:
    """What ``engine.process`` makes of these requests, in order, as the proxy would run them on :data:`PATH`
    (a Gemini 3 model): the set of outcome statuses (``{"untouched"}`` when the bodies need no repair)."""
    from llmfix import engine
    from llmfix.dialects.registry import named

    if factory is None:
        from run import _engine as factory
    process, _make = factory(tmp)
    got = set()
    for raw in requests:
        out = process(engine.request(named("gemini"), HOST, 443, PATH.split("?")[0], raw, None, uuid.uuid4().hex))
        got.add(out.status)
        if out.status != "untouched":
            print(json.dumps({"status": out.status, "reason": out.reason,
                              "changes": [str(c) for c in out.changes]})[:2000])
    return got
