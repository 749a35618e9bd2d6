"""A strict mock upstream whose hosts refuse request fields, each in its vendor's way (tests/upstreams/field_rules.py).

``RefusingUpstream({host: refuse})`` answers like ``MockUpstream("by-host")`` except that, for a request whose
original host (what the loopback redirect records) is in the map, ``refuse(body)`` is asked first and its
`Rejection`, if any, is the answer. ``refusing(vendor, *fields)`` builds the usual ``refuse``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.upstreams import field_rules
from tests.upstreams.errors import Rejection
from tests.upstreams.handler import MockHandler
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream

Refuse = Callable[[dict[str, Any]], Rejection | None]


def refusing(vendor: str, *fields: str) -> Refuse:
    return lambda body: field_rules.refusal(vendor, fields, body)


class _Handler(MockHandler):
    def _parse(self, raw: bytes, headers: dict[str, str], rules: str) -> tuple[Any, Rejection | None]:
        data, rejection = super()._parse(raw, headers, rules)
        if rejection is None and isinstance(data, dict):
            host = (headers.get(ORIGINAL_HOST_HEADER) or headers.get("host") or "").partition(":")[0].lower()
            refuse = self.mock.refusing.get(host)  # type: ignore[attr-defined]
            rejection = refuse(data) if refuse is not None else None
        return data, rejection


class RefusingUpstream(MockUpstream):
    def __init__(self, refusing: Mapping[str, Refuse]) -> None:
        super().__init__("by-host")
        self.refusing = dict(refusing)

    def start(self) -> RefusingUpstream:
        super().start()
        assert self._server is not None
        self._server.RequestHandlerClass = _Handler
        return self
