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

    [hosts."localhost:8000"]            # image limits are whole numbers and a list of formats
    image_formats = ["jpeg", "png"]     # ([] or 0: no such limit)
    image_max_side = 0

Evidence for each built-in flag (the upstreams' texts, their public sources) is in ``docs/evidence.md``.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from llmfix import catalogue
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import NAMES
from llmfix.images.shape import FORMATS

IMAGE_FORMATS = FORMATS
"""The image formats a profile may name: those llmfix's image module reads."""
_ALIASES = {"jpg": "jpeg", "svg+xml": "svg", "tif": "tiff"}


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    catalogue: str | None = None
    """The models.dev provider id used to look up a model's input modalities."""
    responses_tool_output_array: bool = True
    """May a Responses ``function_call_output``/``custom_tool_call_output`` output be an array (OpenAI yes, xAI no)."""
    responses_image_requires_url: bool = False
    """Must every Responses ``input_image`` carry an ``image_url`` (xAI: file_id only is rejected)."""
    chat_tool_media: bool = False
    """May a Chat ``role:"tool"`` message carry image/file/audio parts (OpenAI, DeepSeek: no)."""
    chat_tool_text_array: bool = True
    """May a Chat tool message's content be an array of text parts (OpenAI) rather than only a string (DeepSeek)."""
    anthropic_tool_result_media: bool = True
    """May an Anthropic ``tool_result`` carry image blocks (Anthropic docs)."""
    media_input: bool = True
    """May a request carry image/file parts at all. False: every model is text-only, whatever the catalogue
    says or does not know (DeepSeek answers ``unknown variant `image_url`, expected `text``` for any
    model), unless a profiles-file ``input`` names its modalities."""
    anthropic_system_messages: bool = True
    """May an Anthropic ``messages[]`` entry have ``role:"system"`` (mid-conversation system messages, sent by Claude
    Code since 2.1.154). False: folded into user messages (DeepSeek 400 ``unknown variant `system` ``, GLM 422 ``Input
    should be 'user' or 'assistant'``, MiniMax 400 ``(2013)``; docs/evidence.md, "Anthropic-compatible vendors")."""
    chat_reasoning_content: bool = False
    """Must a Chat assistant turn be replayed with the ``reasoning_content`` it was answered with (thinking mode;
    docs/evidence.md, "Reasoning and thinking replay": DeepSeek 400 ``The `reasoning_content` in the thinking mode
    must be passed back to the API.``, Kimi 400 ``thinking is enabled but reasoning_content is missing in assistant
    tool call message at index N``). True: restore-reasoning-content gives it back from memory where it was lost."""
    anthropic_signed_thinking: bool = False
    """Does the upstream verify the ``signature`` of every thinking block against its own (Anthropic:
    ``messages.N.content.M: Invalid `signature` in `thinking` block``, anthropics/anthropic-sdk-python #1598).
    True: blocks whose form shows they are not its own (no or an empty signature, a message-UUID signature) leave
    the older turns up front; a rejection naming a block teaches the rest on any upstream (drop-foreign-thinking)."""
    learn_refused_fields: bool = True  # strip-refused-fields; not Anthropic's: its refusals depend on model and beta
    # -- images (fit-images): what one inline image may be; None / a missing value: no such limit -----------
    image_formats: tuple[str, ...] | None = None
    """The image formats taken as they are (``jpeg``, ``png``, ``gif``, ``webp``, ``bmp``, ``tiff``, ``svg``); another
    is converted (an SVG rasterized). None: any format."""
    image_gif_animated: bool = True
    """May a GIF be animated. False: its first frame is sent as a still (OpenAI: "non-animated GIF")."""
    image_media_type_checked: bool = False
    """Does the upstream check an image's declared type against its bytes (Anthropic: 400 ``Image does not match
    the provided media type image/png``). True: a mislabelled image gets its true type."""
    image_undecodable_refused: bool = False
    """Does the upstream refuse an image it cannot decode (Anthropic ``Could not process image``, OpenAI ``The image
    data you provided does not represent a valid image``). True: an image llmfix cannot decode either becomes a
    placeholder, and every pixel of an image is checked. False: llmfix reads only the headers of images that fit,
    and one it cannot read (a HEIC or AVIF photo, which some upstreams take) is sent as it is."""
    image_limits_anthropic: bool = False
    """Does the upstream hold images to Anthropic's limits (a gateway in front of Claude). True: they apply on top
    of this profile's own image limits, the stricter of each. Learned from Anthropic's rejection texts."""
    image_limits_openai: bool = False
    """Does the upstream hold images to OpenAI's limits (a gateway in front of GPT). True: as for Anthropic's."""
    image_max_base64: int | None = None
    """Characters of base64 text one image may take (Anthropic measures its 5 MB there: 5242880)."""
    image_max_bytes: int | None = None
    """Bytes one image may take once decoded from base64."""
    image_max_side: int | None = None
    """Pixels one image may have on its long side."""
    image_many_count: int | None = None
    """With more images than this in one request (counted over the whole request, as the upstream counts)..."""
    image_many_side: int | None = None
    """... each may have at most this many pixels on its long side (Anthropic: 20 images, then 2000 px)."""

    @field_validator("image_formats", mode="before")
    @classmethod
    def _formats(cls, value: Any) -> Any:
        if value is None or (isinstance(value, list | tuple) and not value):
            return None  # [] in a profiles file: no format check
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"must be a list of image formats; known: {list(IMAGE_FORMATS)}")
        bare = (v.strip().lower().removeprefix("image/") for v in value)
        names = tuple(dict.fromkeys(_ALIASES.get(n, n) for n in bare))
        unknown = [v for v in names if v not in IMAGE_FORMATS]
        if unknown:
            raise ValueError(f"unknown image format(s) {unknown}; known: {list(IMAGE_FORMATS)}")
        return names

    @field_validator("image_max_base64", "image_max_bytes", "image_max_side", "image_many_count", "image_many_side",
                     mode="before")
    @classmethod
    def _limit(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, int)):
            raise ValueError("must be a whole number (0: no limit)")
        if value is not None and value < 0:
            raise ValueError("must be 0 (no limit) or more")
        return value or None


