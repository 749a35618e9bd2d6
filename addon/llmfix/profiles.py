"""Upstream profiles: what an upstream accepts, as flags that repairs read (never host names).

An upstream is a host AND a dialect: a vendor's Chat API and its Anthropic-compatible Messages API on
one host accept different things (DeepSeek's Chat API rejects every image, its ``/anthropic`` Messages
API takes image blocks). A profile is chosen by the request's host (built-ins below; an unknown host
gets ``spec``, the strict reading of the public OpenAI/Anthropic specs), then by the dialect (the
``deepseek`` family on a Messages request is ``deepseek-anthropic``, see :data:`VARIANTS`), then
adjusted by the user's profiles file, by host and by model. The file is TOML::

    [hosts."gateway.internal:8443"]     # host or host:port; glob patterns allowed
    base = "xai"                        # start from a built-in profile (its dialect variant, if any)
    chat_tool_media = false             # then override any flag

    [hosts."gateway.internal:8443".messages]   # only for this dialect (chat, responses, messages)
    anthropic_system_messages = false

    [models."grok-code-*"]              # model id glob, applied after the host
    input = ["text"]                    # input modalities, overriding the models.dev catalogue
    responses_tool_output_array = false

Evidence for each built-in flag is in ``../shared/reference/wire-formats.md`` (R1–R8).
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from llmfix import catalogue
from llmfix.route import Dialect


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    catalogue: str | None = None
    """The models.dev provider id used to look up a model's input modalities."""
    responses_tool_output_array: bool = True
    """May a Responses ``function_call_output``/``custom_tool_call_output`` output be an array (R1, R2)."""
    responses_image_requires_url: bool = False
    """Must every Responses ``input_image`` carry an ``image_url`` (xAI: file_id only is rejected)."""
    chat_tool_media: bool = False
    """May a Chat ``role:"tool"`` message carry image/file/audio parts (R3, R4, R7)."""
    chat_tool_text_array: bool = True
    """May a Chat tool message's content be an array of text parts (R3) rather than only a string (R7)."""
    anthropic_tool_result_media: bool = True
    """May an Anthropic ``tool_result`` carry image blocks (Anthropic docs)."""
    media_input: bool = True
    """May a request carry image/file parts at all. False: every model is text-only, whatever the catalogue
    says or does not know (R7: DeepSeek answers ``unknown variant `image_url`, expected `text``` for any
    model), unless a profiles-file ``input`` names its modalities."""
    anthropic_system_messages: bool = True
    """May an Anthropic ``messages[]`` entry have ``role:"system"`` (mid-conversation system messages, which
    Claude Code sends since 2.1.154). False: folded into user messages (session-killers §2.3: DeepSeek 400
    ``unknown variant `system` ``, GLM 422 ``Input should be 'user' or 'assistant'``, MiniMax 400 ``(2013)``)."""
    chat_reasoning_content: bool = False
    """Must a Chat assistant turn be replayed with the ``reasoning_content`` it was answered with (thinking mode:
    DeepSeek 400 ``The `reasoning_content` in the thinking mode must be passed back to the API.``, Kimi 400
    ``thinking is enabled but reasoning_content is missing in assistant tool call message at index N``,
    session-killers §3.1). True: restore-reasoning-content gives it back from memory where it was lost."""
    anthropic_signed_thinking: bool = False
    """Does the upstream verify the ``signature`` of every thinking block against its own (Anthropic:
    ``messages.N.content.M: Invalid `signature` in `thinking` block``, session-killers §3.2). True: blocks whose
    form shows they are not its own (no or an empty signature, a message-UUID signature) leave the older turns
    up front; a rejection naming a block teaches the rest on any upstream (drop-foreign-thinking)."""


TEXT_ONLY = frozenset({"text"})
Learned = tuple[tuple[str, bool], ...]
"""Flags learned for one upstream from its rejections, sorted by name (see ``ProfileTable.resolve``)."""
FLAGS = tuple(n for n in Profile.model_fields if n not in ("name", "catalogue"))

