"""What a dialect is: small protocols, one per concern, the neutral types they speak in, and :class:`Dialect`.

A dialect is a folder of modules, each satisfying one protocol below with plain functions and constants
(a module is a protocol implementation, PEP 544): ``shape`` (where the conversation lives, how a location is
named), ``tools`` (its tool calls and results, and how they pair), ``media`` (its parts as neutral pieces and
back, the containers a tool result's parts live in), ``learn`` (what it learns from answers), ``answers`` (how
its requests and answers read in the conversation view) and ``rejections`` (the texts its upstreams refuse with).
Neutral code is handed a :class:`Dialect` and asks it; it never asks which one it is.

What dialects share is said by capability, not by name: :class:`Pairing` says where results must be, so the
pairing repairs are written once per capability (Gemini's function responses pair the way Anthropic's
tool_result blocks do: all results of a turn in the next user turn) and not once per dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

type Key = tuple[int, int | None]
"""Where a call or an answer is: (item index, its place inside the item, or None for the whole item)."""


class Pairing(Enum):
    """Where the upstream wants a tool call's result (the pairing repairs read this, never a dialect's name)."""

    RUN_AFTER = "in a message of its own, in the run right after the message that called"  # Chat
    LATER_BY_ID = "in any later item naming the call's id"  # Responses
    NEXT_TURN = "in the next user turn, with every result of that turn, before anything else in it"  # Anthropic


# --- the neutral view of tool calls and results ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """A declared tool call: its id, its name, and where it is (``sub``: its place inside the item)."""

    call_id: str
    name: str
    index: int
    sub: int | None
    kind: str = "function"  # "function" | "custom"

    @property
    def key(self) -> Key:
        return (self.index, self.sub)


@dataclass(frozen=True, slots=True)
class Answer:
    """A tool result: the call id it names ("" when it names none) and where it is."""

    call_id: str
    index: int
    sub: int | None

    @property
    def key(self) -> Key:
        return (self.index, self.sub)


@dataclass(frozen=True, slots=True)
class Group:
    """Calls that must be answered together, and the answers placed where they count for them."""

    anchor: int  # index of the declaring item (assistant message; Responses: the call item)
    calls: tuple[Call, ...]
    answers: tuple[Answer, ...]
    end: int  # index after which a missing answer goes (Chat: last tool message of the run; Responses: run end)


@dataclass(frozen=True, slots=True)
class Piece:
    """One part of a tool result, as every dialect can carry it: text, or media with a URL (data or http)."""

    kind: str  # "text" | "image" | "file" | other media kinds
    text: str | None = None
    url: str | None = None
    detail: str | None = None
    dialect: Dialect | None = None
    raw: Any = None  # the part as its dialect wrote it (reused verbatim when the dialect matches)

    @property
    def is_media(self) -> bool:
        return self.kind != "text"


@dataclass(frozen=True, slots=True)
class Result:
    """A tool result named by its call id, with its pieces in order."""

    call_id: str
    index: int  # position of the tool result's item / message in the conversation
    pieces: tuple[Piece, ...]
    later: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    """The media parts outside tool results at or after this result in the same request (user messages…):
    restore-tool-media compares what a client had there with what a gateway has there."""
    dialect: Dialect | None = field(default=None, compare=False, repr=False)
    """The dialect the ``later`` parts are written in."""

    @property
    def text(self) -> str:
        return "\n".join(p.text or "" for p in self.pieces if p.kind == "text")

    @property
    def media(self) -> tuple[Piece, ...]:
        return tuple(p for p in self.pieces if p.is_media)


# --- the protocols, one per concern ----------------------------------------------------------------------------


def never(_: Any) -> bool:
    """A capability a dialect does not have (:attr:`Shape.server_state`, :attr:`Shape.websocket`)."""
    return False


@dataclass(eq=False, slots=True)
class Shape:
    """Where a request's conversation lives, how its items are typed, how a place in it is named."""

    key: str
    """The top-level member holding the conversation (``messages``, ``input``…)."""
    suffixes: tuple[str, ...]
    """Path endings (lower case, any prefix) of the requests this dialect routes."""
    system: str
    """The top-level member holding the system prompt, as the conversation view shows it."""
    items: Any
    """The pydantic ``TypeAdapter`` of a list of its items (fail-fast)."""
    tags: frozenset[str] = frozenset()
    """Union branch names pydantic puts in the error locations of its models (not JSON path)."""
    text_holds_nothing: bool = False
    """A plain string where the conversation goes is a conversation with nothing to repair (Responses)."""
    server_state: Callable[[dict[str, Any]], bool] = never
    """Whether the upstream holds earlier turns the request only points at (Responses ``previous_response_id``),
    so a call or result missing from it may live there."""
    websocket: Callable[[str], bool] = never
    """Whether a WebSocket upgrade to a path carries this dialect's requests as messages."""
    path_model: Callable[[str], str | None] = lambda _path: None
    """The model a request's path names, where the body names none (Gemini: ``…/models/{model}:generateContent``)."""
    counts_only: Callable[[str], bool] = never
    """Whether a request's path asks only for a token count (Gemini's ``countTokens``): nothing is generated from
    it, so the repairs that make a history one the model may answer leave it alone."""
    envelope: str | None = None
    """A member some doors wrap the whole request in (Code Assist: ``{"request": {…}}``), where the conversation
    then lives."""

    def holder(self, body: dict[str, Any]) -> dict[str, Any]:
        """The object holding the conversation: ``body``, or the request it wraps (:attr:`envelope`)."""
        if self.envelope is not None and self.key not in body and isinstance(inner := body.get(self.envelope), dict):
            return inner
        return body

    def conversation(self, body: dict[str, Any]) -> list[Any] | None:
        """The raw conversation of ``body``; None when it holds nothing to repair. Raises ValueError, saying why,
        when ``body`` does not have the dialect's shape."""
        raw = self.holder(body)[self.key]
        if self.text_holds_nothing and isinstance(raw, str):
            return None
        if not isinstance(raw, list):
            raise ValueError(f"'{self.key}' is a JSON {type(raw).__name__}, not an array")
        return raw

    def typed(self, raw: list[Any]) -> list[Any]:
        """``raw`` validated as this dialect's items (raises pydantic's ValidationError on the first bad one)."""
        return self.items.validate_python(raw)


