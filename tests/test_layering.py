"""The package's structure, read from its imports (docs/architecture.md): every import points down.

Every ``import`` of the package's own modules counts, at the top of a file, inside a function (it runs too), and
under ``if TYPE_CHECKING:`` (it never runs, but it ties the two files as much for a reader, a type checker and
the tools that draw the house: program.py and scoring.py were such a loop). The test fails on

- an import loop between files (two modules that reach each other, however far round);
- an import of a room from a room above it (the ranks below), the CLI from anywhere below it included;
- ``sandbox/`` or ``domains/`` importing the runtime, the trainers, the integrations (or anything above them);
- a private name (``_name``, a module or a name in one) imported from another package.

``importlib.import_module`` counts as well: with a literal name it is an import like any other; with a computed
name (a loader of plug-ins, a dispatch by name) its site must be declared in ``DYNAMIC`` with the modules it can load,
which join the graph, so a dispatch that loads a module importing the dispatcher back is a loop too.

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


def _components(mods: dict[str, Path]) -> list[str]:
    prefix = "rewardlang.runtime.components."
    return [m for m in mods if m.startswith(prefix) and "." not in m[len(prefix):]
            and not m[len(prefix):].startswith("_")]


def _algorithms(mods: dict[str, Path]) -> list[str]:
    from rewardlang.trainers.config import ALGORITHMS

    return sorted(set(ALGORITHMS.values()))


def _sandbox_lazy(mods: dict[str, Path]) -> list[str]:
    import rewardlang.sandbox as sandbox

    return sorted({f"rewardlang.sandbox.{m}" for m in vars(sandbox)["_LAZY"].values()})


#: every ``importlib.import_module`` of a computed name: the module doing it -> the package's modules it can load
#: (read from the same table the code reads). The user's ``--plugin`` modules and the tools' own modules the warm
#: helper preloads are none of the package's.
DYNAMIC = {
    "rewardlang.runtime.registry": _components,        # every component module, then the entry points' plug-ins
    "rewardlang.trainers.run": _algorithms,            # the algorithm a run names (trainers.config.ALGORITHMS)
    "rewardlang.sandbox": _sandbox_lazy,               # the package's names, loaded on first use
    "rewardlang.cli.data": lambda mods: [],            # prm-data --plugin MODULE
    "rewardlang.runtime.tools.warm_helper": lambda mods: [],  # pylint, radon, ... in the helper process
    "rewardlang.runtime.code.compiled": lambda mods: [],  # the compiled twins (_c_*): extension modules
}


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


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module"
            and isinstance(func.value, ast.Name) and func.value.id == "importlib") or (
        isinstance(func, ast.Name) and func.id == "import_module")


def imports(mods: dict[str, Path] | None = None, dynamic: list[Import] | None = None) -> list[Import]:
    """Every import of the package's own modules, in every file, wherever it stands in the file. The sites of
    ``importlib.import_module`` with a computed name are appended to ``dynamic`` (when given)."""
    mods = modules() if mods is None else mods
    dynamic = [] if dynamic is None else dynamic

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _is_import_module(node.func):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    wanted = [(arg.value, "")]
                else:
                    dynamic.append(Import(mod, "?", "", node.lineno))
                    continue
            elif isinstance(node, ast.Import):
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


def declared(dynamic: list[Import], mods: dict[str, Path], table: dict | None = None) -> tuple[list[Import], list[str]]:
    """The imports the declared dynamic sites can make, and the sites not declared."""
    table = DYNAMIC if table is None else table
    edges, undeclared = [], []
    for site in dynamic:
        if site.source not in table:
            undeclared.append(f"{site.source}:{site.line}")
            continue
        edges += [Import(site.source, t, "", site.line) for t in table[site.source](mods) if t != site.source]
    return edges, undeclared


@pytest.fixture(scope="module")
def parsed() -> tuple[dict[str, Path], list[Import], list[Import]]:
    """The real package's modules, its imports and its dynamic imports (each file parsed once for the module)."""
    mods = modules()
    dynamic: list[Import] = []
    found = imports(mods, dynamic)
    return mods, found, dynamic


