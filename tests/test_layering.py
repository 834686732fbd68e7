"""The package's structure, read from its imports (docs/architecture.md): every import points down.

Every ``import`` of the package's own modules counts, at the top of a file or inside a function (it runs too);
only ``if TYPE_CHECKING:`` blocks, which never run, are left out. The test fails on

- an import loop between files (two modules that reach each other, however far round);
- an import of a room from a room above it (the ranks below), the CLI from anywhere below it included;
- ``sandbox/`` or ``domains/`` importing the runtime, the trainers, the integrations (or anything above them);
- a private name (``_name``, a module or a name in one) imported from another package.

Imports of heavy third-party packages may stay inside functions (``import rewardlang`` and ``rewardlang check``
import no torch); that is not checked here (tests/test_lean_core.py checks what they import).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rewardlang"

#: the rooms, bottom to top: a module may import its own room and the rooms below it, never one above. A room is a
#: top-level module or subpackage of ``rewardlang``; those not named here are "base" (rank 0).
RANKS: dict[str, int] = {
    # the shared vocabulary: types, syntax trees, diagnostics, signatures, the version, files in and out
    "base": 0,
    # the language: parsing, checking, generating code, formatting
    "parser": 1, "ir": 1, "checker": 1, "codegen": 1, "fmt": 1,
    # what the runtime's functions stand on and never import back
    "sandbox": 2, "domains": 2,
    # the executor and its function library
    "runtime": 3,
    # compiling specs into programs, and the libraries of the commands over them
    "compiler": 4, "explain": 4, "report": 4, "datacheck": 4, "lsp": 4, "datasets": 4,
    # the public facade (rewardlang.load): what users import, never the package itself
    "rewardlang": 5,
    # training, and the engines' adapters (which reuse the trainers' alignment)
    "trainers": 6, "integrations": 7,
    # the shell
    "cli": 8, "__main__": 9,
}
#: rooms that must not import these (beyond their ranks: the issue's rule, stated as such)
FORBIDDEN = {"sandbox": {"runtime", "trainers", "integrations"}, "domains": {"runtime", "trainers", "integrations"}}


@dataclass(frozen=True)
class Import:
    source: str   # the importing module
    target: str   # the imported module (a name in a module resolves to the module)
    name: str     # the name taken from it ("" for ``import x``)
    line: int


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                for child in node.body:
                    out.update(id(n) for n in ast.walk(child))
    return out


def imports(mods: dict[str, Path] | None = None) -> list[Import]:
    """Every import of the package's own modules, in every file, wherever it stands in the file."""
    mods = modules() if mods is None else mods

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _type_checking_only(tree)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                wanted = [(a.name, "") for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` a name of mod
                wanted = [(f"{base}.{a.name}", "") if f"{base}.{a.name}" in mods else (base, a.name)
                          for a in node.names]
            else:
                continue
            for target, name in wanted:
                if target.split(".")[0] != "rewardlang":
                    continue
                resolved = resolve(target)
                if resolved is not None and resolved != mod:
                    out.append(Import(mod, resolved, name, node.lineno))
    return out


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "rewardlang"
    return parts[1] if parts[1] in RANKS else "base"


def package_of(module: str, mods: dict[str, Path]) -> str:
    return module if mods[module].name == "__init__.py" else module.rpartition(".")[0]


def loops(found: list[Import]) -> list[list[str]]:
    """The import loops: strongly connected sets of two or more modules (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for i in found:
        graph.setdefault(i.source, set()).add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def upward(found: list[Import]) -> list[str]:
    """Imports of a room from a room ranked above it, and the rooms' forbidden imports."""
    out = []
    for i in found:
        a, b = room(i.source), room(i.target)
        if a == b:
            continue
        if RANKS[b] > RANKS[a] or b in FORBIDDEN.get(a, ()):
            out.append(f"{i.source}:{i.line} imports {i.target} ({a}, rank {RANKS[a]} -> {b}, rank {RANKS[b]})")
    return out


def private_across(found: list[Import], mods: dict[str, Path]) -> list[str]:
    """Private names (``_x``, not ``__x__``) and private modules imported from another package."""
    def private(n: str) -> bool:
        return n.startswith("_") and not n.startswith("__")

    out = []
    for i in found:
        here = package_of(i.source, mods)
        mod_name = i.target.rpartition(".")[2]
        if i.name and private(i.name) and package_of(i.target, mods) != here:
            out.append(f"{i.source}:{i.line} imports {i.target}.{i.name}")
        elif private(mod_name) and i.target.rpartition(".")[0] != here:
            out.append(f"{i.source}:{i.line} imports the private module {i.target}")
    return out


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Path], list[Import]]:
    mods = modules()
    return mods, imports(mods)


def test_no_import_loops(graph) -> None:
    _, found = graph
    assert loops(found) == []


def test_every_import_points_down(graph) -> None:
    _, found = graph
    assert upward(found) == []


def test_nothing_below_the_cli_imports_it(graph) -> None:
    _, found = graph
    assert [f"{i.source}:{i.line}" for i in found
            if room(i.target) == "cli" and room(i.source) not in ("cli", "__main__")] == []


def test_no_private_name_across_packages(graph) -> None:
    mods, found = graph
    assert private_across(found, mods) == []


def test_every_room_is_ranked() -> None:
    # a new top-level module lands in "base" (rank 0): it may then import only base modules, which the test above
    # says loudly; a new subpackage must be given its rank here and in docs/architecture.md
    subpackages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert subpackages <= set(RANKS)


# ---------------------------------------------------------------------- the checks themselves, on made-up trees

def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        p = tmp_path / "rewardlang" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return modules(tmp_path / "rewardlang")


def test_a_loop_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {"__init__.py": "", "runtime/__init__.py": "",
                            "runtime/a.py": "from rewardlang.runtime import b\n",
                            "runtime/b.py": "def f():\n    from rewardlang.runtime.a import x\n",
                            "runtime/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from rewardlang.runtime import a\n"})
    assert loops(imports(mods)) == [["rewardlang.runtime.a", "rewardlang.runtime.b"]]


def test_upward_imports_and_private_names_are_found(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {"__init__.py": "", "sandbox/__init__.py": "", "runtime/__init__.py": "",
                            "cli/__init__.py": "", "cli/common.py": "def _err(): pass\n",
                            "sandbox/pool.py": "from rewardlang.runtime.api import LRUCache\n",
                            "runtime/api.py": "def g():\n    from rewardlang.cli.common import _err\n"})
    found = imports(mods)
    assert [u.split(" (")[0] for u in upward(found)] == [
        "rewardlang.runtime.api:2 imports rewardlang.cli.common", "rewardlang.sandbox.pool:1 imports rewardlang.runtime.api"]
    assert private_across(found, mods) == ["rewardlang.runtime.api:2 imports rewardlang.cli.common._err"]