TEXT_ONLY = frozenset({"text"})
Learned = tuple[tuple[str, bool], ...]
"""Flags learned for one upstream from its rejections, sorted by name (see ``ProfileTable.resolve``)."""
FLAGS = tuple(n for n, f in Profile.model_fields.items() if f.annotation is bool)
"""The yes/no flags: what a profiles file may set, and all that llmfix can learn from a rejection (retry/)."""
SETTINGS = tuple(n for n in Profile.model_fields if n not in ("name", "catalogue"))
"""Everything a profiles file may set: the flags and the image limits (whole numbers, a list of formats)."""

# Image limits: the texts and their public sources are in docs/evidence.md, "Image limits per upstream".
# Anthropic: ≤ 5 MB per image measured on the base64 string (5242880; a 4 MB screenshot is over it: "image
# exceeds 5 MB maximum: 11641928 bytes > 5242880 bytes"), ≤ 8000 px a side, ≤ 2000 px once a request holds
# more than 20 images ("… for many-image requests: 2000 pixels"), JPEG/PNG/GIF/WebP only (its vision docs,
# lobehub/lobehub #14711, anthropics/claude-code #4778, #49537); the declared media_type is checked against the
# bytes ("Image does not match the provided media type image/png", anthropics/claude-code #6300, #13131, #15746;
# any other type: "…media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", #8184).
_ANTHROPIC_IMAGES: dict[str, Any] = dict(
    image_formats=("jpeg", "png", "gif", "webp"), image_media_type_checked=True, image_max_base64=5_242_880,
    image_max_side=8000, image_many_count=20, image_many_side=2000, image_undecodable_refused=True)
# OpenAI: PNG, JPEG, WebP and non-animated GIF ("You uploaded an unsupported image…" invalid_image_format,
# STranslate/STranslate #277; Codex's view_image of an SVG: "The image data you provided does not represent a valid
# image…", openai/codex #7459). Size: the spec caps a tool output's image_url at 20971520 characters
# (openai/openai-openapi), which, less a data URL's head (``data:image/jpeg;base64,``), leaves 20971496 for its base64:
# stricter than the guide's "20 MB per image" (a mirror, UNCERTAIN), and applied to every image, as the strict reading.
_OPENAI_IMAGES: dict[str, Any] = dict(
    image_formats=("png", "jpeg", "webp", "gif"), image_gif_animated=False, image_max_base64=20_971_496,
    image_undecodable_refused=True)
