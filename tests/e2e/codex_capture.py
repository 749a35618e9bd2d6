"""Write what the WebSocket mock received from a real Codex as a redacted fixture (tests/fixtures/codex-ws/).

Files: ``handshake.txt`` (the upgrade request's path and headers as the mock got them), then per client
message, in order, ``<n>_<name>.json`` (the message as Codex sent it, pretty-printed, key order kept) and
``<n>_<name>.events.jsonl`` (the mock's answer, one server message a line); ``messages.txt`` lists them with
their size on the wire, the status and the response each chained on.
``name`` is ``warmup`` (``generate: false``), ``turn<k>``, or the message's type for anything else.

Redacted: ``authorization`` → ``Bearer <redacted>``; the temporary folders → the stand-ins given (the project
→ ``/home/dev/project``, the home → ``/home/dev``); strings longer than 1500 characters (the base instructions,
the skills text…) cut to their first 300 and ``…[N more characters cut]``. The test redirect's own header is
dropped. Everything else (ids, field order, the image's data URL) is as sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.upstreams.mock import ORIGINAL_HOST_HEADER
from tests.upstreams.ws_mock import ResponsesSocketMock

LONG = 1500
KEEP = 300


def redact(value: Any, replacements: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value if len(value) <= LONG else f"{value[:KEEP]}…[{len(value) - KEEP} more characters cut]"
    if isinstance(value, list):
        return [redact(v, replacements) for v in value]
    if isinstance(value, dict):
        return {k: redact(v, replacements) for k, v in value.items()}
    return value


def names(messages: list[Any]) -> list[str]:
    out, turn = [], 0
    for n, body in enumerate(messages, 1):
        kind = body.get("type") if isinstance(body, dict) else None
        if kind == "response.create" and body.get("generate") is False:
            name = "warmup"
        elif kind == "response.create":
            turn += 1
            name = f"turn{turn}"
        else:
            name = str(kind or "unknown").replace(".", "_")
        out.append(f"{n}_{name}")
    return out


def save(folder: Path, version: str, mock: ResponsesSocketMock, stand_ins: dict[str, str]) -> None:
    """The one socket ``mock`` served, redacted, into ``folder`` (its old capture files replaced)."""
    [sock] = mock.sockets
    replacements = sorted(stand_ins.items(), key=lambda kv: -len(kv[0]))  # the longest path first
    folder.mkdir(parents=True, exist_ok=True)
    for old in [*folder.glob("*_*.json"), *folder.glob("*.events.jsonl")]:
        old.unlink()
    headers = {k: ("Bearer <redacted>" if k == "authorization" else v) for k, v in sock.headers.items()
               if k != ORIGINAL_HOST_HEADER}
    lines = [f"# codex-cli {version}: the WebSocket upgrade as the mock received it", f"GET {sock.path}",
             *(f"{k}: {redact(v, replacements)}" for k, v in headers.items())]
    (folder / "handshake.txt").write_text("\n".join(lines) + "\n")
    index = [f"# codex-cli {version}: the client messages in order: file, bytes on the wire (before redaction), "
             "status, chained on"]
    for name, got, events in zip(names([r.json for r in sock.received]), sock.received, sock.answers, strict=True):
        index.append(f"{name}.json {len(got.raw)} {got.status} {got.chained_on or '-'}")
        (folder / f"{name}.json").write_text(
            json.dumps(redact(got.json, replacements), indent=2, ensure_ascii=False) + "\n")
        (folder / f"{name}.events.jsonl").write_text(
            "".join(json.dumps(redact(e, replacements), ensure_ascii=False) + "\n" for e in events))
    (folder / "messages.txt").write_text("\n".join(index) + "\n")