BUILTIN: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(name="spec"),
        Profile(name="openai", catalogue="openai"),
        Profile(
            name="xai",
            catalogue="xai",
            responses_tool_output_array=False,
            responses_image_requires_url=True,
        ),
        # Thinking mode is on by default for DeepSeek's V4 models (api-docs.deepseek.com thinking_mode): the Chat
        # API then wants each turn's reasoning_content back. Whether a request has it on is not judged: the
        # repair only gives back what the answer carried, and DeepSeek ignores it where it does not need it.
        Profile(name="deepseek", catalogue="deepseek", chat_tool_text_array=False, media_input=False,
                chat_reasoning_content=True),
        # DeepSeek's Messages API reference lists image blocks (base64, url, file) as supported, in user
        # content and in tool_result content: no media_input=false here, no catalogue (its text-only entries
        # describe the Chat API). Mid-conversation system messages: 400 (session-killers §2.3).
        Profile(name="deepseek-anthropic", anthropic_system_messages=False),
        Profile(name="anthropic", catalogue="anthropic", anthropic_signed_thinking=True),
        Profile(name="openrouter", catalogue="openrouter"),
        # Anthropic-compatible endpoints (session-killers §2.1, §2.3). The Chat side of these vendors gets the
        # spec reading; only the Messages side has known rejections.
        Profile(name="glm", catalogue="zhipuai"),
        Profile(name="glm-anthropic", catalogue="zhipuai", anthropic_system_messages=False),  # 422
        Profile(name="qwen", catalogue="alibaba"),
        Profile(name="qwen-anthropic", catalogue="alibaba", anthropic_system_messages=False),  # 400
        Profile(name="minimax", catalogue="minimax"),
        Profile(name="minimax-anthropic", catalogue="minimax", anthropic_system_messages=False),  # 400 (2013)
        # Kimi's thinking models (kimi-k2-thinking, K2.5 and later) on its OpenAI-compatible API: 400 ``thinking is
        # enabled but reasoning_content is missing…`` (session-killers §3.1). UNCERTAIN which models and requests
        # have thinking on; a turn answered without reasoning gave none to restore.
        Profile(name="moonshot", catalogue="moonshotai", chat_reasoning_content=True),
        # Kimi publishes no contract for its Anthropic endpoint; no rejection text is known. Inference: its
        # chat-template backend takes no system turn mid-conversation, like the others; the fold sends what
        # Claude Code itself sends to models without the feature, so it is safe if Kimi would accept them.
        Profile(name="moonshot-anthropic", catalogue="moonshotai", anthropic_system_messages=False),
    )
}

VARIANTS: dict[str, dict[Dialect, str]] = {
    "deepseek": {Dialect.MESSAGES: "deepseek-anthropic"},
    "glm": {Dialect.MESSAGES: "glm-anthropic"},
    "qwen": {Dialect.MESSAGES: "qwen-anthropic"},
    "minimax": {Dialect.MESSAGES: "minimax-anthropic"},
    "moonshot": {Dialect.MESSAGES: "moonshot-anthropic"},
}
"""A vendor's profile per dialect: the upstream is host AND dialect. A ``base`` in the profiles file picks
the variant too, so ``base = "deepseek"`` on a gateway gives ``deepseek-anthropic`` to its Messages requests."""

DIALECT_SECTIONS = tuple(d.value for d in Dialect)

BUILTIN_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    ("*.openai.azure.com", "openai"),
    ("api.x.ai", "xai"),
    ("api.anthropic.com", "anthropic"),
    ("api.deepseek.com", "deepseek"),
    ("openrouter.ai", "openrouter"),
    ("open.bigmodel.cn", "glm"),
    ("api.z.ai", "glm"),
    ("dashscope.aliyuncs.com", "qwen"),
    ("dashscope-*.aliyuncs.com", "qwen"),
    ("*.dashscope.aliyuncs.com", "qwen"),
    ("*.maas.aliyuncs.com", "qwen"),
    ("api.minimax.io", "minimax"),
    ("api.minimaxi.com", "minimax"),
    ("api.moonshot.ai", "moonshot"),
    ("api.moonshot.cn", "moonshot"),
    ("api.kimi.com", "moonshot"),
    ("api.kimi.ai", "moonshot"),
)


def builtin(name: str, dialect: Dialect | None) -> Profile:
    """The built-in profile ``name``, or its variant for ``dialect``."""
    return BUILTIN[VARIANTS.get(name, {}).get(dialect, name) if dialect is not None else name]


@dataclass(frozen=True, slots=True)
class Resolved:
    """The profile for one request, and what its model takes (None: unknown, assume everything)."""

    profile: Profile
    modalities: frozenset[str] | None


@dataclass(frozen=True, slots=True)
class _Override:
    pattern: str
    base: str | None
    flags: dict[str, bool]
    modalities: frozenset[str] | None
    dialects: dict[str, _Override] = field(default_factory=dict)
    """Per-dialect sub-tables (``[hosts."h".messages]``), applied after this entry's own flags."""


