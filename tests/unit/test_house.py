"""The house rules a newcomer relies on: small modules, and reasons in words rather than issue numbers that a
reader of the repository cannot look up."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "addon" / "llmfix"
MAX_LINES = 400
ISSUE_NUMBER = re.compile(r"\bissues? #?[0-9]+\b|\(issue\b|\(#[0-9]+\)", re.IGNORECASE)


def _sources(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if ".venv" not in p.parts)


def test_no_module_of_the_package_is_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _sources(PACKAGE)
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these by what they do: {long}"


def test_no_source_cites_an_issue_number() -> None:
    cited = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in _sources(PACKAGE, ROOT / "tests", ROOT / "bench") if p != Path(__file__).resolve()
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if ISSUE_NUMBER.search(line)]
    assert not cited, "say the reason instead:\n" + "\n".join(cited)


def test_every_repair_module_opens_with_its_reason() -> None:
    bare = [p.name for p in _sources(PACKAGE / "repairs")
            if p.name != "__init__.py" and not p.read_text(encoding="utf-8").lstrip().startswith('"""')]
    assert not bare, f"a repair module says which bug, which client and the evidence: {bare}"
