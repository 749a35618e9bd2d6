"""``llmfix.capture``: turn flows into redacted regression fixtures in one step (no secrets in them; visible).

In mitmweb's command bar or mitmproxy's console (``:``)::

    llmfix.capture @marked flows/            # → flows/<host>-<dialect>-<result>-<id>.flow + .expect.json
    llmfix.capture @focus flows/my-bug.flow  # console: the flow under the cursor, to a file name of your choice

``@marked`` is every flow llmfix changed (it marks them 🔧), unless you marked others; any flow filter
(``~u /v1/responses``) works too. Several flows go into one file and are replayed in request order.

What is written, for each selected HTTP flow (in request order, into one file):

- ``<name>.flow``, mitmproxy's own flow format (:class:`mitmproxy.io.FlowWriter`): the request **as the
  client sent it** (the original body llmfix kept in ``flow.metadata["llmfix"]["original"]``, not the
  repaired one), so ``mitmdump -nr <name>.flow -s addon/fix.py`` repairs it again, offline; and the
  response as it came. Redacted: the value of every header (and query parameter) whose name could hold a
  secret (authorization, cookies, anything with key/token/secret/auth/session/password/… in its name)
  is ``<redacted>``; API-key-shaped strings (``sk-…``, ``xai-…``, bearer tokens, JWTs…) in header
  values, bodies and comments are ``<redacted>``, and so are string values of secret-named JSON keys.
  llmfix's metadata, marks and comments, and any backup of an edited flow, are dropped.
- ``<name>.expect.json``: what llmfix does when it replays those requests offline with default options and
  an empty in-memory memory (``--set llmfix_memory=:memory:``): per flow the status
  (repaired / untouched / failed / ignored), the repairs and change lines, the repaired conversation as
  readable lines, and the sha256 of the body sent upstream. Computed right here from the redacted file, so
  ``tests/test_flows.py`` passes at once; if llmfix's current answer is the bug, edit the expectation to
  what it should be, and the test fails until llmfix is fixed. ``live`` records what llmfix did when the
  flow was captured (with the memory it had then), for reference only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mitmproxy.types
from mitmproxy import command, exceptions, flow, http, io
from mitmproxy.log import ALERT

from llmfix import engine, offload, options, route
from llmfix.body.conversation import BadBody
from llmfix.dialects.base import Dialect
from llmfix.memory import learn
from llmfix.memory.media_window import MediaWindow
from llmfix.memory.recall import Recall
from llmfix.memory.sqlite import SqliteStore
from llmfix.proxy import UPSTREAM
from llmfix.report.redact import SECRET_KEYS, SECRETS, TOKEN_COUNT_KEYS

logger = logging.getLogger("llmfix")

META = "llmfix"
DEFAULT_DIR = mitmproxy.types.Path("flows")
REDACTED = "<redacted>"
REPLAY_OPTIONS: dict[str, Any] = {"llmfix_memory": ":memory:"}
"""The options a fixture is replayed with (``mitmdump -nr … --set llmfix_memory=:memory:``)."""

_ID_NAMESPACE = uuid.UUID("8d0f6a52-2b1c-4f7e-9a51-6c3f1f0e7a11")
_SECRET_NAME = re.compile(
    r"(?i)authorization|cookie|key|token|secret|auth|session|passw|credential|signature|account|organi[sz]ation"
    r"|project")
_HARMLESS_NAME = re.compile(r"(?i)ratelimit")  # x-ratelimit-remaining-tokens & co: counters, not secrets
KEYISH = re.compile(rb"(?<![A-Za-z0-9+/_-])(?:" + SECRETS.pattern.encode() + rb")")
"""An API-key-shaped string that starts a word (so ``task-notification`` or base64 image data never match)."""


# -- redaction ----------------------------------------------------------------------------------------------


def secret_name(name: str) -> bool:
    """Could a header / query parameter of this name carry a secret?"""
    return bool(_SECRET_NAME.search(name)) and not _HARMLESS_NAME.search(name)


def scrub_text(text: str) -> str:
    return KEYISH.sub(REDACTED.encode(), text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")


def _scrub_json_keys(value: Any) -> tuple[Any, int]:
    """``value`` with the string values of secret-named keys replaced, and how many were."""
    if isinstance(value, list):
        pairs = [_scrub_json_keys(v) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        out, count = {}, 0
        for k, v in value.items():
            if (isinstance(v, str) and v and v != REDACTED and k not in TOKEN_COUNT_KEYS
                    and SECRET_KEYS.match(k)):
                out[k], count = REDACTED, count + 1
            else:
                out[k], n = _scrub_json_keys(v)
                count += n
        return out, count
    return value, 0


def scrub_body(data: bytes) -> tuple[bytes, int]:
    """A body without API keys: key-shaped strings replaced in place; secret-named JSON keys blanked.

    Bytes change only where a secret was: a body without one comes back identical. When a JSON body has
    a secret-named key, it is re-serialized compactly (rare: keys normally travel in headers).
    """
    out, count = KEYISH.subn(REDACTED.encode(), data)
    head = out[:64].lstrip()[:1]
    if head in (b"{", b"["):
        try:
            value = json.loads(out)
        except ValueError:
            return out, count
        cleaned, n = _scrub_json_keys(value)
        if n:
            out, count = json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")).encode(), count + n
    return out, count


def redact_headers(headers: http.Headers) -> None:
    for name in list(dict.fromkeys(headers.keys())):
        values = headers.get_all(name)
        if secret_name(name):
            headers.set_all(name, [REDACTED for _ in values])
        elif any(KEYISH.search(v.encode("utf-8", "surrogateescape")) for v in values):
            headers.set_all(name, [scrub_text(v) for v in values])


def _redact_query(request: http.Request) -> None:
    if "?" not in request.path:
        return
    query = request.query
    for name in list(dict.fromkeys(query.keys())):
        values = query.get_all(name)
        new = [REDACTED for _ in values] if secret_name(name) else [scrub_text(v) for v in values]
        if new != values:
            query.set_all(name, new)


def _scrub_message(message: http.Message) -> None:
    raw = message.raw_content
    if not raw:
        return
    try:
        data = message.get_content(strict=True)
    except ValueError:
        data = None
    if data is None:  # an undecodable body: scrub the wire bytes as they are
        new, n = scrub_body(raw)
        if n:
            message.raw_content = new
            _fix_length(message)
    else:
        new, n = scrub_body(data)
        if n:
            message.set_content(new)  # re-encoded with the message's Content-Encoding


def _fix_length(message: http.Message) -> None:
    if "transfer-encoding" not in message.headers and message.raw_content is not None:
        message.headers["content-length"] = str(len(message.raw_content))


def fixture_of(live: http.HTTPFlow) -> http.HTTPFlow:
    """A redacted copy of ``live`` whose request is the one the client sent (before llmfix's repair)."""
    f = live.copy()
    f.id = str(uuid.uuid5(_ID_NAMESPACE, live.id))  # stable: capturing the same flow twice writes the same id
    info = live.metadata.get(META)
    f.metadata = {}
    f._backup = None  # an edited flow's backup holds the unredacted original; mitmproxy has no public reset
    f.marked = ""
    f.intercepted = False
    f.comment = scrub_text("\n".join(x for x in live.comment.splitlines() if not x.startswith("llmfix:")))
    routed = live.metadata.get(UPSTREAM)
    if isinstance(routed, list | tuple) and len(routed) == 3:  # another addon re-pointed the flow after llmfix
        f.request.scheme, f.request.host, f.request.port = routed
    original = info.get("original") if isinstance(info, dict) else None
    if isinstance(original, bytes):
        f.request.raw_content = original
        if "content-length" in f.request.headers:
            _fix_length(f.request)
    for message in (f.request, f.response):
        if message is not None:
            redact_headers(message.headers)
            if message.trailers:
                redact_headers(message.trailers)
            _scrub_message(message)
    _redact_query(f.request)
    return f


# -- the expected result of an offline replay ----------------------------------------------------------------


def _offline_settings(overrides: dict[str, Any]) -> engine.Settings:
    """The settings ``mitmdump -nr … -s addon/fix.py`` runs with: defaults + overrides, memory in RAM only."""
    opts = SimpleNamespace(**({name: default for name, _, default, _ in options.OPTIONS} | overrides))
    settings = options.parse_settings(opts)
    max_age = int(options.parse_duration(opts.llmfix_memory_max_age, "llmfix_memory_max_age"))
    recall = Recall(SqliteStore(":memory:", max_age_s=max_age, max_entries=opts.llmfix_memory_max_entries))
    window = MediaWindow(options.parse_duration(opts.llmfix_restore_window, "llmfix_restore_window"))
    return options.with_state(settings, recall, window)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _expect_one(f: http.HTTPFlow, settings: engine.Settings) -> dict[str, Any]:
    r = f.request
    entry: dict[str, Any] = {"request": f"{r.method} {r.pretty_url}"}
    dialect = route.dialect_for(r.method, r.path, r.headers.get("content-type"))
    if dialect is None:
        return {**entry, "status": "ignored"}
    entry["dialect"] = str(dialect)
    raw = r.raw_content
    if not raw:
        reason = "empty body" if raw is not None else "body was streamed, llmfix cannot see it"
        return {**entry, "status": "failed", "reason": reason}
    ce = r.headers.get("content-encoding")
    req = engine.request(dialect, r.host, r.port, r.path, raw, ce, f.id)
    # the command runs on the event loop and waits for its answer: on an image worker, so that its images are
    # converted there (on the loop a new image would only stop the run)
    outcome = offload.IMAGE_WORKERS.submit(engine.process, req, settings).result()
    entry["status"] = outcome.status
    if outcome.status == "failed":
        entry["reason"] = outcome.reason
    if outcome.status == "repaired":
        assert outcome.body is not None
        entry |= {"repairs": outcome.repairs, "changes": [c.line() for c in outcome.changes],
                  "conversation": list(outcome.after), "body_sha256": _sha256(outcome.body)}
    else:
        try:
            entry["body_sha256"] = _sha256(engine.decode(raw, ce, settings.max_body))
        except BadBody:
            entry["body_sha256"] = _sha256(raw)
    _learn_from_answer(f, dialect, settings)
    settings.window.finish(f.id)
    return entry


def _learn_from_answer(f: http.HTTPFlow, dialect: Dialect, settings: engine.Settings) -> None:
    """What the addon's ``response`` hook learns from a loaded flow: tool calls of a non-streamed JSON answer."""
    resp = f.response
    if resp is None or not resp.raw_content or "json" not in resp.headers.get("content-type", "").lower():
        return
    try:
        body = resp.get_content(strict=True)
    except ValueError:
        return
    if body and settings.memory is not None:
        settings.memory.remember(learn.learn_json_response(dialect, body))


def expectations(flows: Sequence[http.HTTPFlow], overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """llmfix's result for each flow, replayed in order through one fresh offline llmfix."""
    settings = _offline_settings(REPLAY_OPTIONS if overrides is None else overrides)
    try:
        return [_expect_one(f, settings) for f in flows]
    finally:
        settings.memory.close()


# -- files ----------------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.") or "flow"


def default_name(fixture: http.HTTPFlow, expected: dict[str, Any]) -> str:
    result = "+".join(expected.get("repairs", [])) or expected["status"]
    return _slug(f"{fixture.request.pretty_host}-{expected.get('dialect', 'http')}-{result}-{fixture.id[:8]}")


def expect_path(flow_path: Path) -> Path:
    """``x.flow`` → ``x.expect.json``."""
    return flow_path.with_name(flow_path.name.removesuffix(".flow") + ".expect.json")


def write_fixture(flows: Sequence[http.HTTPFlow], target: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """Write ``flows`` (redacted, as the clients sent them) and their expectation; return both paths."""
    ordered = sorted(flows, key=lambda f: f.request.timestamp_start or 0)
    fixtures = [fixture_of(f) for f in ordered]
    expected = expectations(fixtures)
    name = f"{default_name(fixtures[0], expected[0])}.flow"
    flow_path = target if target.suffix == ".flow" else target / name
    flow_path.parent.mkdir(parents=True, exist_ok=True)
    sidecar = expect_path(flow_path)
    doc = {
        "about": (f"What llmfix does when it replays {flow_path.name} offline: tests/test_flows.py, or "
                  f"mitmdump -nr flows/{flow_path.name} -s addon/fix.py --set llmfix_memory=:memory:. "
                  "Written by llmfix.capture; if llmfix's result here is wrong, edit it to the right one."),
        "options": REPLAY_OPTIONS,
        "flows": [e | ({"live": live} if (live := _live(f)) else {}) for e, f in zip(expected, ordered, strict=True)],
    }
    tmp = flow_path.with_name(flow_path.name + ".tmp")
    with tmp.open("wb") as fo:
        writer = io.FlowWriter(fo)
        for f in fixtures:
            writer.add(f)
    tmp.replace(flow_path)
    sidecar.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return flow_path, sidecar, expected


def _live(f: http.HTTPFlow) -> dict[str, Any] | None:
    info = f.metadata.get(META)
    if not isinstance(info, dict) or not info.get("changes"):
        return None
    return {"mode": info.get("mode"), "repairs": info.get("repairs"), "changes": info.get("lines")}


def summary(expected: list[dict[str, Any]]) -> str:
    parts = [", ".join(e.get("repairs", [])) or e["status"] for e in expected]
    return "; ".join(parts)


class Capture:
    """The ``llmfix.capture`` command (its own addon: it shares nothing with the request path)."""

    @command.command("llmfix.capture")
    def capture(self, flows: Sequence[flow.Flow], path: mitmproxy.types.Path = DEFAULT_DIR) -> str:
        """Write flows as a redacted regression fixture: <dir>/<name>.flow or <file>.flow, + .expect.json."""
        selected = [f for f in flows if isinstance(f, http.HTTPFlow) and f.request.raw_content is not None]
        if not selected:
            raise exceptions.CommandError("llmfix.capture: no HTTP flow with a recorded request body selected")
        try:
            flow_path, sidecar, expected = write_fixture(selected, Path(path).expanduser())
        except OSError as e:
            raise exceptions.CommandError(f"llmfix.capture: cannot write {path}: {e.strerror or e}") from e
        n, skipped = len(selected), len(flows) - len(selected)
        message = (f"llmfix.capture: wrote {n} flow{'s' if n != 1 else ''} to {flow_path} and {sidecar.name} "
                   f"(offline replay: {summary(expected)})")
        if skipped:
            message += f"; skipped {skipped} flow{'s' if skipped != 1 else ''} without an HTTP request body"
        logger.log(ALERT, message)
        return message
