"""The argv steps' spawner library (``spawn.c``): where it is installed, how it is named and built.

The library is named by a digest of the ``spawn.c`` it was built from
(``/usr/local/lib/rewardlang/librlspawn-<digest>.so``), so a slot only ever loads a library built from the
very source this package carries: a library from an older or newer ``spawn.c`` has another name and is
never found, whatever its interface version says. Where the library for this source is missing, the worker
forks each step and runs the same set-up in Python (``_child`` in ``_worker.py``): the same isolation, about
1 ms more CPU per step (benchmarks/README.md, issue 20). ``scripts/install.sh`` builds it::

    python3 -m rewardlang.sandbox.spawnlib --build      # as root: into /usr/local/lib/rewardlang

>>> import os
>>> from rewardlang.sandbox import spawnlib
>>> len(spawnlib.source_digest())
16
>>> os.path.basename(spawnlib.library_path()) == f"librlspawn-{spawnlib.source_digest()}.so"
True
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

#: the spawner's C source, shipped with the package
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spawn.c")
#: where scripts/install.sh puts the library: under /usr, which every slot sees read-only (bwrap and the
#: namespaces level bind the host's /usr; a program cannot replace the file)
LIB_DIR = "/usr/local/lib/rewardlang"


@functools.cache
def source_digest() -> str:
    """The first 16 hex digits of the SHA-256 of ``spawn.c`` (read once per process)."""
    with open(SOURCE, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:16]


def library_path(lib_dir: str = LIB_DIR) -> str:
    """Where the library built from this package's ``spawn.c`` lives (whether or not it is there)."""
    return os.path.join(lib_dir, f"librlspawn-{source_digest()}.so")


def installed(lib_dir: str = LIB_DIR) -> str | None:
    """The library's path when the one built from this ``spawn.c`` is installed, else None (steps fork)."""
    path = library_path(lib_dir)
    return path if os.path.isfile(path) else None


def build(out: str, cc: str | None = None) -> str:
    """Compile ``spawn.c`` into the shared library ``out`` (written whole or not at all: a temporary file in
    the same directory, renamed). Raises ``RuntimeError`` with the compiler's message when it fails."""
    cc = cc or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler (gcc) to build the sandbox's step spawner")
    d = os.path.dirname(os.path.abspath(out))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".librlspawn-", suffix=".so", dir=d)
    os.close(fd)
    try:
        r = subprocess.run([cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", tmp, SOURCE],
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"{cc} could not build {SOURCE}:\n{r.stderr.strip()}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m rewardlang.sandbox.spawnlib",
                                 description="Build or locate the sandbox's step spawner (spawn.c).")
    ap.add_argument("--build", action="store_true", help=f"compile spawn.c into {LIB_DIR} (or --dir)")
    ap.add_argument("--dir", default=LIB_DIR, help="the library's directory (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.build:
        try:
            print(build(library_path(args.dir)))
        except (RuntimeError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0
    path = installed(args.dir)
    print(path or f"not installed: {library_path(args.dir)} (steps fork; build it with --build)")
    return 0 if path else 1


if __name__ == "__main__":
    raise SystemExit(main())
