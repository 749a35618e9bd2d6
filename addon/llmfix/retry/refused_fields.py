"""Which request field an upstream's rejection says it refuses, read from the rejection itself.

The texts, each seen in the wild (the clients and relays in repairs/strip_refused_fields.py):

- Anthropic's, and every relay or vendor that validates like it (plain text in any envelope: Anthropic's
  ``{"type":"error","error":{…"message"}}``, OpenAI's ``{"error":{"message"}}``, GitHub Copilot's
  ``{"message":…,"code":"invalid_request_body"}``, copilot-api's that wraps Copilot's JSON in a string):
  ``<path>: Extra inputs are not permitted``, the path dotted with the union's tag where there is one —
  ``context_management``, ``output_config``, ``messages.0.content.3.text.cache_control.ephemeral.ttl``,
  ``messages.1.content.0.thinking.cache_control``, ``system.1.cache_control.ephemeral.scope``,
  ``thinking.disabled.display``;
- a FastAPI gateway's 422 ``{"detail":[{"type":"extra_forbidden","loc":["body","context_management"],
  "msg":"Extra inputs are not permitted",…}]}`` (also Mistral's 400, the same list under ``detail``);
- vLLM's 400 in the OpenAI shape, whose ``message`` is the Python text of that list: ``[{'type': 'extra_forbidden',
  'loc': ('body', 'max_completion_tokens'), 'msg': 'Extra inputs are not permitted', 'input': 800}]``
  (vllm-project/vllm #10078, 1Panel-dev/MaxKB #2912);
- a relay that names the field after the text: ``Extra inputs are not permitted, field: 'messages[2].refusal'``
  (anomalyco/opencode #23193);
- Azure OpenAI (and Azure AI Foundry): ``{"error":{"code":"unrecognized_request_argument","message":
  "Unrecognized request argument supplied: prompt_cache_key"}}`` (vectorize-io/hindsight #3518,
  MoonshotAI/kimi-code #2611);
- Groq ``property 'prompt_cache_key' is unsupported``, Cerebras 422 ``body.prompt_cache_key: property
  'body.prompt_cache_key' is unsupported`` (zed-industries/zed #36215);
- a relay's ``未知请求字段：prompt_cache_key`` ("unknown request field", anomalyco/opencode #45113).

Each path becomes the name of a strippable field (``body/fields.py``): a top-level knob, or a ``cache_control``
marker or one of its keys. A path into the conversation (``messages.1.content.0.text``), a tool declaration
(``tools.0.custom.input_examples``) or another protected member names nothing: such a rejection teaches nothing.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from llmfix.body import fields

PATTERN = (r"Extra inputs are not permitted|extra_forbidden|Unrecognized request argument supplied|"
           r"property '[^']+' is unsupported|未知请求字段")
MAX_NAMES = 8

_DOTTED = re.compile(r"(?<![\w.\-\[\]])(?P<path>[A-Za-z_][\w\-]*(?:(?:\.[\w\-]+)|\[\d+\])*)\s*:\s*"
                     r"Extra inputs are not permitted")
_FIELD_AFTER = re.compile(r"Extra inputs are not permitted,\s*field:\s*'(?P<path>[^'\s]{1,200})'")
_NAME = r"(?P<path>[A-Za-z_][\w\-]*(?:\.[\w\-]+)*)"
_ARGUMENT = re.compile(r"Unrecognized request argument supplied:\s*" + _NAME)
_UNSUPPORTED = re.compile(r"property '" + _NAME + r"' is unsupported")
_UNKNOWN = re.compile(r"未知请求字段\s*[：:]\s*" + _NAME)
_PYTHON_LOC = re.compile(r"'type':\s*'extra_forbidden',\s*'loc':\s*\((?P<loc>[^)]{0,400})\)")
_LOC_ITEM = re.compile(r"'([^']*)'|(-?\d+)")
_TAG = re.compile(r"typed-dict|tagged-union|function-(?:after|before|wrap|plain)|.*[\[\(<].*")
Segment = str | int


def read(body: bytes, text: str) -> tuple[str, ...]:
    """The names of the strippable fields the rejection ``body`` (its ``text``: every string of it, joined) says the
    upstream refuses, in the order it names them; () when it names none (or only the conversation's content)."""
    names: list[str] = []
    for path in [*_structured(body), *_written(text)]:
        name = name_of(path)
        if name is not None and name not in names:
            names.append(name)
    return tuple(names[:MAX_NAMES])


def name_of(path: list[Segment]) -> str | None:
    """The strippable field an error path names (None: content, a protected member, or nothing llmfix can name)."""
    segs = [s for s in path if not (isinstance(s, str) and _TAG.fullmatch(s))]
    if segs and segs[0] == "body":  # FastAPI's location of a body field
        segs = segs[1:]
    if not segs:
        return None
    if fields.CACHE in segs:
        at = segs.index(fields.CACHE)
        keys = [s for s in segs[at + 1 :] if isinstance(s, str)]
        before = segs[at - 1] if at > 0 else None
        if keys and keys[-1] != "type":
            name = f"{fields.CACHE}.{keys[-1]}"
        elif not keys and isinstance(before, str) and before not in fields.CONTAINERS:
            name = f"{before}.{fields.CACHE}"  # a block's type: ``messages.1.content.0.thinking.cache_control``
        elif not keys and segs[0] in fields.SCOPES:
            name = f"{segs[0]}.{fields.CACHE}"  # ``tools.3.cache_control``: the tools' markers
        else:
            name = fields.CACHE
    elif all(isinstance(s, str) for s in segs):
        name = ".".join(str(s) for s in segs)
    else:  # an index inside a knob (``context_management.edits.0.keep``): the knob itself
        name = str(segs[0]) if isinstance(segs[0], str) else ""
    return name if fields.parse(name) is not None else None


def _structured(body: bytes) -> list[list[Segment]]:
    """The ``loc`` of every ``extra_forbidden`` entry of a JSON error body (FastAPI's and Mistral's detail lists)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    out: list[list[Segment]] = []
    stack: list[Any] = [value]
    while stack and len(out) < MAX_NAMES:
        v = stack.pop()
        if isinstance(v, dict):
            loc = v.get("loc")
            if v.get("type") == "extra_forbidden" and isinstance(loc, list):
                out.append([s for s in loc if isinstance(s, str | int) and not isinstance(s, bool)])
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return out


def _written(text: str) -> list[list[Segment]]:
    """The paths the error's text names: dotted or bracketed, after ``field:``, ``supplied:`` or ``property``, or a
    Python ``loc`` tuple (vLLM)."""
    out: list[list[Segment]] = []
    for m in _PYTHON_LOC.finditer(text):
        out.append([int(num) if num else s for s, num in _LOC_ITEM.findall(m.group("loc"))])
    for pattern in (_DOTTED, _FIELD_AFTER, _ARGUMENT, _UNSUPPORTED, _UNKNOWN):
        out += [_split(m.group("path")) for m in pattern.finditer(text)]
    return out[: MAX_NAMES * 2]


def _split(path: str) -> list[Segment]:
    """``messages[2].refusal`` or ``messages.2.refusal`` as segments, numbers as ints."""
    parts = re.split(r"\.|\[|\]", path)
    return [int(p) if p.isdigit() else p for p in parts if p]
