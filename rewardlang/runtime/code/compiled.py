"""The compiled twins of CodeBLEU's per-program analysis, used only where they were built from today's source.

``setup.py`` compiles :mod:`~rewardlang.runtime.code.tree`, :mod:`~rewardlang.runtime.code.dataflow`,
:mod:`~rewardlang.runtime.code.strip` and :mod:`~rewardlang.runtime.code.codebleu` with Cython, unchanged, into
``_c_tree``, ``_c_dataflow``, ``_c_strip`` and ``_c_codebleu`` beside them (about 20 % less CPU for CodeBLEU;
``benchmarks/bench_score_cli.py``). Each twin carries the SHA-256 of the source it was compiled from. :func:`module` returns the twin while that digest
equals the module's source file today, and the pure module otherwise: without a build (no Cython or C compiler
at install, a source tree never built), after an edit that was not rebuilt, or with the environment variable
``REWARDLANG_PURE_PYTHON=1``. The twins compute exactly what the modules compute (the tests compare them on the
HumanEval corpus and on hostile programs); which one serves is only a question of speed.

A caller passes the pure module it imported itself (:func:`twin`), so this module imports none of the four by
name: ``codebleu`` imports this module, and importing it back from here would close an import loop.

Example::

    >>> from rewardlang.runtime.code import compiled, tree
    >>> m = compiled.twin(tree)
    >>> m is tree or m.__name__ == "rewardlang.runtime.code._c_tree"
    True
    >>> compiled.status()["tree"].split(" ")[0] in ("compiled", "pure")
    True
"""

from __future__ import annotations

import hashlib
import importlib
import os
from types import ModuleType

__all__ = ["NAMES", "status", "twin"]

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


def _name(pure: ModuleType) -> str:
    pkg, _, name = pure.__name__.rpartition(".")
    if pkg != _PKG or name not in NAMES:
        raise ValueError(f"no compiled twin for {pure.__name__!r} (one of {', '.join(f'{_PKG}.{n}' for n in NAMES)})")
    return name


def _choose(pure: ModuleType) -> tuple[ModuleType, str]:
    name = _name(pure)
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


def twin(pure: ModuleType) -> ModuleType:
    """The module to use in place of ``pure`` (one of :data:`NAMES`, as imported by the caller): its compiled twin
    when built from ``pure``'s current source, else ``pure`` itself. Chosen once per process."""
    name = _name(pure)
    m = _CHOSEN.get(name)
    if m is None:
        m, _WHY[name] = _choose(pure)
        _CHOSEN[name] = m
    return m


def status() -> dict[str, str]:
    """For each module with a twin: which implementation serves in this process and why, or that none was asked for
    yet (a module is chosen when its first caller asks: :func:`twin`)."""
    return {name: _WHY.get(name, "not used yet in this process") for name in NAMES}
