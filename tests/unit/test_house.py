"""The house rules a newcomer relies on: small modules, and reasons in words rather than issue numbers that a
reader of the repository cannot look up."""

from __future__ import annotations

import ast
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


# -- one place per dialect ---------------------------------------------------------------------------------------

DIALECT_NAMES = frozenset({"chat", "responses", "messages", "gemini"})
DIALECT_OBJECTS = frozenset(n.upper() for n in DIALECT_NAMES)
MAX_SPECIFIC = 30
MAX_SPECIFIC_PER_MODULE = 3


def _specific(tree: ast.AST) -> list[tuple[int, str]]:
    """Each place a module names one specific dialect: an import from that dialect's folder, the dialect object
    (``CHAT``, ``Dialect.CHAT``), its name compared or looked up (``dialect == "chat"``, ``named("chat")``), or
    named in a repair's declaration (``needles={"chat": …}``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["llmfix", "dialects"] and (
                    (len(parts) > 2 and parts[2] in DIALECT_NAMES)
                    or (len(parts) == 2 and any(a.name in DIALECT_NAMES for a in node.names))):
                found.append((node.lineno, f"from {node.module} import …"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.split(".")[:2] == ["llmfix", "dialects"] and len(a.name.split(".")) > 2
                      and a.name.split(".")[2] in DIALECT_NAMES]
        elif isinstance(node, ast.Name) and node.id in DIALECT_OBJECTS:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in DIALECT_OBJECTS:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Compare):
            found += [(node.lineno, f"compared with {c.value!r}") for c in (node.left, *node.comparators)
                      if isinstance(c, ast.Constant) and c.value in DIALECT_NAMES]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "named":
            found += [(node.lineno, f"named({a.value!r})") for a in node.args
                      if isinstance(a, ast.Constant) and a.value in DIALECT_NAMES]
        elif isinstance(node, ast.keyword) and node.arg == "needles" and isinstance(node.value, ast.Dict):
            found += [(k.lineno, f"needles[{k.value!r}]") for k in node.value.keys
                      if isinstance(k, ast.Constant) and k.value in DIALECT_NAMES]
    return found


def test_dialect_knowledge_lives_in_its_folder() -> None:
    """Outside ``dialects/`` (and ``profiles.py``, which maps hosts to dialects) code asks the dialect it is given;
    a repair serving one dialect names it in its declaration. So a new dialect is a folder, not edits everywhere."""
    per_module = {}
    for p in _sources(PACKAGE):
        rel = p.relative_to(PACKAGE)
        if rel.parts[0] == "dialects" or rel.as_posix() == "profiles.py":
            continue
        if found := _specific(ast.parse(p.read_text(encoding="utf-8"))):
            per_module[rel.as_posix()] = found
    crowded = {m: f for m, f in per_module.items() if len(f) > MAX_SPECIFIC_PER_MODULE}
    total = sum(len(f) for f in per_module.values())
    assert not crowded, f"modules naming specific dialects more than {MAX_SPECIFIC_PER_MODULE} times: {crowded}"
    assert total <= MAX_SPECIFIC, f"{total} references to specific dialects outside dialects/: {per_module}"


def test_the_count_of_specific_references_sees_each_form() -> None:
    source = '''
from llmfix.dialects.chat import wire as ch
from llmfix.dialects import registry
import llmfix.dialects.responses.tools
x = CHAT
y = Dialect.MESSAGES
if dialect == "gemini": pass
d = named("chat")
R = Repair(NAME, apply, needles={"messages": (b"x",)})
z = body.get("messages")  # a field name, not a dialect
'''
    assert [what for _, what in _specific(ast.parse(source))] == [
        "from llmfix.dialects.chat import …", "import llmfix.dialects.responses.tools", "CHAT", ".MESSAGES",
        "compared with 'gemini'", "named('chat')", "needles['messages']"]


# -- no import cycle -------------------------------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    out = {}
    for p in _sources(PACKAGE):
        parts = list(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``name`` imports, anywhere in it: at the top, inside functions, under
    ``TYPE_CHECKING``. ``from a.b import c`` imports ``a.b.c`` when that is a module, else ``a.b``."""

    def known(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {t for a in node.names if a.name.startswith("llmfix") and (t := known(a.name))}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([node.module] if node.module else [])])
            if base.startswith("llmfix"):
                out |= {t for a in node.names if (t := known(f"{base}.{a.name}"))}
    out.discard(name)
    return out


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_the_packages_modules() -> None:
    modules = _modules()
    edges = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert "llmfix.dialects.registry" in edges["llmfix.route"]  # the graph sees imports
    assert not _cycles(edges), f"import cycles: {_cycles(edges)}"


def test_the_cycle_finder_finds_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# -- references a reader can follow ---------------------------------------------------------------------------

UNSHIPPED = re.compile(r"\.\./shared|session-killers|wire-formats|\bSK ?§|\bWF ?(§|R[0-9])|DESIGN(\.md)? ?§|"
                       r"\bBug B[0-9]|\bDESIGN B[0-9]|reference/[a-z-]+\.md")


def test_no_reference_to_a_document_the_repository_does_not_ship() -> None:
    """Evidence is cited as a public source (``owner/repo #N``, a URL) or a file the repository ships; the
    documents a session worked from are not in the repository, so a reader cannot follow them."""
    cited = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in _sources(PACKAGE)
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if UNSHIPPED.search(line)]
    assert not cited, "cite the public source, or a file the repository ships:\n" + "\n".join(cited)


def test_every_repository_path_a_module_names_exists() -> None:
    """A path a docstring or comment gives as evidence (``tests/fixtures/…``, ``docs/…``) is in the repository (a
    command's example output, such as ``flows/my-bug.flow``, is no evidence)."""
    path = re.compile(r"\b((?:tests|docs|flows|bench)/(?!my-)[\w./*-]+\.(?:json|md|py|flow|txt))")
    missing = [f"{p.relative_to(ROOT)}: {m}" for p in _sources(PACKAGE)
               for m in path.findall(p.read_text(encoding="utf-8")) if not list(ROOT.glob(m))]
    assert not missing, "\n".join(missing)
