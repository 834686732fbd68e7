"""Discovery of reward functions: rewardlang's own and those of installed packages.

Every module in :mod:`rewardlang.runtime.components` is imported (so adding a function is adding a module),
then every module named in the ``rewardlang.components`` entry-point group. Component modules must keep
heavy imports (tree-sitter, numba, tools) inside their functions: ``rewardlang check`` imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from rewardlang.runtime import api
from rewardlang.signature import Signature

__all__ = ["load_all", "signatures", "get"]

_loaded = False
_failures: list[tuple[str, str]] = []


def load_all() -> dict[str, api.Implementation]:
    """Import every component module once and return the registry."""
    global _loaded
    if not _loaded:
        from rewardlang.runtime import components

        for info in sorted(pkgutil.iter_modules(components.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                importlib.import_module(f"{components.__name__}.{info.name}")
        for ep in entry_points(group="rewardlang.components"):
            try:
                obj = ep.load()
                if callable(obj) and not isinstance(obj, api.Implementation):
                    obj()
            except Exception as exc:  # a broken third-party plug-in must not break rewardlang itself
                _failures.append((ep.name, f"{type(exc).__name__}: {exc}"))
        _loaded = True
    return api.registered()


def plugin_failures() -> list[tuple[str, str]]:
    """Entry points that failed to load (name, reason); shown by ``rewardlang doctor``."""
    return list(_failures)


def signatures() -> dict[str, Signature]:
    """The signature table the checker type-checks calls against."""
    return {name: impl.signature for name, impl in load_all().items()}


def get(name: str) -> api.Implementation:
    return load_all()[name]
