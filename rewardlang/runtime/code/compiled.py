"""The compiled twins of CodeBLEU's per-program analysis, used only where they were built from today's source.

``setup.py`` compiles :mod:`~rewardlang.runtime.code.tree`, :mod:`~rewardlang.runtime.code.dataflow`,
:mod:`~rewardlang.runtime.code.strip` and :mod:`~rewardlang.runtime.code.codebleu` with Cython, unchanged, into
``_c_tree``, ``_c_dataflow``, ``_c_strip`` and ``_c_codebleu`` beside them (about 20 % less CPU for CodeBLEU;
``benchmarks/bench_score_cli.py``). Each twin carries the SHA-256 of the source it was compiled from. :func:`module` returns the twin while that digest
equals the module's source file today, and the pure module otherwise: without a build (no Cython or C compiler
at install, a source tree never built), after an edit that was not rebuilt, or with the environment variable
``REWARDLANG_PURE_PYTHON=1``. The twins compute exactly what the modules compute (the tests compare them on the
HumanEval corpus and on hostile programs); which one serves is only a question of speed.

Example::

    >>> from rewardlang.runtime.code import codebleu, compiled, tree
    >>> m = compiled.module("tree")
    >>> m is tree or m.__name__ == "rewardlang.runtime.code._c_tree"
    True
    >>> sorted(compiled.status())
    ['codebleu', 'dataflow', 'strip', 'tree']
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from types import ModuleType

__all__ = ["NAMES", "module", "status"]

#: the modules that have compiled twins (setup.py's COMPILED)
NAMES = ("tree", "dataflow", "strip", "codebleu")
_PKG = "rewardlang.runtime.code"
_CHOSEN: dict[str, ModuleType] = {}
_WHY: dict[str, str] = {}


def _source_digest(mod: ModuleType) -> str | None:
    path = getattr(mod, "__file__", None)
    if not path or not path.endswith(".py"):
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


#: the modules this one may import by name. codebleu.py imports this module to pick its dependencies' twins, so
#: importing codebleu from here would close an import loop: its pure module is taken from ``sys.modules``, where
#: whoever asks for its twin has already put it by importing it
BY_NAME = ("tree", "dataflow", "strip")


def _pure(name: str) -> ModuleType:
    full = f"{_PKG}.{name}"
    if name in BY_NAME:
        return importlib.import_module(full)
    mod = sys.modules.get(full)
    if mod is None:
        raise LookupError(f"import {full} before asking for its twin (it imports this module, not the reverse)")
    return mod


def _choose(name: str) -> tuple[ModuleType, str]:
    pure = _pure(name)
    if os.environ.get("REWARDLANG_PURE_PYTHON", "") not in ("", "0"):
        return pure, "pure Python (REWARDLANG_PURE_PYTHON is set)"
    try:
        twin = importlib.import_module(f"{_PKG}._c_{name}")
    except ImportError:
        return pure, "pure Python (no compiled twin: not built)"
    built_from = getattr(twin, "__source_sha256__", None)
    if built_from is None or built_from != _source_digest(pure):
        return pure, f"pure Python ({twin.__name__} was built from another version of {name}.py: rebuild it)"
    return twin, f"compiled ({twin.__name__})"


def module(name: str) -> ModuleType:
    """The module ``name`` (one of :data:`NAMES`) to use: its compiled twin when built from the current source,
    else the pure module. Chosen once per process."""
    m = _CHOSEN.get(name)
    if m is None:
        if name not in NAMES:
            raise ValueError(f"no compiled twin for {name!r} (one of {', '.join(NAMES)})")
        m, _WHY[name] = _choose(name)
        _CHOSEN[name] = m
    return m


def status() -> dict[str, str]:
    """For each module with a twin: which implementation serves in this process, and why (``codebleu`` once it is
    imported)."""
    for name in NAMES:
        try:
            module(name)
        except LookupError:
            _WHY.setdefault(name, "not imported yet")
    return dict(_WHY)
