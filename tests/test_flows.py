"""Every recorded flow in ``flows/`` replayed through llmfix gives the result its ``.expect.json`` records.

A user's failing flow becomes a test in one step (``llmfix.capture`` writes both files). The
flows are replayed the way ``mitmdump -nr flows/<file> -s addon/fix.py`` does it — each one through all
of mitmproxy's hooks (``master.load_flow``), in file order, with one fresh llmfix — and also by a real
``mitmdump -nr`` subprocess, whose printed change lines must match.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http, io
from mitmproxy.test import taddons

from llmfix.proxy import ROUTE, LLMFix, flow_name
from llmfix.report.capture import KEYISH, REDACTED, expect_path, secret_name

ROOT = Path(__file__).resolve().parents[1]
FLOWS = ROOT / "flows"
FLOW_FILES = sorted(FLOWS.glob("*.flow"))
MITMDUMP = Path(sys.executable).parent / "mitmdump"
REPLAY_TIMEOUT = 90


def read_flows(path: Path) -> list[http.HTTPFlow]:
    with path.open("rb") as fo:
        flows = list(io.FlowReader(fo).stream())
    assert all(isinstance(f, http.HTTPFlow) for f in flows)
    return flows  # type: ignore[return-value]


def observed(f: http.HTTPFlow, warnings: list[str]) -> dict[str, Any]:
    """What llmfix did to a replayed flow, in the shape of an ``.expect.json`` entry."""
    r = f.request
    entry: dict[str, Any] = {"request": f"{r.method} {r.pretty_url}"}
    dialect = f.metadata.get(ROUTE)
    if dialect is None:
        return {**entry, "status": "ignored"}
    entry["dialect"] = dialect
    info = f.metadata.get("llmfix")
    prefix = f"llmfix: {flow_name(f)} left unchanged: "
    failures = [w.removeprefix(prefix) for w in warnings if w.startswith(prefix)]
    if isinstance(info, dict) and info.get("mode") == "repair":
        entry |= {"status": "repaired", "repairs": info["repairs"], "changes": info["lines"],
                  "conversation": info["after"]}
    elif failures:
        entry |= {"status": "failed", "reason": failures[0]}
    else:
        entry["status"] = "untouched"
    if r.raw_content:
        entry["body_sha256"] = hashlib.sha256(r.get_content(strict=False) or b"").hexdigest()
    return entry


async def replay(flows: list[http.HTTPFlow], options: dict[str, Any],
                 caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """Run ``flows`` in order through every hook of one fresh llmfix, as ``mitmdump -nr`` does."""
    fix = LLMFix()
    results = []
    with taddons.context(fix) as tctx:
        tctx.configure(fix, **options)
        for f in flows:
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="llmfix"):
                await tctx.master.load_flow(f)
            warnings = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.WARNING]
            results.append(observed(f, warnings))
    return results


def expected_of(path: Path) -> dict[str, Any]:
    sidecar = expect_path(path)
    assert sidecar.is_file(), f"{path.name} has no {sidecar.name}: write both with the llmfix.capture command"
    return json.loads(sidecar.read_text())


def _without_live(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "live"}


# -- the directory ------------------------------------------------------------------------------------------


def test_flows_directory_holds_the_issue_cases() -> None:
    names = {p.stem for p in FLOW_FILES}
    assert {"xai-responses-hoist-tool-media", "droid-two-images-turn2-untangle"} <= names
    orphans = [p.name for p in FLOWS.glob("*.expect.json") if not p.with_name(
        p.name.removesuffix(".expect.json") + ".flow").is_file()]
    assert not orphans, f"expectations without a flow file: {orphans}"


@pytest.mark.parametrize("path", FLOW_FILES, ids=lambda p: p.stem)
def test_recorded_flows_carry_no_secrets(path: Path) -> None:
    assert not KEYISH.search(path.read_bytes()), f"{path.name} holds an API-key-shaped string"
    for f in read_flows(path):
        assert f.metadata == {} and not f.marked
        for message in (f.request, f.response):
            if message is None:
                continue
            leaked = [(k, v) for k, v in message.headers.items(multi=True) if secret_name(k) and v != REDACTED]
            assert not leaked, f"{path.name}: secret-named headers kept their value: {leaked}"


# -- replay -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", FLOW_FILES, ids=lambda p: p.stem)
async def test_replay_gives_the_expected_result(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    doc = expected_of(path)
    flows = read_flows(path)
    assert len(flows) == len(doc["flows"]), f"{path.name}: {len(flows)} flows, {len(doc['flows'])} expectations"
    got = await replay(flows, doc.get("options", {}), caplog)
    for i, (have, want) in enumerate(zip(got, doc["flows"], strict=True)):
        want = _without_live(want)
        # readable parts first, so a failure shows a useful diff; then the exact body
        assert {k: v for k, v in have.items() if k != "body_sha256"} == {
            k: v for k, v in want.items() if k != "body_sha256"}, f"{path.name} flow {i}"
        assert have.get("body_sha256") == want.get("body_sha256"), f"{path.name} flow {i}: body differs"


@pytest.mark.timeout(REPLAY_TIMEOUT + 30)
@pytest.mark.parametrize("path", FLOW_FILES, ids=lambda p: p.stem)
def test_mitmdump_replays_the_file_offline_and_prints_the_changes(path: Path, tmp_path: Path) -> None:
    """``mitmdump -nr flows/<file> -s addon/fix.py --set llmfix_memory=:memory:`` prints each change line."""
    command = [str(MITMDUMP), "-nr", str(path), "-s", str(ROOT / "addon" / "fix.py"),
               "--set", "llmfix_memory=:memory:", "--set", f"confdir={tmp_path}"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=REPLAY_TIMEOUT,
                          stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    printed = re.findall(r"llmfix: \w{8} POST \S+ (.*)", output)
    expected = [line for entry in expected_of(path)["flows"] for line in entry.get("changes", [])]
    assert printed == expected, output
    assert "Traceback" not in output and "Addon error" not in output, output


def test_the_xai_flow_prints_hoist_tool_media_offline(tmp_path: Path) -> None:
    """The issue's own example, spelled out."""
    path = FLOWS / "xai-responses-hoist-tool-media.flow"
    command = [str(MITMDUMP), "-nr", str(path), "-s", str(ROOT / "addon" / "fix.py"),
               "--set", "llmfix_memory=:memory:", "--set", f"confdir={tmp_path}"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=REPLAY_TIMEOUT,
                          stdin=subprocess.DEVNULL)
    assert "hoist-tool-media: input[3]+1: new user message with 1 image from call_mock_1" in done.stdout
    assert "POST api.x.ai/v1/responses" in done.stdout


# -- the generator --------------------------------------------------------------------------------------------


def test_make_flows_regenerates_the_recorded_files(tmp_path: Path) -> None:
    """flows/*.flow come from flows/make_flows.py through llmfix.capture, byte for byte."""
    sys.path.insert(0, str(FLOWS))
    try:
        import make_flows  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(FLOWS))
    asyncio.run(make_flows.main(tmp_path))
    made = sorted(p.name for p in tmp_path.glob("*.flow"))
    assert made, "make_flows.py wrote nothing"
    for name in made:
        assert (FLOWS / name).is_file(), f"{name}: run `uv run python flows/make_flows.py`"
        assert (tmp_path / name).read_bytes() == (FLOWS / name).read_bytes(), (
            f"{name} differs from what make_flows.py writes now: run `uv run python flows/make_flows.py`")
