"""Hypothesis strategies for native Gemini sessions (``generateContent`` bodies), valid and broken.

A session is what a client resends turn after turn: user turns, each a user content (text, maybe an image), then
zero to three steps — a model content (maybe a text part first) of one to three function calls, the first signed
with a signature the strict mock's ledger issued (tests/upstreams/gemini_signatures.py), then the user content with
one ``functionResponse`` per call in call order, each maybe with an image (right after it, as Gemini CLI 0.61.0 sends
them: tests/fixtures/gemini-cli/turn2_request.json, or in ``functionResponse.parts``, Gemini 3's multimodal
responses) — then the model's signed text answer. Calls carry ids the model made, ids the client made (Gemini CLI's
``read_file_<n>_<k>``), or none; two calls of a step may do the same thing (one file read twice), so their
responses may be equal. Field names in camelCase, snake_case or mixed (proto3 JSON takes both).

Memory (llmfix's reasoning store) hears some of the model's answers, streamed as Gemini streams them, and so knows
the signatures it issued with their calls.

A session is cut into chunks, each ending with the user content a client sends after: request N is chunks 0..N.
Breakage is applied per chunk, so request N is still the start of request N+1, as a client that broke its history
resends it broken:

- ``unsigned``: signatures lost (a client converting through another API, a resume): all, or some;
- ``repeat``: every response of a step sent twice, each with its image (Gemini CLI 0.61.0 resumed: docs/evidence.md
  "Pairing and placement"), the copies after the originals or each right after its original;
- ``split``: a step's responses split over several user contents (NousResearch/hermes-agent PR #22261);
- ``missing``: a response never written (an interrupted tool);
- ``blank``: empty or whitespace-only text parts, and contents holding only those, among the others (right before
  an image, only an empty one);
- ``bridge``: a model text content right before a call turn (a turn cut short, a loop-detection request);
- ``headless``: the history opens with a call turn (a compaction cut the user content before it).
"""

from __future__ import annotations

import base64
import copy
import io
from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import strategies as st
from PIL import Image

from tests.upstreams.gemini_signatures import SignatureLedger

HOST = "generativelanguage.googleapis.com"
MODELS = ("gemini-3-flash-preview", "gemini-3-pro-preview", "gemini-2.5-flash")
BREAKAGES = ("unsigned", "repeat", "split", "missing", "blank", "bridge", "headless")
NAMES = ("read_file", "run_shell_command", "glob")
BLANKS = ("", " ", "\n", " \n\t")


def _png(n: int) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (2, 2), (n * 37 % 256, n * 91 % 256, n * 13 % 256)).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


PNGS = tuple(_png(n) for n in range(12))


def path_of(model: str) -> str:
    return f"/v1beta/models/{model}:streamGenerateContent?alt=sse"


@dataclass
class Session:
    """A generated session: its model, spelling, the chunks of contents, what broke it, and the ledger that signed."""

    model: str
    ledger: SignatureLedger
    chunks: list[list[dict[str, Any]]] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    heard: list[list[dict[str, Any]]] = field(default_factory=list)  # the answers llmfix's memory heard stream by

    def body(self, turns: int | None = None) -> dict[str, Any]:
        contents = [c for chunk in self.chunks[:turns] for c in chunk]
        return {"contents": copy.deepcopy(contents), "generationConfig": {"temperature": 0.2},
                "tools": [{"functionDeclarations": [{"name": n, "description": n} for n in NAMES]}]}

    def raw(self, turns: int | None = None) -> bytes:
        return orjson.dumps(self.body(turns))


class _Spell:
    """Field names in the session's spelling: ``camel``, ``snake``, or ``mixed`` (drawn per field)."""

    def __init__(self, draw: st.DrawFn, how: str) -> None:
        self.draw, self.how = draw, how

    def __call__(self, camel: str) -> str:
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
        if self.how == "camel" or snake == camel:
            return camel
        if self.how == "snake":
            return snake
        return self.draw(st.sampled_from((camel, snake)))


def _image(k: _Spell, data: str) -> dict[str, Any]:
    return {k("inlineData"): {k("mimeType"): "image/png", "data": data}}


