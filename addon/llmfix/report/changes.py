"""What a repair changed: one :class:`Change` per edit, rendered for the console and the JSONL log.

``before``/``after`` are JSON values of the touched items only; they are redacted (media as
``<image/png 1.2 KB sha256:…>``, no base64, no secrets) when rendered, never stored raw in a log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmfix.report.redact import redact, redact_text


@dataclass(frozen=True, slots=True)
class Change:
    repair: str
    location: str  # where in the request, e.g. "input[3].output" or "messages[5]"
    summary: str  # what changed, in words
    before: Any = None
    after: Any = None
    dropped: tuple[str, ...] = field(default=())  # media that could not be forwarded, with the reason

    def line(self) -> str:
        """The one-line console form."""
        text = f"{self.repair}: {self.location}: {redact_text(self.summary, 300)}"
        if self.dropped:
            text += " [dropped: " + "; ".join(redact_text(d, 200) for d in self.dropped) + "]"
        return text

    def record(self) -> dict[str, Any]:
        """The redacted JSON form (without flow context)."""
        rec: dict[str, Any] = {
            "repair": self.repair,
            "location": self.location,
            "summary": redact_text(self.summary, 0),
            "before": redact(self.before),
            "after": redact(self.after),
        }
        if self.dropped:
            rec["dropped"] = [redact_text(d, 0) for d in self.dropped]
        return rec
