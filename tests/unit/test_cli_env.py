"""The launcher's reading of the client's NO_PROXY: which known LLM hosts it sends around llmfix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llmfix.cli_env import bypassed, entries, known_hosts, no_proxy, no_proxy_warning


@pytest.mark.parametrize(("value", "expected"), [
    ("", []),
    ("localhost,127.0.0.1", ["localhost", "127.0.0.1"]),
    (" .GoogleAPIs.com , *.x.ai:443\tapi.openai.com", ["googleapis.com", "x.ai", "api.openai.com"]),
    ("*", ["*"]),
    (",,", []),
])
def test_entries_are_lower_case_names_without_port_or_leading_wildcard(value: str, expected: list[str]) -> None:
    assert entries(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("localhost,127.0.0.1,::1", []),
    ("googleapis.com", ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com"]),
    (".googleapis.com", ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com"]),
    ("generativelanguage.googleapis.com:443", ["generativelanguage.googleapis.com"]),
    ("language.googleapis.com", []),  # a suffix of the name, not a domain of it
    ("*.openai.azure.com", ["*.openai.azure.com"]),  # a pattern is tried on a name it matches
    ("*", ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "*.openai.azure.com"]),
])
def test_bypassed_hosts(value: str, expected: list[str]) -> None:
    hosts = ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "*.openai.azure.com"]
    assert bypassed(value, hosts) == expected


def test_no_proxy_reads_the_upper_case_name_first_and_skips_blank_values() -> None:
    assert no_proxy({"NO_PROXY": "a.example", "no_proxy": "b.example"}) == "a.example"
    assert no_proxy({"NO_PROXY": "  ", "no_proxy": "b.example"}) == "b.example"
    assert no_proxy({}) == ""


def test_the_known_hosts_are_the_built_in_profiles_hosts() -> None:
    hosts = known_hosts()
    assert "generativelanguage.googleapis.com" in hosts and "cloudcode-pa.googleapis.com" in hosts
    assert "api.openai.com" in hosts


@pytest.mark.parametrize("env", [{}, {"NO_PROXY": "localhost,127.0.0.1"}, {"no_proxy": ".corp.example"}])
def test_no_warning_when_no_known_host_is_bypassed(env: dict[str, str]) -> None:
    assert no_proxy_warning(env) is None


def test_the_warning_names_the_bypassed_hosts() -> None:
    line = no_proxy_warning({"no_proxy": "localhost,.googleapis.com"})
    assert line is not None and line.startswith("llmfix: NO_PROXY covers ")
    assert "generativelanguage.googleapis.com" in line and "aiplatform.googleapis.com" in line
    assert "cloudcode-pa.googleapis.com" in line and " more" not in line  # six Google hosts: all named
    many = no_proxy_warning({"NO_PROXY": "googleapis.com,api.x.ai"})
    assert many is not None and "and 1 more" in many  # seven: six named
    assert "take them out of NO_PROXY" in line
    one = no_proxy_warning({"NO_PROXY": "api.x.ai"})
    assert one == ("llmfix: NO_PROXY covers api.x.ai: a client that honours it reaches it directly, around llmfix "
                   "(take it out of NO_PROXY for llmfix to see those requests)")


def test_a_star_sends_everything_around_llmfix() -> None:
    assert no_proxy_warning({"NO_PROXY": "*"}) == (
        "llmfix: NO_PROXY is *: a client that honours it reaches every host directly, around llmfix")


def test_naming_the_known_hosts_loads_no_profile() -> None:
    """The launcher reads the known hosts before it starts the client: without pydantic or the image package
    (importing them cost about half a second there)."""
    code = ("import sys; from llmfix import cli_env; cli_env.no_proxy_warning({'NO_PROXY': 'localhost'}); "
            "print(sorted(m for m in ('pydantic', 'llmfix.upstreams', 'llmfix.images') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "addon")})
    assert out.stdout.strip() == "[]"