# xAI: JPEG and PNG only (docs.x.ai, image understanding; a WebP screenshot: "Invalid request content: Downloaded
# response does not contain a valid JPG or PNG image."). Size UNCERTAIN: 10 MiB per an older docs mirror, 20 MiB
# per docs.x.ai; the stricter is taken. Its reported 400 for images under 8×8 px is secondhand: not acted on.
_XAI_IMAGES: dict[str, Any] = dict(image_formats=("jpeg", "png"), image_max_bytes=10 * 1024 * 1024,
                                   image_undecodable_refused=True)
# An upstream llmfix does not know (Gemini's OpenAI-compatible API, Ollama, vLLM, LM Studio, Mistral, Groq, a
# company gateway) is assumed to take the images the client sends: changing an image on a guess loses data, as
# dropping it for a model the catalogue does not know would. Only what no LLM upstream takes is converted,
# losslessly where the format allows (SVG, BMP and TIFF to PNG); an image llmfix cannot read (HEIC, AVIF, a
# truncated file) goes as it is. A gateway in front of Claude or GPT says so in its first rejection of an image
# (retry/rejections.py): it learns that vendor's limits, costs one resend, and is fitted up front from then on.
_ANY_UPSTREAM_IMAGES: dict[str, Any] = dict(image_formats=("jpeg", "png", "gif", "webp"))
VENDOR_IMAGES: dict[str, dict[str, Any]] = {"image_limits_anthropic": _ANTHROPIC_IMAGES,
                                           "image_limits_openai": _OPENAI_IMAGES}
"""The flags that put a vendor's image limits on a profile, and those limits."""

BUILTIN: dict[str, Profile] = {
    p.name: p
    for p in (
        # An unknown host: the strict reading of the public specs for request shapes, and for images only what no
        # upstream takes (see _ANY_UPSTREAM_IMAGES); a gateway's vendor limits are learned from its rejections.
        Profile(name="spec", **_ANY_UPSTREAM_IMAGES),
        Profile(name="openai", catalogue="openai", **_OPENAI_IMAGES),
        Profile(
            name="xai",
            catalogue="xai",
            responses_tool_output_array=False,
            responses_image_requires_url=True,
            **_XAI_IMAGES,
        ),
        # Thinking mode is on by default for DeepSeek's V4 models (api-docs.deepseek.com thinking_mode): the Chat
        # API then wants each turn's reasoning_content back. Whether a request has it on is not judged: the
        # repair only gives back what the answer carried, and DeepSeek ignores it where it does not need it.
        Profile(name="deepseek", catalogue="deepseek", chat_tool_text_array=False, media_input=False,
                chat_reasoning_content=True),
        # DeepSeek's Messages API reference lists image blocks (base64, url, file) as supported, in user
        # content and in tool_result content: no media_input=false here, no catalogue (its text-only entries
        # describe the Chat API). Mid-conversation system messages: 400. Its compatibility table lists base64 images
        # as JPEG, PNG, GIF and WebP (api-docs.deepseek.com anthropic_api); no size limit is published. Evidence:
        # docs/evidence.md, "Anthropic-compatible vendors".
        Profile(name="deepseek-anthropic", anthropic_system_messages=False,
                image_formats=("jpeg", "png", "gif", "webp"), image_undecodable_refused=True),
        Profile(name="anthropic", catalogue="anthropic", anthropic_signed_thinking=True, learn_refused_fields=False,
                **_ANTHROPIC_IMAGES),
        # A gateway to every vendor's models, Anthropic's among them; it publishes no image limits of its own for
        # inline images (its one known image text is for downloaded ones: 413 "Downloaded image content cannot
        # exceed 30MB", artokun/comfyui-mcp #2221), and relays each vendor's rejection in ``metadata.raw``
        # (LaoshuBaby/liulianmao #11: Anthropic's media-type text): as for an unknown host, the vendor's limits are
        # learned from it. Learned flags are per upstream, not per model: once learned, every model behind it gets
        # the vendor's limits (the stricter; images still go, smaller).
        Profile(name="openrouter", catalogue="openrouter", **_ANY_UPSTREAM_IMAGES),
        # Anthropic-compatible endpoints (docs/evidence.md, "Anthropic-compatible vendors"). The Chat side of these
        # vendors gets the spec reading; only the Messages side has known rejections.
        Profile(name="glm", catalogue="zhipuai"),
        Profile(name="glm-anthropic", catalogue="zhipuai", anthropic_system_messages=False),  # 422
        Profile(name="qwen", catalogue="alibaba"),
        Profile(name="qwen-anthropic", catalogue="alibaba", anthropic_system_messages=False),  # 400
        Profile(name="minimax", catalogue="minimax"),
        Profile(name="minimax-anthropic", catalogue="minimax", anthropic_system_messages=False),  # 400 (2013)
        # Kimi's thinking models (kimi-k2-thinking, K2.5 and later) on its OpenAI-compatible API: 400 ``thinking is
        # enabled but reasoning_content is missing…`` (continuedev/continue #11600, mastra-ai/mastra #12592). UNCERTAIN
        # which models and requests have thinking on; a turn answered without reasoning gave none to restore.
        Profile(name="moonshot", catalogue="moonshotai", chat_reasoning_content=True),
        # Kimi publishes no contract for its Anthropic endpoint; no rejection text is known. Inference: its
        # chat-template backend takes no system turn mid-conversation, like the others; the fold sends what
        # Claude Code itself sends to models without the feature, so it is safe if Kimi would accept them.
        Profile(name="moonshot-anthropic", catalogue="moonshotai", anthropic_system_messages=False),
    )
}