@pytest.fixture(scope="module")
def graph(parsed) -> tuple[dict[str, Path], list[Import]]:
    mods, found, dynamic = parsed
    edges, undeclared = declared(dynamic, mods)
    assert undeclared == [], "import_module of a computed name: declare what it loads in DYNAMIC"
    return mods, found + edges


def test_every_declared_dynamic_import_exists(parsed) -> None:
    # a DYNAMIC entry whose site is gone would declare nothing: the table follows the code
    mods, _, dynamic = parsed
    assert sorted({d.source for d in dynamic}) == sorted(DYNAMIC)
    assert all(t in mods for src in DYNAMIC for t in DYNAMIC[src](mods))


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
                            "runtime/c.py": "from rewardlang.runtime import d\n",
                            "runtime/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from rewardlang.runtime import c\n"})
    # a loop through a type-only import is a loop too (it ties the files as much for a reader)
    assert loops(imports(mods)) == [["rewardlang.runtime.a", "rewardlang.runtime.b"],
                                    ["rewardlang.runtime.c", "rewardlang.runtime.d"]]


def test_upward_imports_and_private_names_are_found(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {"__init__.py": "", "sandbox/__init__.py": "", "runtime/__init__.py": "",
                            "cli/__init__.py": "", "cli/common.py": "def _err(): pass\n",
                            "sandbox/pool.py": "from rewardlang.runtime.api import LRUCache\n",
                            "runtime/api.py": "def g():\n    from rewardlang.cli.common import _err\n"})
    found = imports(mods)
    assert [u.split(" (")[0] for u in upward(found)] == [
        "rewardlang.runtime.api:2 imports rewardlang.cli.common", "rewardlang.sandbox.pool:1 imports rewardlang.runtime.api"]
    assert private_across(found, mods) == ["rewardlang.runtime.api:2 imports rewardlang.cli.common._err"]


def test_the_checks_fail_on_the_real_package_with_a_loop_an_upward_and_a_private_import_added(tmp_path: Path,
                                                                                              parsed) -> None:
    # the guard itself, on a copy of the real package that passes, then with each kind of fault added in a real file
    # (inside a function, as a loop hidden from the reader would be): each is found, and nothing else
    for p in ROOT.rglob("*.py"):
        dest = tmp_path / "rewardlang" / p.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(p.read_bytes())
    mods = modules(tmp_path / "rewardlang")
    # the copy passes: it is the real package byte for byte, whose files the module's fixture parsed once
    real_mods, clean, real_dynamic = parsed
    assert sorted(mods) == sorted(real_mods)
    edges, undeclared = declared(real_dynamic, real_mods)
    assert (loops(clean + edges), upward(clean), private_across(clean, real_mods), undeclared) == ([], [], [], [])

    def add(rel: str, text: str) -> int:
        p = tmp_path / "rewardlang" / rel
        src = p.read_text(encoding="utf-8")
        p.write_text(src + text, encoding="utf-8")
        return src.count("\n") + text.count("\n")  # the line of the added import (the file's last)

    # program.py imports parallel.py at its top: parallel importing program back (the loop issue 33 found)
    at_loop = add("runtime/parallel.py", "\n\ndef _added():\n    from rewardlang.runtime.program import Program\n")
    at_up = add("sandbox/judge.py", "\n\ndef _added():\n    from rewardlang.runtime.api import function\n")
    at_cli = add("report.py", "\n\ndef _added():\n    import rewardlang.cli.common\n")
    at_private = add("lsp/analysis.py", "\n\ndef _added():\n    from rewardlang.checker import _slice\n")
    at_dynamic = add("datacheck.py", "\n\ndef _added(name):\n    import importlib\n    importlib.import_module(name)\n")
    dynamic = []
    found = imports(mods, dynamic)
    edges, undeclared = declared(dynamic, mods)
    # one loop, through both files (and whatever reaches one from the other: scoring imports both)
    [loop] = loops(found + edges)
    assert {"rewardlang.runtime.parallel", "rewardlang.runtime.program"} <= set(loop)
    assert [u.split(" (")[0] for u in upward(found)] == [
        f"rewardlang.report:{at_cli} imports rewardlang.cli.common",
        f"rewardlang.sandbox.judge:{at_up} imports rewardlang.runtime.api"]
    assert private_across(found, mods) == [f"rewardlang.lsp.analysis:{at_private} imports rewardlang.checker._slice"]
    assert undeclared == [f"rewardlang.datacheck:{at_dynamic}"]
    assert any(i.source == "rewardlang.runtime.parallel" and i.line == at_loop for i in found)