@dataclass(frozen=True, slots=True)
class ProfileTable:
    hosts: tuple[_Override, ...] = ()
    models: tuple[_Override, ...] = ()
    source: str | None = None
    _cache: dict[tuple[str, int | None, str | None, Dialect | None, Learned], Resolved] = field(
        default_factory=dict, compare=False)

    def resolve(self, host: str, port: int | None, model: str | None, dialect: Dialect | None = None,
                learned: Learned = ()) -> Resolved:
        """The profile of the upstream ``host[:port]`` speaking ``dialect`` (None: the host's default) for
        ``model``. ``learned``: flags learned from this upstream's rejections (repair-and-retry), applied over the
        built-in profile and under the profiles file, so a file setting for the host (a flag, or a ``base``
        that pins the whole profile) always wins."""
        key = (host, port, model, dialect, learned)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._resolve(host.lower(), port, model, dialect, learned)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def _resolve(self, host: str, port: int | None, model: str | None, dialect: Dialect | None,
                 learned: Learned = ()) -> Resolved:
        names = (f"{host}:{port}", host) if port is not None else (host,)
        base = next((p for pat, p in BUILTIN_HOSTS if any(fnmatch.fnmatchcase(n, pat) for n in names)), "spec")
        profile = builtin(base, dialect)
        if learned:
            profile = profile.model_copy(update={**dict(learned), "name": f"{profile.name}+learned"})
        modality_override: frozenset[str] | None = None
        matching = [o for o in self.hosts if any(fnmatch.fnmatchcase(n, o.pattern) for n in names)]
        if model:
            matching += [o for o in self.models if fnmatch.fnmatchcase(model, o.pattern)]
        for o in matching:
            for step in (o, o.dialects.get(dialect)) if dialect is not None else (o,):
                if step is not None:
                    profile = _apply(profile, step, dialect)
                    modality_override = step.modalities or modality_override
        if modality_override is None and not profile.media_input:
            modality_override = TEXT_ONLY
        modalities = modality_override or catalogue.input_modalities(model, profile.catalogue)
        return Resolved(profile, modalities)


def _apply(profile: Profile, o: _Override, dialect: Dialect | None) -> Profile:
    if o.base is not None:
        profile = builtin(o.base, dialect)
    if o.flags:
        profile = profile.model_copy(update={**o.flags, "name": f"{profile.name}+{o.pattern}"})
    return profile


def parse_table(data: dict[str, Any], source: str = "<config>") -> ProfileTable:
    """Parse a profiles document; raises ValueError naming the bad entry."""
    unknown = set(data) - {"hosts", "models"}
    if unknown:
        raise ValueError(f"{source}: unknown section(s) {sorted(unknown)}; expected [hosts.\"…\"] or [models.\"…\"]")
    sections: dict[str, tuple[_Override, ...]] = {}
    for section in ("hosts", "models"):
        entries = data.get(section, {})
        if not isinstance(entries, dict):
            raise ValueError(f"{source}: [{section}] must be a table of tables")
        sections[section] = tuple(_parse_override(section, k, v, source) for k, v in entries.items())
    return ProfileTable(hosts=sections["hosts"], models=sections["models"], source=source)


def _parse_override(section: str, pattern: str, entry: Any, source: str, nested: bool = False) -> _Override:
    where = f'{source}: [{section}."{pattern}"]'
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a table")
    entry = dict(entry)
    dialects: dict[str, _Override] = {}
    for name in DIALECT_SECTIONS:
        if isinstance(entry.get(name), dict):
            if nested:
                raise ValueError(f"{where}: a dialect table cannot hold another one ({name})")
            dialects[name] = _parse_override(section, f"{pattern}.{name}", entry.pop(name), source, nested=True)
    base = entry.pop("base", None)
    if base is not None and base not in BUILTIN:
        raise ValueError(f"{where}: unknown base profile {base!r}; built-ins are {sorted(BUILTIN)}")
    raw_input = entry.pop("input", None)
    modalities = None
    if raw_input is not None:
        if not isinstance(raw_input, list) or not all(isinstance(x, str) for x in raw_input):
            raise ValueError(f"{where}: input must be a list of modality names, e.g. [\"text\", \"image\"]")
        modalities = frozenset(raw_input)
    bad = [k for k in entry if k not in FLAGS]
    if bad:
        raise ValueError(f"{where}: unknown flag(s) {bad}; flags are {list(FLAGS)}")
    try:
        Profile(name="check", **entry)
    except ValidationError as e:
        raise ValueError(f"{where}: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}") from e
    return _Override(pattern.lower() if section == "hosts" else pattern, base, entry, modalities, dialects)


def load_table(path: str | None) -> ProfileTable:
    """The profiles file at ``path`` (None: built-ins only); raises ValueError with the reason."""
    if not path:
        return ProfileTable()
    p = Path(path).expanduser()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"cannot read profiles file {p}: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"profiles file {p} is not valid TOML: {e}") from e
    return parse_table(data, str(p))
