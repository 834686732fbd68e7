"""Compiled twins of CodeBLEU's per-program analysis, built at install time (the rest of the build is pyproject.toml).

CodeBLEU's syntax and dataflow matches walk every distinct program's tree-sitter tree in Python: the tree walk
(``runtime/code/tree.py``), the dataflow pass (``dataflow.py``), comment stripping (``strip.py``) and the n-gram
counts and matching of pairs (``codebleu.py``) are most of `rewardlang score`'s CPU time on a CodeBLEU spec. Cython compiles each of these modules, unchanged, into an
extension named ``_c_<module>`` beside it, with the SHA-256 of the source it was compiled from
(``__source_sha256__``); :mod:`rewardlang.runtime.code.compiled` uses a twin only while that digest still equals
its module's source, so an edited module is never shadowed by a stale build. Annotations are not turned into C
types (``annotation_typing=False``): the compiled code does what the Python does, object for object.

The extensions are optional: without Cython or a C compiler the build goes on and the pure modules are used
(``rewardlang.runtime.code.compiled.status()`` says which are in use). ``pip install .`` and ``pip install -e .`` build them (Cython is a build
requirement); a source tree used without installing builds them in place with
``python setup.py build_ext --inplace``.
"""

from __future__ import annotations

import hashlib
import os

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
#: the modules compiled (rewardlang/runtime/code/<name>.py -> rewardlang.runtime.code._c_<name>)
COMPILED = ("tree", "dataflow", "strip", "codebleu")
SRC = os.path.join("rewardlang", "runtime", "code")


def _twin_sources() -> list[tuple[str, str]]:
    """(extension name, path of the generated source) for each compiled module: the module's text with the
    digest of that text appended, written under build/ (never into the package)."""
    out = []
    gen = os.path.join(ROOT, "build", "cython-src", SRC)
    os.makedirs(gen, exist_ok=True)
    for name in COMPILED:
        with open(os.path.join(ROOT, SRC, f"{name}.py"), "rb") as f:
            data = f.read()
        text = data.decode("utf-8") + f'\n__source_sha256__ = "{hashlib.sha256(data).hexdigest()}"\n'
        path = os.path.join(gen, f"_c_{name}.py")
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        if old != text:  # unchanged sources keep their time stamps: no needless recompiling
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        out.append((f"rewardlang.runtime.code._c_{name}", os.path.relpath(path, ROOT)))
    return out


def _extensions() -> list:
    try:
        from Cython.Build import cythonize
    except ImportError:  # no Cython in the build environment: the pure modules serve
        return []
    from setuptools import Extension

    exts = [Extension(name, [path], optional=True) for name, path in _twin_sources()]
    # every core: the install is part of the README's main job, timed from a fresh clone
    return cythonize(exts, quiet=True, build_dir=os.path.join("build", "cython-c"), nthreads=os.cpu_count() or 1,
                     compiler_directives={"language_level": 3, "annotation_typing": False})


class _OptionalBuildExt(build_ext):
    """A failed compile (no C compiler, no Python headers) is a warning, never a failed install. The four
    extensions compile side by side (one C compiler per core)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure leaves the pure modules in use
            print(f"warning: rewardlang's compiled CodeBLEU modules were not built ({exc}); the pure Python "
                  "modules are used")


setup(ext_modules=_extensions(), cmdclass={"build_ext": _OptionalBuildExt})
