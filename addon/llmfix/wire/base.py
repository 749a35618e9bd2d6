"""The base of every wire model: unknown fields kept, untouched objects serialized back verbatim.

Invariant: ``Model.model_validate(d).model_dump() == d`` for every dict ``d`` the model accepts (the
very same dict object is returned), and an object built with :func:`evolve` keeps the key order of the
object it came from, with changed keys in place and new keys last.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)


class Wire(BaseModel):
    """A JSON object of an LLM API: typed where repairs look, everything else kept as it came."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    _origin: dict[str, Any] | None = PrivateAttr(default=None)
    _pristine: bool = PrivateAttr(default=False)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_origin(cls, data: Any, handler: Any) -> Any:
        model = handler(data)
        if isinstance(data, dict) and isinstance(model, Wire):
            model._origin = data
            model._pristine = True
        return model

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        if self._pristine:
            return self._origin
        out = handler(self)
        origin = self._origin
        if origin is None or not isinstance(out, dict):
            return out
        ordered = {k: out[k] for k in origin if k in out}
        for k, v in out.items():
            if k not in ordered:
                ordered[k] = v
        return ordered

    def to_wire(self) -> Any:
        """The JSON-ready value to send: the original dict when untouched."""
        return self.model_dump(exclude_unset=True, by_alias=True)


def evolve[M: Wire](model: M, **changes: Any) -> M:
    """A copy of ``model`` with ``changes`` applied; it serializes from its fields, in the original key order."""
    new = model.model_copy(update=changes)
    new._pristine = False
    return new


def wire_list(items: list[Any]) -> list[Any]:
    """Serialize a list of wire models (or plain values) to JSON-ready values."""
    return [i.to_wire() if isinstance(i, Wire) else i for i in items]