def test_a_dispatch_by_name_that_is_imported_back_is_a_loop(tmp_path: Path) -> None:
    # the shape trainers/run.py had: a dispatcher loading the algorithm by name, the algorithm importing the
    # dispatcher for its helpers
    mods = _tree(tmp_path, {"__init__.py": "", "trainers/__init__.py": "",
                            "trainers/run.py": "import importlib\nALG = {'grpo': 'rewardlang.trainers.grpo'}\n"
                                               "def train(a):\n    return importlib.import_module(ALG[a]).train()\n",
                            "trainers/grpo.py": "from rewardlang.trainers.run import ALG\n"})
    dynamic: list[Import] = []
    found = imports(mods, dynamic)
    table = {"rewardlang.trainers.run": lambda mods: ["rewardlang.trainers.grpo"]}
    edges, undeclared = declared(dynamic, mods, table)
    assert undeclared == [] and loops(found) == []
    assert loops(found + edges) == [["rewardlang.trainers.grpo", "rewardlang.trainers.run"]]
    assert declared(dynamic, mods, {})[1] == ["rewardlang.trainers.run:4"]


def test_a_new_component_module_is_one_new_file(tmp_path: Path) -> None:
    # a function specs can call, added as a built-in: one new module in runtime/components/ (beside it, its test and
    # its docs: three files), found by the registry, checked, compiled and scored with nothing changed in the
    # parser, checker, code generator or compiler (a copy of the package with only that file added)
    import json
    import os
    import shutil
    import subprocess
    import sys

    shutil.copytree(ROOT, tmp_path / "rewardlang", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "rewardlang" / "runtime" / "components" / "added_vowels.py").write_text(
        '"""A component added for the test: the share of vowels in a text."""\n\n'
        "from rewardlang.runtime.api import Context, function\n\n\n"
        '@function("vowel_share", args={"text": "text"}, returns="number", range=(0.0, 1.0),\n'
        '          doc="Share of the letters of `text` that are vowels (0 without letters).")\n'
        "def vowel_share(text: list[str], *, params: None, ctx: Context) -> list[float]:\n"
        "    out = []\n"
        "    for t in text:\n"
        "        letters = [c for c in t.lower() if c.isalpha()]\n"
        '        out.append(sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0)\n'
        "    return out\n")
    spec = tmp_path / "vowels.reward"
    spec.write_text('spec vowels "vowels"\n\ncomponent v in [0, 1] = vowel_share(completion)\n\n'
                    'example {\n    completion: "banana!",\n    expect v = 0.5,\n}\n')
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"completion": "aeio"}\n{"completion": "xyz 1"}\n{"completion": "Hello"}\n')
    env = dict(os.environ, PYTHONPATH=str(tmp_path), REWARDLANG_CACHE_DIR=str(tmp_path / "cache"))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rewardlang", *args], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=600, check=False)

    r = run("check", str(spec))
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("score", str(spec), "-i", str(rows), "--no-summary")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["components"]["v"] for x in r.stdout.splitlines()] == [1.0, 0.0, 0.4]
    assert "vowel_share(text: text) -> number" in run("functions").stdout
    # the real package does not know it: the copy's one new file made it
    r = subprocess.run([sys.executable, "-m", "rewardlang", "check", str(spec)], capture_output=True, text=True,
                       cwd=ROOT.parent, env=dict(env, PYTHONPATH=str(ROOT.parent)), timeout=600, check=False)
    assert r.returncode == 1 and "vowel_share" in r.stdout + r.stderr