@st.composite
def sessions(draw: st.DrawFn, broken: bool = False) -> Session:
    """A session, valid (``broken=False``) or broken in one or more of :data:`BREAKAGES`."""
    s = Session(draw(st.sampled_from((*MODELS, MODELS[0])), label="model"), SignatureLedger())
    k = _Spell(draw, draw(st.sampled_from(("camel", "snake", "mixed")), label="spelling"))
    ids = draw(st.sampled_from(("none", "model", "client")), label="ids")
    if broken:
        s.broken = draw(st.lists(st.sampled_from((*BREAKAGES, "unsigned", "unsigned")), min_size=1, max_size=3,
                                 unique=True), label="breakage")  # lost signatures: the commonest breakage
    images = iter(PNGS * 4)
    n = 0
    chunk: list[dict[str, Any]] = []
    for t in range(draw(st.integers(1, 3), label="turns")):
        prompt = [{"text": f"question {t}: what is in these files?"}]
        if draw(st.booleans()):
            prompt.append(_image(k, next(images)))
        chunk.append({"role": "user", "parts": prompt})
        s.chunks.append(chunk)
        chunk = []
        for _ in range(draw(st.integers(0, 3), label="steps")):
            model_parts: list[dict[str, Any]] = []
            if draw(st.booleans()):
                model_parts.append({"text": f"I will look at step {n}."})
            calls: list[tuple[str, dict[str, Any], str | None]] = []
            for j in range(draw(st.integers(1, 3), label="calls")):
                again = calls and draw(st.integers(0, 3)) == 0  # the same call as the one before (a file read twice)
                name, args = (calls[-1][0], dict(calls[-1][1])) if again else \
                    (draw(st.sampled_from(NAMES)), {"path": f"file{(n := n + 1)}.txt"})
                cid = None if ids == "none" else f"call_{n}{j}x" if ids == "model" else f"{name}_{1796188341 + n}_{j}"
                fc: dict[str, Any] = {"name": name, "args": args} if cid is None else {"id": cid, "name": name,
                                                                                       "args": args}
                part: dict[str, Any] = {k("functionCall"): fc}
                if j == 0 or draw(st.integers(0, 3)) == 0:  # the first always, a sibling now and then (sequential)
                    part[k("thoughtSignature")] = s.ledger.sign_call(name, args)
                model_parts.append(part)
                calls.append((name, args, cid))
            if draw(st.booleans(), label="memory heard this answer"):  # as Gemini streamed it: camelCase
                s.heard.append([{("functionCall" if key.startswith("function") else "thoughtSignature" if
                                  key.startswith("thought") else key): value for key, value in p.items()}
                                for p in copy.deepcopy(model_parts)])
            responses: list[list[dict[str, Any]]] = []  # each response with the parts that came with it
            for name, args, cid in calls:
                fr: dict[str, Any] = {"name": name, "response": {"output": f"contents of {args['path']}"}}
                if cid is not None:
                    fr = {"id": cid, **fr}
                media = draw(st.sampled_from(("none", "none", "after", "nested")), label="response media")
                if media == "nested":
                    fr["parts"] = [_image(k, next(images))]
                group = [{k("functionResponse"): fr}]
                if media == "after":
                    group.append(_image(k, next(images)))
                responses.append(group)
            step = [{"role": "model", "parts": model_parts}]
            step += _answers(draw, s, k, responses)
            chunk += step
            s.chunks.append(chunk)
            chunk = []
        chunk = [{"role": "model", "parts": [{"text": f"answer {t}", k("thoughtSignature"): s.ledger.sign_text()}]}]
    if broken:
        _break_all(draw, s, k)
    return s


def _answers(draw: st.DrawFn, s: Session, k: _Spell, responses: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The user contents answering a step: one holding every response in order, or as a breakage has it."""
    how = [b for b in ("repeat", "split", "missing") if b in s.broken and draw(st.booleans(), label=b)]
    groups = list(responses)
    if "missing" in how and groups:
        del groups[draw(st.integers(0, len(groups) - 1), label="missing")]
    if "repeat" in how:
        groups = groups + copy.deepcopy(groups) if draw(st.booleans(), label="copies after all") else \
            [g for group in groups for g in (group, copy.deepcopy(group))]
    flat = [p for g in groups for p in g]
    if "split" in how and len(groups) > 1:
        cut = draw(st.integers(1, len(groups) - 1), label="split at")
        first = [p for g in groups[:cut] for p in g]
        return [{"role": "user", "parts": first}, {"role": "user", "parts": flat[len(first):]}]
    return [{"role": "user", "parts": flat}] if flat else [{"role": "user", "parts": [{"text": "(interrupted)"}]}]


def _break_all(draw: st.DrawFn, s: Session, k: _Spell) -> None:
    """The breakages that touch contents already built: signatures, blanks, bridges, a headless history."""
    if "unsigned" in s.broken:
        every = draw(st.booleans(), label="lose every signature")
        for chunk in s.chunks:
            for content in chunk:
                for part in content["parts"]:
                    if any(x in part for x in ("functionCall", "function_call")) and (every or draw(st.booleans())):
                        part.pop("thoughtSignature", None)
                        part.pop("thought_signature", None)
    if "blank" in s.broken:
        for chunk in s.chunks:
            for content in chunk:
                if draw(st.integers(0, 2)) == 0:
                    at = draw(st.integers(0, len(content["parts"])))
                    before_media = at < len(content["parts"]) and any(
                        m in content["parts"][at] for m in ("inlineData", "inline_data"))
                    # whitespace between a response and its image detaches the image (a copy then looks different
                    # from its original: kept, and the surplus kept as text); an empty part there goes first
                    content["parts"].insert(at, {"text": "" if before_media else draw(st.sampled_from(BLANKS))})
            if len(chunk) > 1 and draw(st.booleans()):  # a content of blanks, never the last one sent
                at = draw(st.integers(0, len(chunk) - 1))
                chunk.insert(at, {"role": draw(st.sampled_from(("user", "model"))),
                                  "parts": [{"text": draw(st.sampled_from(BLANKS))}]})
    if "bridge" in s.broken:
        for chunk in s.chunks:
            for at in [i for i, c in enumerate(chunk) if c["role"] == "model" and any(
                    "functionCall" in p or "function_call" in p for p in c["parts"])][::-1]:
                if draw(st.booleans()):
                    chunk.insert(at, {"role": "model", "parts": [{"text": "Let me check something first."}]})
    if "headless" in s.broken and len(s.chunks) > 1 and any(c["role"] == "model" for c in s.chunks[1]):
        s.chunks = s.chunks[1:]
