"""The base of every wire model: unknown fields kept; untouched objects sent back verbatim; the roles a
dialect's objects play for the neutral views.

Models are plain, frozen pydantic models with ``extra="allow"`` — no per-object hooks, so validating a
long conversation stays cheap (a wrap validator per object cost six times the parse itself). Which
objects a repair left untouched is decided only when a repaired request is serialized
(:func:`dump_items`): the original typed tree and the original JSON are walked side by side, and every
object that still appears in the repaired tree is emitted as the very dict it was parsed from. So parts
of a repaired request that no repair touched keep their keys, key order and values; an object a repair
built or changed is emitted from its set fields and unknown fields.

Roles. The media repairs are written once for every dialect: they ask an object what it is, not which class
it has. An object holding a list of parts says where (:attr:`Wire.PARTS`: a message's ``content``, a tool
output's ``output``) and gives it (:meth:`Wire.held`, :meth:`Wire.holding`); a tool result says so
(:meth:`Wire.result_id`); a text part is a :class:`Textual`, a media part a :class:`Media`, an image that may be
inline an :class:`Image`. A dialect's models take these roles (``dialects/*/wire.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Tag

if TYPE_CHECKING:
    from llmfix.body.media import MediaRef


class Wire(BaseModel):
    """A JSON object of an LLM API: typed where repairs look, everything else kept as it came."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    PARTS: ClassVar[str | None] = None
    """Where this object holds its list of parts (its content), if it has one: the field :meth:`parts` reads, and
    how change records name that place."""
    RESULT_ID: ClassVar[str | None] = None
    """The field naming the call a tool result answers (None: this object is no tool result)."""
    NOUN: ClassVar[str | None] = None
    """How a change record names this object, formatted with it (``"tool_result {0.tool_use_id}"``; None: its
    ``type``)."""

    def to_wire(self) -> Any:
        """The JSON-ready value of this object, from its set fields and unknown fields."""
        return _dump(self, None)

    def held(self) -> Any:
        """Its content (a list of parts, a string, None); None when it holds no parts."""
        return getattr(self, self.PARTS) if self.PARTS is not None else None

    def holding(self, parts: Any) -> Any:
        """A copy holding ``parts`` as its content."""
        assert self.PARTS is not None
        return evolve(self, **{self.PARTS: parts})

    def is_result(self) -> bool:
        """Whether this object is a tool result (its :attr:`PARTS` field holds what the tool returned)."""
        return self.RESULT_ID is not None

    def result_id(self) -> str | None:
        """The call id a tool result names (None: none, or not a result)."""
        return getattr(self, self.RESULT_ID) if self.RESULT_ID is not None else None

    def noun(self) -> str:
        """How a change record names this object: ``user message``, ``tool_result toolu_1``…"""
        if self.NOUN is not None:
            return self.NOUN.format(self)
        return str(getattr(self, "type", None) or type(self).__name__)


class Textual(Wire):
    """A text part. Each declares its own ``text: str`` field after its ``type`` (a field declared here would
    come first, and a part llmfix builds would be sent with its keys in another order)."""

    if TYPE_CHECKING:
        text: str


class Media(Wire):
    """A media part (image, file, audio): named in logs by :meth:`media`, never by its payload."""

    KIND: ClassVar[str] = "file"
    """Its kind, where its class says it (see :meth:`kind`)."""

    def media(self) -> MediaRef:
        raise NotImplementedError

    def kind(self) -> str:
        """``image``, ``file``, ``audio`` (or ``text``, for a document whose source is text), from the part's
        own fields: describing it would hash its payload."""
        return self.KIND


@dataclass(frozen=True, slots=True)
class Inline:
    """An image's inline payload: ``text[start:]`` (a data URL's base64 after its comma, or the base64 itself)."""

    text: str
    start: int
    declared: str | None  # the media type the client declared
    is_base64: bool = True