VARIANTS: dict[str, dict[str, str]] = {
    "deepseek": {"messages": "deepseek-anthropic"},
    "glm": {"messages": "glm-anthropic"},
    "qwen": {"messages": "qwen-anthropic"},
    "minimax": {"messages": "minimax-anthropic"},
    "moonshot": {"messages": "moonshot-anthropic"},
}
"""A vendor's profile per dialect: the upstream is host AND dialect. A ``base`` in the profiles file picks
the variant too, so ``base = "deepseek"`` on a gateway gives ``deepseek-anthropic`` to its Messages requests."""

DIALECT_SECTIONS = NAMES

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
    return BUILTIN[VARIANTS.get(name, {}).get(str(dialect), name) if dialect is not None else name]


@dataclass(frozen=True, slots=True)
class Resolved:
    """The profile for one request, and what its model takes (None: unknown, assume everything)."""

    profile: Profile
    modalities: frozenset[str] | None


@dataclass(frozen=True, slots=True)
class _Override:
    pattern: str
    base: str | None
    flags: dict[str, Any]  # profile field → value (a flag, or an image limit)
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
        if flags := {f: v for f, v in learned if f in FLAGS}:  # not a refused field (strip-refused-fields reads it)
            profile = profile.model_copy(update={**flags, "name": f"{profile.name}+learned"})
        modality_override: frozenset[str] | None = None
        matching = [o for o in self.hosts if any(fnmatch.fnmatchcase(n, o.pattern) for n in names)]
        if model:
            matching += [o for o in self.models if fnmatch.fnmatchcase(model, o.pattern)]
        for o in matching:
            for step in (o, o.dialects.get(str(dialect))) if dialect is not None else (o,):
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
    bad = [k for k in entry if k not in SETTINGS]
    if bad:
        raise ValueError(f"{where}: unknown flag(s) {bad}; flags are {list(SETTINGS)}")
    try:
        checked = Profile(name="check", **entry)
    except ValidationError as e:
        raise ValueError(f"{where}: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}") from e
    values = {k: getattr(checked, k) for k in entry}  # as validated: a TOML list becomes a tuple, 0 no limit
    return _Override(pattern.lower() if section == "hosts" else pattern, base, values, modalities, dialects)


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
