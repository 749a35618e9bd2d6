"""The team-proxy workloads: many interleaved sessions, edited tails and first sights (beside the sweep's one session).

One llmfix in front of a team (or one instance of a fleet) does not see one appending session: it sees
dozens of sessions at once, clients that replace their last turn (a retry, a regenerated answer, Claude
Code's moving ``cache_control``), and sessions it has never seen (after a restart, a compaction, a load
balancer's move). Each workload here is a function ``request(i)`` of the request's index, so a bench can
send the same bytes to every proxy in turn; ``warmups`` are requests sent first (not measured) and
``apart(i)`` marks measured-cell requests that are sent but not counted.

Sessions differ from one another the way a team's sessions do: the same client's head (instructions,
tools) and each session's own history (its call ids and tool outputs), built from the sweep's histories
(``bodies.HISTORIES``) with every session-specific string renamed.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import bodies
import gemini
import orjson

KEY = {"responses": "input", "chat": "messages", "messages": "messages"}
PATH = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages",
        "gemini": gemini.PATH}


def _split(base: bytes, key: str) -> tuple[bytes, bytes, list[dict]]:
    """(the bytes before the message array's ``]``, the rest, the parsed items) of a compact body."""
    body = orjson.loads(base)
    if orjson.dumps(body) != base:
        raise ValueError("the base is not compact JSON")
    keys = list(body)
    after = keys[keys.index(key) + 1:]
    tail = b"]" + (b"," + orjson.dumps({k: body[k] for k in after})[1:] if after else b"}")
    assert base.endswith(tail), "array end not found"
    return base[: len(base) - len(tail)], tail, body[key]


@dataclass
class History:
    """One session's history, spliced as bytes: ``head`` (up to the end of its last item but one), its last
    item (kept apart for Claude Code's marker) and ``tail``."""

    dialect: str
    head: bytes  # the body up to (not including) the last item's leading comma
    last: dict  # the history's last item
    tail: bytes  # from the array's ] to the end
    turn: Callable[[int], list[dict]]

    def body(self, new: list[dict]) -> bytes:
        """The history + ``new`` items, written as the client writes it (Claude Code: the one breakpoint on the
        last message)."""
        items = [self.last, *new]
        if self.dialect == "messages":
            items[-1] = bodies._marked(items[-1])
        return self.head + b"," + b",".join(orjson.dumps(x) for x in items) + self.tail


@dataclass
class Histories:
    """``count`` different histories of about ``size`` bytes in ``dialect``, built on demand from one."""

    dialect: str
    size: int
    first: int = 0  # the first session's number: workloads that share a proxy never share a session
    _base: tuple[bytes, bytes, list[dict]] | None = None
    _made: dict[int, History] = field(default_factory=dict)

    def __call__(self, s: int) -> History:
        got = self._made.get(s)
        if got is None:
            got = self._made[s] = self._build(s)
        return got

    def _build(self, s: int) -> History:
        key = KEY[self.dialect]
        if self._base is None:
            _d, _host, build = bodies.HISTORIES[self.dialect]
            base = build(self.size)
            if self.dialect == "messages":
                obj = orjson.loads(base)
                obj[key] = [bodies._unmarked(m) for m in obj[key]]
                base = orjson.dumps(obj)
            self._base = _split(base, key)
        head, tail, items = self._base
        s += self.first
        tag = f"s{s:06d}".encode()
        # every session-specific string of the padding renamed: call ids, item ids, tool outputs
        own = head.replace(b"_hist_", b"_" + tag + b"_").replace(b"handler_", tag + b"handler_")
        last_bytes = orjson.dumps(items[-1])
        assert own.endswith(b"," + last_bytes) or own.endswith(b"[" + last_bytes), "last item not at the end"
        own = own[: len(own) - len(last_bytes) - 1]
        turn = bodies.NEXT_TURN[self.dialect]
        return History(self.dialect, own, items[-1], tail, lambda k, s=s: turn(10_000_000 * (s + 1) + k))


@dataclass
class Workload:
    """Requests by index: ``request(i)`` for ``i`` ≥ 0 (measured), ``request(-1 - j)`` for the warm-ups."""

    key: str
    title: str
    dialect: str
    host: str
    request: Callable[[int], bytes]
    warmups: int
    n: int
    sessions: int = 1
    first_sight: bool = False  # every measured request is one llmfix has never seen
    apart: Callable[[int], bool] | None = None  # measured-cell requests sent but not counted (a new session's first)


def many(dialect: str, sessions: int, size: int = bodies.MB, rounds: int = 1) -> Workload:
    """``sessions`` interleaved sessions of ``size`` bytes: request i is session ``i % sessions``'s next turn
    (one tool round trip more than its request before). The warm-ups are each session's first request."""
    hist = Histories(dialect, size, first=1000 * sessions)

    def request(i: int) -> bytes:
        if i < 0:
            s, k = -1 - i, 0
        else:
            s, k = i % sessions, 1 + i // sessions
        h = hist(s)
        return h.body([x for j in range(k) for x in h.turn(j)])

    name = {"chat": "Chat", "responses": "Responses", "messages": "Messages"}[dialect]
    return Workload(f"team_{dialect}_{sessions}", f"{sessions} interleaved {name} sessions of "
                    f"{size // bodies.MB} MB", dialect, _host(dialect), request, sessions, sessions * rounds,
                    sessions)


def edited(dialect: str, size: int = bodies.MB, n: int = 60) -> Workload:
    """One session whose last turn is replaced on every request (a retried turn, a regenerated answer):
    request i is the history + turn ``i``, where request i − 1 had turn ``i − 1`` in its place. Messages:
    the breakpoint sits on the last message, as Claude Code puts it."""
    hist = Histories(dialect, size, first=900_000)

    def request(i: int) -> bytes:
        h = hist(0)
        return h.body(h.turn(1000 + i))

    name = {"chat": "Chat", "responses": "Responses", "messages": "Messages"}[dialect]
    return Workload(f"edit_{dialect}_1m", f"{name} 1 MB, last turn replaced on every request", dialect,
                    _host(dialect), request, 5, n)


def regenerated_turn(k: int) -> list[dict]:
    """A Codex answer's last turn as Codex replays it (item shapes of ``tests/fixtures/codex/turn2_request.json``,
    the reasoning item as ``tests/upstreams/reasoned.py`` gives it): a reasoning item (``rs_…`` id, a summary,
    ``encrypted_content``), the ``function_call`` it produced directly after it (``fc_…`` id, ``call_…`` call id)
    and that call's ``function_call_output`` (its own ``fco_…`` id). Every id, the summary and the encrypted
    content are new for each ``k`` (the model answered again); the command and its output are the same (the
    same call ran again). Paired and in order: a body that ends so needs no repair."""
    rng = random.Random(k)
    rs = "rs_" + rng.randbytes(24).hex()
    fc = "fc_" + rng.randbytes(24).hex()
    call = "call_" + rng.randbytes(12).hex()
    h = rng.randbytes(16).hex()
    fco = f"fco_{h[:8]}-{h[8:12]}-7{h[13:16]}-{h[16:20]}-{h[20:]}"  # a UUIDv7, as Codex names its outputs
    sealed = "gAAAAAB" + base64.urlsafe_b64encode(rng.randbytes(1800)).decode()  # ~2.4 KB, as gpt-5 seals one
    return [
        {"type": "reasoning", "id": rs, "summary": [{"type": "summary_text", "text": f"**Finding the handler "
                                                     f"({k})**\n\nI'll search the sources for the request handler."}],
         "encrypted_content": sealed},
        {"type": "function_call", "status": "completed", "id": fc, "name": "shell",
         "arguments": json.dumps({"command": ["rg", "-n", "fn handler", "src"], "workdir": "/home/dev/project"}),
         "call_id": call},
        {"type": "function_call_output", "id": fco, "call_id": call, "output": bodies._tool_output(7)},
    ]


def regenerated(size: int = bodies.MB, n: int = 60) -> Workload:
    """One Codex session of ``size`` bytes whose last turn is regenerated on every request: request i is the
    history (byte-identical every time) + :func:`regenerated_turn` ``(i)`` — a reasoning item, its
    ``function_call`` and the call's output, all with new ids and a new encrypted content. Unlike
    ``edit_responses_1m`` (a call and its output, no reasoning item, no output id, other output text each
    time), it carries what a reasoning model's regenerated answer carries."""
    hist = Histories("responses", size, first=700_000)

    def request(i: int) -> bytes:
        return hist(0).body(regenerated_turn(i if i >= 0 else 1_000_000 - i))

    return Workload("regen_responses_1m", "Codex Responses 1 MB, last turn (reasoning, call, output) regenerated "
                    "on every request", "responses", _host("responses"), request, 5, n)


def first_sight(dialect: str, size: int = bodies.MB, n: int = 40) -> Workload:
    """Sessions llmfix has never seen: every request the first of its own session (as after a restart, or on
    another instance of a fleet)."""
    hist = Histories(dialect, size, first=800_000)

    def request(i: int) -> bytes:
        h = hist(i + 3 if i >= 0 else -i - 1)  # warm-ups: sessions 0..2
        return h.body(h.turn(0))

    name = {"chat": "Chat", "responses": "Responses", "messages": "Messages"}[dialect]
    w = Workload(f"first_{dialect}_1m", f"{name} 1 MB, first sight (a session not seen before)", dialect,
                 _host(dialect), request, 3, n, first_sight=True)
    return w


def gemini_appending(size: int = bodies.MB) -> Workload:
    """One Gemini CLI session (``bench/gemini.py``), each request the one before plus one tool round trip (a
    signed ``functionCall``, its ``functionResponse``), as the sweep's appending cells: the warm-ups are its
    earlier turns, a new session starts every ~10 % of growth and its first request is set apart."""
    session = gemini.Appending(size, first=600_000)
    return Workload("hist_gemini_1m", "Gemini CLI session of 1 MB, appending", "gemini", gemini.HOST, session,
                    gemini.Appending.EARLIER, 60, apart=session.starts)


def gemini_first(size: int = bodies.MB, n: int = 40) -> Workload:
    """Gemini CLI sessions llmfix has never seen: every request the first of its own session."""
    return Workload("first_gemini_1m", "Gemini CLI 1 MB, first sight (a session not seen before)", "gemini",
                    gemini.HOST, gemini.first_sight(size, first=500_000), 3, n, first_sight=True)


def _host(dialect: str) -> str:
    return "api.anthropic.com" if dialect == "messages" else "api.openai.com"


TEAM: dict[str, Callable[[], Workload]] = {
    "team_chat_64": lambda: many("chat", 64),
    "team_chat_256": lambda: many("chat", 256),
    "team_responses_64": lambda: many("responses", 64),
    "team_responses_256": lambda: many("responses", 256),
    "edit_responses_1m": lambda: edited("responses"),
    "edit_chat_1m": lambda: edited("chat"),
    "edit_messages_1m": lambda: edited("messages"),
    "regen_responses_1m": lambda: regenerated(),
    "first_responses_1m": lambda: first_sight("responses"),
    "first_chat_1m": lambda: first_sight("chat"),
    "first_messages_1m": lambda: first_sight("messages"),
    "hist_gemini_1m": lambda: gemini_appending(),
    "first_gemini_1m": lambda: gemini_first(),
}
"""The workloads by cell key (built on demand: the 256-session ones hold 256 histories)."""


def appending(dialect: str, size: int, n: int = 60) -> Workload:
    """The sweep's appending session (``bodies.session``) in-process: request i extends request i − 1 by one
    tool round trip (Messages: the breakpoint moved to the new last message), all measured requests in one
    session (no first sight among them); the warm-ups are that session's earlier turns, its first one llmfix's
    first sight."""
    session = bodies.Session(dialect, bodies.HISTORIES[dialect][2](size), growth=1e9)
    name = {"chat": "Chat", "responses": "Responses", "messages": "Messages"}[dialect]
    label = f"{size // 1024} KB" if size < bodies.MB else f"{size // bodies.MB} MB"

    def request(i: int) -> bytes:  # warm-ups are sent as request(-1), request(-2), …: the session's turns in order
        return session(i if i >= 0 else -session.EARLIER - 1 - i)

    return Workload(f"hist_{dialect}_{label.split()[0].lower()}", f"{name} {label}, appending session", dialect,
                    _host(dialect), request, session.EARLIER, n)


APPENDING: dict[str, Callable[[], Workload]] = {
    "hist_messages_1m": lambda: appending("messages", bodies.MB),
    "hist_responses_1m": lambda: appending("responses", bodies.MB),
    "hist_responses_200k": lambda: appending("responses", 200 * 1024, 200),
    "hist_chat_1m": lambda: appending("chat", bodies.MB),
}
"""The sweep's appending sessions, for in-process benches only (``bench/engine_cost.py``): not team cells."""
