"""Upstream profiles: what an upstream accepts, as flags that repairs read (never host names).

An upstream is a host AND a dialect: a vendor's Chat API and its Anthropic-compatible Messages API on
one host accept different things (DeepSeek's Chat API rejects every image, its ``/anthropic`` Messages
API takes image blocks). A profile is chosen by the request's host (built-ins in :mod:`llmfix.upstreams`; an unknown
host gets ``spec``, the strict reading of the public OpenAI/Anthropic specs), then by the dialect (the
``deepseek`` family on a Messages request is ``deepseek-anthropic``, see :data:`VARIANTS`), then
adjusted by the user's profiles file, by host and by model. The file is TOML::

    [hosts."gateway.internal:8443"]     # host or host:port; glob patterns allowed
    base = "xai"                        # start from a built-in profile (its dialect variant, if any)
    chat_tool_media = false             # then override any flag

    [hosts."gateway.internal:8443".messages]   # only for this dialect (chat, responses, messages, gemini)
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

from pydantic import ValidationError

from llmfix import catalogue
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import NAMES
from llmfix.hosts import BUILTIN_HOSTS
from llmfix.profile import FLAGS, IMAGE_FORMATS, SETTINGS, TEXT_ONLY, Learned, Profile
from llmfix.upstreams import BUILTIN, VARIANTS, VENDOR_IMAGES

__all__ = ["BUILTIN", "BUILTIN_HOSTS", "FLAGS", "IMAGE_FORMATS", "SETTINGS", "TEXT_ONLY", "VARIANTS", "VENDOR_IMAGES",
           "Learned", "Profile", "ProfileTable", "Resolved", "builtin", "load_table", "parse_table"]

DIALECT_SECTIONS = NAMES

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