class Image(Media):
    """An image part, inline (a data URL, a base64 source) or by reference (a URL, a file id)."""

    KIND = "image"

    def inline(self) -> Inline | None:
        """Its inline payload; None when it is sent by URL or file id (nothing to fit)."""
        raise NotImplementedError

    def by_file_id(self) -> bool:
        """Whether it names an uploaded file only (a Responses ``input_image`` with a ``file_id`` and no URL)."""
        return False

    def refitted(self, mime: str, data: str, is_base64: bool) -> Image:
        """A copy carrying ``data`` (base64 when ``is_base64``) of type ``mime`` instead of its payload."""
        raise NotImplementedError


def data_url(url: str | None) -> Inline | None:
    """The inline payload of a ``data:`` URL (None for any other URL)."""
    if not url or not url.startswith("data:"):
        return None
    comma = url.find(",", 0, 1024)
    meta = url[5:comma] if comma >= 0 else url[5:1024]
    params = meta.split(";")
    is_base64 = any(p.strip().lower() == "base64" for p in params[1:])
    return Inline(url, comma + 1 if comma >= 0 else len(url), params[0] or None, is_base64)


def type_of(value: Any) -> Any:
    """The ``type`` of a JSON object as it comes (a dict) or as a model."""
    return value.get("type") if isinstance(value, dict) else getattr(value, "type", None)


def union(branches: Mapping[str, type], tag: Callable[[Any], str] | None = None) -> Any:
    """Pydantic's tagged union of ``branches`` (tag → model): a value goes to the branch its ``tag`` names; by
    default the branch its ``type`` names when there is one, else ``"other"``. One cheap dispatch per value, not a
    try of each branch (a long conversation validates in one pass)."""
    if tag is None:
        known = frozenset(branches)

        def tag(value: Any) -> str:
            t = type_of(value)
            return t if t in known else "other"

    members = tuple(Annotated[cls, Tag(name)] for name, cls in branches.items())
    return Annotated[Union[members], Discriminator(tag)]  # noqa: UP007 - a union built from a tuple


def evolve[M: Wire](model: M, **changes: Any) -> M:
    """A copy of ``model`` with ``changes`` applied (the original stays as it is)."""
    return model.model_copy(update=changes)


def without[M: Wire](model: M, *names: str) -> M:
    """A copy of ``model`` without the fields ``names`` (set or unknown ones); the others are the very same
    objects, in their order, so what is left of it is sent as it came."""
    fields = {n: getattr(model, n) for n in type(model).model_fields if n in model.model_fields_set and n not in names}
    fields.update({k: v for k, v in (model.__pydantic_extra__ or {}).items() if k not in names})
    return type(model).model_construct(**fields)


def _dump(value: Any, origin: dict[int, Any] | None) -> Any:
    if origin is not None:
        raw = origin.get(id(value))
        if raw is not None:
            return raw[1]
    if isinstance(value, Wire):
        out = {name: _dump(getattr(value, name), origin) for name in value.model_fields_set}
        ordered = {name: out[name] for name in type(value).model_fields if name in out}
        ordered.update(value.__pydantic_extra__ or {})
        return ordered
    if isinstance(value, list):
        return [_dump(v, origin) for v in value]
    return value


def _index(typed: Any, raw: Any, origin: dict[int, Any]) -> None:
    """Map every wire object of ``typed`` to the JSON it was parsed from (same shape, walked side by side)."""
    if isinstance(typed, Wire) and isinstance(raw, dict):
        origin[id(typed)] = (typed, raw)  # the object is kept alive with its id, so ids cannot be reused
        for name in typed.model_fields_set:
            child = getattr(typed, name)
            if isinstance(child, Wire | list) and name in raw:
                _index(child, raw[name], origin)
    elif isinstance(typed, list) and isinstance(raw, list) and len(typed) == len(raw):
        for t, r in zip(typed, raw, strict=True):
            if isinstance(t, Wire | list):
                _index(t, r, origin)


def dump_items(new: list[Any], old: list[Any], raw: list[Any]) -> list[Any]:
    """JSON for the repaired ``new`` items; objects shared with ``old`` (parsed from ``raw``) come back verbatim."""
    origin: dict[int, Any] = {}
    _index(old, raw, origin)
    return [_dump(item, origin) for item in new]