class Tools(Protocol):
    """A dialect's tool calls and their results, for the neutral pairing view and the pairing repairs."""

    PAIRING: Pairing
    DECLARES: tuple[bytes, ...]
    """Bytes a body holds when it declares tool calls worth remembering."""
    ANSWERS: tuple[bytes, ...]
    """Bytes a body holds when it carries tool results."""
    PAIRS: tuple[bytes, ...]
    """Bytes a body holds when it may need pairing."""
    FRESH_PREFIX: str
    """How a made-up call id starts (``call_``, ``toolu_``)."""

    def calls(self, items: list[Any]) -> list[Call]: ...
    def answers(self, items: list[Any]) -> list[Answer]: ...
    def is_call_item(self, item: Any) -> bool:
        """Whether ``item`` is a call on its own (Responses); False where calls sit inside messages."""
        ...
    def is_answer_item(self, item: Any) -> bool:
        """Whether ``item`` is a result on its own (a Chat tool message, a Responses output)."""
        ...
    def location(self, index: int, sub: int | None) -> str:
        """Where a call or an answer is, e.g. ``messages[2].tool_calls[1]``."""
        ...
    def rename(self, items: list[Any], call_ids: Mapping[Key, str], answer_ids: Mapping[Key, str]) -> list[Any]:
        """``items`` with the calls and answers at these keys carrying new ids; all else the same objects."""
        ...
    def missing_result(self, call: Call, text: str) -> Any:
        """A result for ``call`` saying ``text`` (an error result where the dialect has the notion)."""
        ...
    def result_as_user(self, result: Any, label: str) -> Any:
        """A result item nobody declared (where results are items of their own) as a user message that keeps
        all its content after ``label``."""
        ...
    def refers_upstream(self, items: list[Any]) -> bool:
        """Whether ``items`` point at items the upstream holds (Responses ``item_reference``): a result there may
        answer a call held upstream."""
        ...
    def declaration(self, remembered: Any, output_type: str | None = None) -> Any:
        """A remembered call (a :class:`llmfix.memory.store.ToolCall`) as this dialect declares one."""
        ...
    SCHEMA_ESCAPE: str | None
    """Where a tool declaration's full JSON Schema may go when its upstream refuses it in the usual place (Gemini:
    ``parametersJsonSchema``); None where there is no such place (the schema is fitted instead)."""

    def schemas(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
        """(location, declaration, the key holding its parameter schema) of each tool the request declares."""
        ...
    def settled(self, items: list[Any], start: int, declared: Any, answered: Any
                ) -> tuple[set[str], set[str]] | None:
        """One cheap pass over ``items[start:]``: the ids it declares and answers when it is certain that
        nothing needs pairing in the whole list, given the ids ``items[:start]`` declared and answered; None
        means "look closer" (see :mod:`llmfix.wire.paired`)."""
        ...


class Turns(Protocol):
    """The turns of a dialect whose results go in the next user turn (:attr:`Pairing.NEXT_TURN`): what the
    pairing repairs need to move results, add missing ones and give back declarations, written once."""

    CALL: str
    """What a call is called in change records (``tool_use``)."""
    RESULT: str
    """What a result is called (``tool_result``)."""
    MISSING: str
    """What the result added for a call with none is (``an is_error result``)."""

    def role(self, item: Any) -> str | None:
        """``"user"``, ``"assistant"`` (a model turn), another role, or None for an item that is no turn."""
        ...
    def blocks(self, item: Any) -> list[Any]:
        """The turn's content as a list of blocks (a string content as one text block)."""
        ...
    def with_blocks(self, item: Any, blocks: list[Any]) -> Any: ...
    def user_turn(self, blocks: list[Any]) -> Any: ...
    def text_block(self, text: str) -> Any: ...
    def is_result(self, block: Any) -> bool: ...
    def attached(self, blocks: list[Any], k: int) -> int:
        """How many blocks right after the result at ``k`` came with it and move with it (Gemini CLI's images after
        a function response); 0 where a result holds its own."""
        ...
    def result_as_blocks(self, block: Any, label: str) -> list[Any]:
        """A result nobody declared as plain blocks of a user turn that keep all its content."""
        ...


@dataclass(frozen=True, eq=False, slots=True)
class Media:
    """A dialect's parts as neutral :class:`Piece` and back (where a tool result's media are carried across
    dialects, and kept in a memory shared by instances), and what its upstreams take in tool results. What each
    part and container is, the media repairs ask the objects themselves (:mod:`llmfix.wire.base`)."""

    images: tuple[bytes, ...]
    """Bytes a body holds when it carries an image part."""
    needles: tuple[bytes, ...]
    """Bytes a body holds when it carries any media part."""
    tool_media_flag: str
    """The profile flag that says whether its tool results may carry media."""
    part: Any
    """The pydantic ``TypeAdapter`` of one part: a part read back from its JSON (what :attr:`piece` kept), for a
    memory shared between instances."""
    piece: Callable[[Any], Piece]
    """A part as a neutral piece (a media piece keeps the part itself as ``raw``)."""
    image: Callable[[str, str | None], Any]
    """An image part of this dialect from a URL (a data URL or http) and a ``detail`` (None: none given)."""
    text_part: Callable[[str], Any]
    user_message: Callable[[Any], Any]
    """A user message (turn) holding a content: a string or a list of parts."""
    result_text_only: bool = False
    """Whether a tool result whose media must go keeps only its text, as one string (Responses: xAI takes no array
    output at all), rather than its other parts (Chat)."""
    tool_text_flag: str | None = None
    """The profile flag that says whether a tool result's text may be an array of text parts (Chat: DeepSeek wants
    a string); None where there is no such choice."""


class Learn(Protocol):
    """What a dialect learns from the traffic: tool calls and reasoning, from requests and answers."""

    Assembler: Callable[..., Any]
    """Assembles one streamed answer's events (:class:`llmfix.memory.learn_base.Assembler`)."""
    ANSWER_NEEDLES: tuple[bytes, ...]
    """Bytes a JSON answer holds when there is something in it to learn (a call, reasoning)."""
    ARRAYS: bool
    """Whether a JSON answer may be an array of answers' parts (Gemini without ``alt=sse``)."""

    def calls_in_request(self, body: dict[str, Any], known: Callable[[Any], bool]) -> list[Any]: ...
    def calls_in_response(self, obj: dict[str, Any]) -> list[Any]: ...
    def reasoning_in_response(self, obj: dict[str, Any], asked: Any) -> list[Any]: ...


class Signatures(Protocol):
    """Where a dialect's requests carry the thought signature a model issued with a tool call, on the call itself
    (Chat, at Gemini's OpenAI-compatible door: ``extra_content.google.thought_signature``), for the repair that gives
    lost ones back (restore-tool-call-signatures). What its answers teach is its :class:`Learn`'s."""

    FLAG: str
    """The profile flag that says an upstream wants them back."""
    NEEDLES: tuple[bytes, ...]
    """Bytes a body holds when it has tool calls that may need one."""
    PRESENT: tuple[bytes, ...]
    """Bytes a body holds when a call in it carries one (an upstream that does not want them back may still have
    refused one)."""
    KIND: str
    """The :class:`~llmfix.memory.store.Reasoning` kind of a signature issued with a call."""
    REFUSED: str
    """The kind of the signatures an upstream refused (and of its marker)."""

    def key(self, upstream: str, call: Any) -> str | None:
        """The key a call's signature is remembered under (None: the call has no id or name)."""
        ...
    def refused_key(self, upstream: str, signature: str) -> str: ...
    def marker(self, upstream: str) -> str:
        """The key of ``upstream``'s marker in :attr:`REFUSED`, new with every refusal it taught."""
        ...
    def turn(self, items: list[Any], start: int) -> tuple[bool, list[int]]:
        """Whether the current turn begins in ``items[start:]``, and the indexes of the messages with calls of
        ``items[start:]`` that are in it."""
        ...
    def calls(self, item: Any) -> list[Any]:
        """The tool calls of an item, in order ([] for an item that makes none)."""
        ...
    def with_calls(self, item: Any, calls: list[Any]) -> Any: ...
    def signature(self, call: Any) -> str | None:
        """The signature a call carries (None: none)."""
        ...
    def with_signature(self, call: Any, signature: str | None) -> Any:
        """A copy of ``call`` carrying ``signature`` where its upstream reads it (None: carrying none); ``call``
        itself when it cannot without overwriting something of the client's."""
        ...
    def location(self, index: int, position: int) -> str:
        """Where call ``position`` of item ``index`` keeps its signature."""
        ...


class Answers(Protocol):
    """How a dialect's conversations and answers read in the conversation view."""

    def lines(self, items: list[Any]) -> list[str]:
        """The items as readable, redacted lines."""
        ...
    def assemble(self, events: list[tuple[str, Any]]) -> dict[str, Any]:
        """A streamed answer's events as the JSON answer the same call would have returned."""
        ...
    def answer_lines(self, obj: dict[str, Any]) -> list[str]:
        """The model's side of an (assembled) answer as readable lines."""
        ...


@dataclass(frozen=True, eq=False, slots=True)
class Dialect:
    """One API dialect: its name (as memory records, profiles-file sections and logs spell it) and its concerns.
    Compared by identity: there is one of each (:mod:`llmfix.dialects.registry`)."""

    name: str
    shape: Shape
    tools: Tools
    media: Media
    learn: Learn
    answers: Answers
    rejections: tuple[Any, ...] = ()
    """Its known rejections (:class:`llmfix.retry.rules.Rule`)."""
    turns: Turns | None = None
    """Its turns, where results go in the next user turn (:attr:`Pairing.NEXT_TURN`)."""
    signatures: Signatures | None = None
    """Where its requests carry thought signatures on tool calls (None: nowhere a neutral repair gives them back)."""

    def __post_init__(self) -> None:
        if (self.turns is None) == (self.tools.PAIRING is Pairing.NEXT_TURN):
            raise ValueError(f"dialect {self.name}: its turns must be given exactly when it pairs "
                             f"{Pairing.NEXT_TURN.value}")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"

    def at(self, index: int) -> str:
        """The location of item ``index``, e.g. ``messages[3]``."""
        return f"{self.shape.key}[{index}]"
