"""The base of every wire model: unknown fields kept; untouched objects sent back verbatim.

Models are plain, frozen pydantic models with ``extra="allow"`` — no per-object hooks, so validating a
long conversation stays cheap (a wrap validator per object cost six times the parse itself). Which
objects a repair left untouched is decided only when a repaired request is serialized
(:func:`dump_items`): the original typed tree and the original JSON are walked side by side, and every
object that still appears in the repaired tree is emitted as the very dict it was parsed from. So parts
of a repaired request that no repair touched keep their keys, key order and values; an object a repair
built or changed is emitted from its set fields and unknown fields.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Wire(BaseModel):
    """A JSON object of an LLM API: typed where repairs look, everything else kept as it came."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    def to_wire(self) -> Any:
        """The JSON-ready value of this object, from its set fields and unknown fields."""
        return _dump(self, None)


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
