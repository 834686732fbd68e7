"""Compiling a spec: parse → check → generate Python → (on-disk cache) → a runnable
:class:`~rewardlang.runtime.program.Program`. The runtime executes programs; it does not compile them.

    >>> from rewardlang.compiler import load_program
    >>> prog = load_program("<string>", source="component n in [0, 10] = len(completion)")
    >>> prog.score(completion=["abc"]).total.tolist()
    [3.0]
    >>> code, warnings, sources = compile_spec("<string>", source="component n = 1")
    >>> "def rows(" in code and sources == {"<string>": "component n = 1"}
    True

A spec with errors raises :class:`~rewardlang.diagnostics.SpecError` carrying every located diagnostic.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

from rewardlang.diagnostics import Diagnostic, SpecError
from rewardlang.runtime import registry
from rewardlang.runtime.program import Program

__all__ = ["compile_spec", "load_program"]


def compile_spec(path: str, params: dict[str, Any] | None = None, source: str | None = None
                 ) -> tuple[str, list[Diagnostic], dict[str, str]]:
    """Check and compile a spec to Python source. Raises :class:`SpecError` with every diagnostic on errors."""
    # the front end (Lark, the checker, the IR, codegen: ~0.1 s of imports) runs only when the compile cache misses;
    # a command that loads a cached spec starts without it (docs/architecture.md: imports that keep start-up fast)
    from rewardlang import checker, codegen

    sigs = registry.signatures()
    if source is None:
        prog, diags, sources = checker.check_file(path, sigs, params)
    else:
        prog, diags, sources = checker.check_source(source, path, sigs, params)
    if prog is None:
        raise SpecError(diags or [Diagnostic("E001", "the spec could not be compiled", None)], sources)
    code = codegen.generate(prog, getattr(prog, "let_names", {}), path)
    return code, diags, sources


def _compiler_fingerprint() -> str:
    """What a compiled spec depends on besides its sources: rewardlang's own files (by name, size and mtime) and
    every registered function's signature (plug-ins included)."""
    import hashlib

    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith((".py", ".lark")):
                st = os.stat(os.path.join(dirpath, f))
                h.update(f"{dirpath}/{f}:{st.st_size}:{st.st_mtime_ns};".encode())
    h.update(repr(sorted(registry.signatures().items())).encode())
    return h.hexdigest()


def _cache_dir() -> Path | None:
    where = os.environ.get("REWARDLANG_CACHE_DIR")
    if where == "":
        return None  # REWARDLANG_CACHE_DIR= (empty) turns the cache off
    base = Path(where) if where else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rewardlang"
    return base / "specs"


def _compile_cached(path: str, params: dict[str, Any] | None) -> tuple[str, list[Diagnostic], dict[str, str]]:
    """:func:`compile_spec` of a spec file, through an on-disk cache of compiled specs.

    A command-line run spends ~0.1 s of CPU importing the parser and checker and compiling the spec, about a tenth
    of `rewardlang score` on a small file. The entry is keyed by the path (as given and absolute), the working
    directory, the parameters, the import search path and the compiler's fingerprint, and used only if every source
    file it was compiled from (imports included) still reads the same. Specs with errors are not cached. Any problem with the cache falls back to compiling.
    """
    import hashlib
    import json
    import pickle

    cache = _cache_dir()
    if cache is None:
        return compile_spec(path, params)
    try:
        # the import search path decides which files an import reads (rewardlang.specfiles)
        # the path as given, too: diagnostics and examples name the spec as it was given when it was compiled
        # (a relative spelling's entry served for the absolute one made `check --set` find no example as written)
        key = hashlib.sha256(json.dumps([path, os.path.abspath(path), os.getcwd(), sorted((params or {}).items()),
                                         _compiler_fingerprint(), os.environ.get("REWARDLANG_IMPORT_PATH")],
                                        default=repr).encode()).hexdigest()
        entry = cache / f"{key}.pickle"
        if entry.exists():
            with open(entry, "rb") as f:
                code, diags, sources = pickle.load(f)
            if all(Path(p).read_text(encoding="utf-8") == text for p, text in sources.items()):
                return code, diags, sources
    except Exception:  # unreadable, stale format, a source gone: compile
        entry = None
    code, diags, sources = compile_spec(path, params)
    if entry is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            tmp = entry.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                pickle.dump((code, diags, sources), f)
            os.replace(tmp, entry)
        except Exception:  # a read-only home, a full disk: the cache is only an optimisation
            pass
    return code, diags, sources


def load_program(path: str, params: dict[str, Any] | None = None, source: str | None = None) -> Program:
    """Compile the spec at ``path`` (or ``source``, named ``path`` in diagnostics) with ``params`` overriding its
    parameters, weights and train settings, and return it as a :class:`Program`."""
    code, diags, sources = compile_spec(path, params, source) if source is not None else _compile_cached(path, params)
    module = types.ModuleType(f"rewardlang_compiled_{Path(path).stem}")
    module.__dict__["__file__"] = None
    exec(compile(code, f"<rewardlang:{path}>", "exec"), module.__dict__)
    return Program(module, code, [d for d in diags if not d.is_error], sources)
