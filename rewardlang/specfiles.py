"""Where a spec's ``import`` may read, and how a spec file is read.

A spec's imports are data the checker parses, never code, but a spec is often someone else's (a shared library,
a repository an editor opened), so what it can make rewardlang read is bounded:

- an import names a ``.reward`` file: the path as written, and the file it leads to (through symlinks);
- it is looked up relative to the importing file's directory, then in each folder of the search path:
  ``REWARDLANG_IMPORT_PATH`` (folders separated by ``os.pathsep``, as ``PYTHONPATH``), then the shipped library
  (``specs/lib`` of a source checkout, when it is there);
- the file it leads to (its real path, symlinks resolved) lies inside the main spec's folder or a folder of the
  search path; ``import "../../etc/passwd.reward"``, an absolute path elsewhere, or a symlink out of the folder is
  refused (E105) before anything is read;
- only a regular file of at most :data:`MAX_SPEC_BYTES` is read (a FIFO, a device or ``/dev/zero`` would block
  or never end), opened without following a last symlink and checked on the open file.

Example::

    >>> import os, tempfile
    >>> top = tempfile.mkdtemp()
    >>> for d, name in (("specs", "lib.reward"), ("elsewhere", "secret.reward")):
    ...     os.makedirs(os.path.join(top, d))
    ...     _ = open(os.path.join(top, d, name), "w").write("let x = 1")
    >>> main = os.path.join(top, "specs", "main.reward")
    >>> roots = import_roots(main, search=[])
    >>> resolve_import("lib.reward", main, roots, search=[]) == os.path.join(top, "specs", "lib.reward")
    True
    >>> try:
    ...     resolve_import("../elsewhere/secret.reward", main, roots, search=[])
    ... except ImportRefused as e:
    ...     print(e.message.replace(top, "TOP"))
    cannot read `../elsewhere/secret.reward`: it leads to `TOP/elsewhere/secret.reward`, outside the spec's folder
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = ["IMPORT_PATH_ENV", "MAX_SPEC_BYTES", "ImportRefused", "import_roots", "import_search_path",
           "inside", "library_dir", "read_spec_file", "resolve_import"]

#: the environment variable naming extra folders an import may read from (``os.pathsep``-separated)
IMPORT_PATH_ENV = "REWARDLANG_IMPORT_PATH"

#: the largest spec file read (the shipped specs are under 10 KiB)
MAX_SPEC_BYTES = 4 << 20

SUFFIX = ".reward"


class ImportRefused(Exception):
    """An import that is not read: ``message`` and ``hint`` make its E105."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def library_dir() -> str | None:
    """The shipped library of specs (``specs/lib`` beside the package in a source checkout), or None."""
    lib = Path(__file__).resolve().parent.parent / "specs" / "lib"
    return str(lib) if lib.is_dir() else None


def import_search_path(extra: Sequence[str] | None = None) -> list[str]:
    """The folders an import is looked up in after the importing file's own: ``extra``, then
    ``$REWARDLANG_IMPORT_PATH``, then the shipped library."""
    out = [str(p) for p in (extra or [])]
    env = os.environ.get(IMPORT_PATH_ENV, "")
    out += [p for p in env.split(os.pathsep) if p]
    lib = library_dir()
    if lib is not None:
        out.append(lib)
    return out


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


def _main_folder(main_file: str) -> str | None:
    """The folder of the spec being checked; None for a buffer that has no file (``<string>``, ``untitled:1``)."""
    if main_file.startswith("<") or (":" in main_file.split("/")[0] and not os.path.isabs(main_file)):
        return None
    return _real(os.path.dirname(os.path.abspath(main_file)))


def import_roots(main_file: str, search: Sequence[str] | None = None) -> list[str]:
    """The real paths of the folders an import of ``main_file`` (and of what it imports) may read inside: its own
    folder and the search path's."""
    roots = []
    folder = _main_folder(main_file)
    if folder is not None:
        roots.append(folder)
    for d in (import_search_path() if search is None else search):
        roots.append(_real(d))
    return roots


def inside(path: str, roots: Sequence[str]) -> bool:
    """Whether the real path ``path`` lies in (or is) one of ``roots``."""
    for r in roots:
        try:
            if os.path.commonpath([path, r]) == r:
                return True
        except ValueError:  # different drives
            continue
    return False


def resolve_import(path: str, importing_file: str, roots: Sequence[str], search: Sequence[str] | None = None
                   ) -> str:
    """The file ``import "path"`` in ``importing_file`` reads (as spelt: relative paths stay relative to the
    importing file's folder); :class:`ImportRefused` when it is not a ``.reward`` file, is found nowhere, or leads
    outside ``roots``."""
    if not path.endswith(SUFFIX):
        raise ImportRefused(f"`{path}` is not a spec: an import names a `{SUFFIX}` file",
                            hint="imports read other specs, never programs or data")
    search = import_search_path() if search is None else search
    where = "the spec's folder" + (f" and the import path ({os.pathsep.join(search)})" if search else "")
    if os.path.isabs(path):
        candidates = [path]
    else:
        candidates = [str(Path(importing_file).parent / path)] + [str(Path(d) / path) for d in search]
    found = next((c for c in candidates if os.path.lexists(c)), None)
    if found is None:
        raise ImportRefused(f"cannot read `{path}`: No such file or directory",
                            hint="import paths are relative to the importing spec's directory; then the folders "
                                 f"of {IMPORT_PATH_ENV} and the shipped library are searched")
    real = _real(found)
    if not inside(real, roots):
        raise ImportRefused(f"cannot read `{path}`: it leads to `{real}`, outside {where}",
                            hint=f"an import reads only inside {where}; add a folder with {IMPORT_PATH_ENV}")
    if not real.endswith(SUFFIX):
        raise ImportRefused(f"cannot read `{path}`: it leads to `{real}`, which is not a `{SUFFIX}` file")
    try:
        st = os.stat(real)
    except OSError as exc:
        raise ImportRefused(f"cannot read `{path}`: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        raise ImportRefused(f"cannot read `{path}`: not a regular file")
    if st.st_size > MAX_SPEC_BYTES:
        raise ImportRefused(f"cannot read `{path}`: {st.st_size} bytes, more than a spec's {MAX_SPEC_BYTES}")
    return found


def read_spec_file(path: str) -> str:
    """The text of the regular file ``path`` leads to (UTF-8), at most :data:`MAX_SPEC_BYTES`; OSError for anything
    else (a FIFO or a device is refused without blocking: the type is checked on the open file)."""
    real = _real(path)
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        if st.st_size > MAX_SPEC_BYTES:
            raise OSError(0, f"{st.st_size} bytes, more than a spec's {MAX_SPEC_BYTES}")
        chunks = []
        total = 0
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            total += len(b)
            if total > MAX_SPEC_BYTES:
                raise OSError(0, f"more than a spec's {MAX_SPEC_BYTES} bytes")
            chunks.append(b)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")
