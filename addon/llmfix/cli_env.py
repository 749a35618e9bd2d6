"""What the client's environment says about going through llmfix: the known LLM hosts its ``NO_PROXY`` sends around.

The clients that honour ``HTTPS_PROXY`` honour ``NO_PROXY`` too: Gemini CLI (its ``HTTPS_PROXY`` becomes undici's
``EnvHttpProxyAgent``, which reads ``NO_PROXY``; google-gemini/gemini-cli ``packages/core/src/utils/fetch.ts``),
Codex, curl, Python's urllib. A host listed there is reached directly and llmfix never sees its requests. The
launcher keeps the user's ``NO_PROXY`` as it is (it may list hosts reachable only directly) and says which of the
hosts llmfix has a profile for it sends around llmfix, so that "0 to LLM APIs" in the summary has a reason.

Matching takes the widest of the clients' rules, so a warning may name a host one client would still send through
llmfix: curl and Python's ``proxy_bypass_environment`` let a name cover its subdomains (``googleapis.com`` covers
``generativelanguage.googleapis.com``); undici only with a leading ``.`` or ``*.``
(nodejs/undici ``lib/dispatcher/env-http-proxy-agent.js``); ``*`` alone covers every host; a ``:port`` suffix is
ignored (an API is on 443 anyway).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from llmfix.hosts import BUILTIN_HOSTS

NO_PROXY_VARS = ("NO_PROXY", "no_proxy")
_SEPARATORS = re.compile(r"[,\s]+")
_PORT = re.compile(r":\d+$")


def no_proxy(env: Mapping[str, str]) -> str:
    """The ``NO_PROXY`` a client reads from ``env`` (upper case first, as undici and curl read it)."""
    return next((env[name] for name in NO_PROXY_VARS if env.get(name, "").strip()), "")


def entries(value: str) -> list[str]:
    """``NO_PROXY``'s entries, lower case, without a port or the leading ``*``/``.``; ``*`` stays ``*``."""
    out = []
    for raw in _SEPARATORS.split(value.strip().lower()):
        entry = _PORT.sub("", raw)
        if entry == "*" or (entry := entry.lstrip("*").lstrip(".")):
            out.append(entry)
    return out


def bypassed(value: str, hosts: Iterable[str]) -> list[str]:
    """The ``hosts`` (patterns with ``*``, as the profiles name them) that ``NO_PROXY`` = ``value`` sends around a
    proxy; a pattern is tried on a name it matches (``*`` read as one label)."""
    found = entries(value)
    if "*" in found:
        return list(hosts)
    out = []
    for pattern in hosts:
        host = pattern.lower().replace("*", "x")
        if any(host == e or host.endswith("." + e) for e in found):
            out.append(pattern)
    return out


def known_hosts() -> list[str]:
    """The hosts llmfix has a built-in profile for."""
    return [pattern for pattern, _ in BUILTIN_HOSTS]


def no_proxy_warning(env: Mapping[str, str]) -> str | None:
    """One line naming the known LLM hosts the client's ``NO_PROXY`` sends around llmfix; None when it sends none."""
    value = no_proxy(env)
    if not value:
        return None
    hosts = bypassed(value, known_hosts())
    if not hosts:
        return None
    if "*" in entries(value):
        return "llmfix: NO_PROXY is *: a client that honours it reaches every host directly, around llmfix"
    shown = ", ".join(hosts[:6]) + (f" and {len(hosts) - 6} more" if len(hosts) > 6 else "")
    them = "them" if len(hosts) > 1 else "it"
    return (f"llmfix: NO_PROXY covers {shown}: a client that honours it reaches {them} directly, around llmfix "
            f"(take {them} out of NO_PROXY for llmfix to see those requests)")
