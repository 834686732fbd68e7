"""Test-only helpers for the translated HumanEval: a type-directed comparator with the contract's rules (until the
execution engineer's ``rewardlang/sandbox/values.py`` is merged), and a direct compile-and-run of
``code + "\\n" + harness`` with the real toolchains (fd 3 a pipe, a timeout), outside the sandbox.

Java compiles go through one JVM (``javax.tools``) for a whole batch: javac's start-up is most of its cost.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from rewardlang.datasets.targets import FILE_NAMES
from rewardlang.sandbox.languages import PROFILES
from rewardlang.sandbox.values import compare, has_value
from rewardlang.sandbox.values import parse_records as _parse_records

TOOLS = {"c": ["gcc"], "cpp": ["g++"], "java": ["javac", "java"], "js": ["node"], "php": ["php"],
         "sh": ["bash"], "go": ["go"]}
_GOCACHE = os.path.join(tempfile.gettempdir(), f"rl-test-gocache-{os.getuid()}")


def need(lang: str) -> None:
    """Skip when a toolchain is missing, except under CI=true, where that is a failure."""
    missing = [t for t in TOOLS[lang] if shutil.which(t) is None]
    if missing:
        why = f"{lang}: toolchain missing ({', '.join(missing)})"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(why + " (CI=true: scripts/install.sh installs it)")
        pytest.skip(why)


# ---------------------------------------------------------------------------------------------- judging
# The trusted process's own decoder and comparator (rewardlang/sandbox/values.py), so these tests judge the
# references exactly as the sandbox does.


def parse_records(data: bytes, n: int) -> list[Any]:
    """The values of the cases recorded in order, up to the first case without exactly one good record."""
    values, _ = _parse_records(data, n)
    out: list[Any] = []
    for v in values:
        if not has_value(v):
            break
        out.append(v)
    return out


def judge(tests: dict[str, Any], records: list[Any], lang: str | None = None) -> list[bool]:
    """Per case: recorded and equal (``lang``: its profile says whether ints may arrive as integral floats)."""
    intf = PROFILES[lang].integral_floats if lang else False
    return [i < len(records) and compare(c["expected"], records[i], c["type"], c["tolerance"], integral_floats=intf)
            for i, c in enumerate(tests["cases"])]


# ---------------------------------------------------------------------------------------------- running

def _run(cmd: list[str], cwd: str, timeout: float, env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run with fd 3 a pipe; (returncode, fd-3 bytes, stderr)."""
    r, w = os.pipe()
    chunks: list[bytes] = []

    def reader() -> None:
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    shim = ["bash", "-c", f'exec 3>&{w} {w}>&-; exec "$@"', "rl"]
    try:
        proc = subprocess.Popen(shim + cmd, cwd=cwd, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                start_new_session=True)
    finally:
        os.close(w)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        _, err = proc.communicate()
    t.join(5)
    os.close(r)
    return proc.returncode, b"".join(chunks), err


def _env(d: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(GOCACHE=_GOCACHE, GOPATH=os.path.join(d, "gopath"), GO111MODULE="off", GOFLAGS="",
               HOME=d, LC_ALL="C.UTF-8")
    return env


_BATCH_JAVAC = r"""
import javax.tools.*;
public class BatchJavac {
    public static void main(String[] a) throws Exception {
        JavaCompiler c = ToolProvider.getSystemJavaCompiler();
        for (int i = 0; i < a.length; i += 2) {
            int rc = c.run(null, null, null, "-nowarn", "-encoding", "UTF-8", "-d", a[i + 1], a[i]);
            System.out.println(rc);
        }
    }
}
"""


def compile_java_batch(dirs: list[str]) -> list[bool]:
    """Compile ``<dir>/Main.java`` into ``<dir>`` for every dir in one JVM; per dir, whether it compiled."""
    with tempfile.TemporaryDirectory() as tool:
        Path(tool, "BatchJavac.java").write_text(_BATCH_JAVAC)
        subprocess.run(["javac", "-d", tool, os.path.join(tool, "BatchJavac.java")], check=True, timeout=120)
        args = [x for d in dirs for x in (os.path.join(d, "Main.java"), d)]
        out = subprocess.run(["java", "-cp", tool, "BatchJavac"] + args, check=False, capture_output=True, text=True,
                             timeout=60 + 10 * len(dirs))
    codes = out.stdout.split()
    return [i < len(codes) and codes[i] == "0" for i in range(len(dirs))]


def build_dir(lang: str, source: str) -> str:
    d = tempfile.mkdtemp(prefix=f"rl-{lang}-")
    Path(d, FILE_NAMES[lang]).write_text(source, encoding="utf-8")
    return d


def compile_one(lang: str, d: str) -> tuple[bool, str]:
    """Compile the file in ``d`` (interpreted languages: nothing to do). (ok, diagnostics)."""
    cmds = {"c": ["gcc", "-std=gnu11", "-O0", "-o", "main", "main.c", "-lm"],
            "cpp": ["g++", "-std=c++17", "-O0", "-o", "main", "main.cpp"],
            "go": ["go", "build", "-o", "main", "main.go"],
            "java": ["javac", "-encoding", "UTF-8", "-nowarn", "-d", ".", "Main.java"]}
    if lang not in cmds:
        return True, ""
    p = subprocess.run(cmds[lang], check=False, cwd=d, capture_output=True, text=True, timeout=180, env=_env(d))
    return p.returncode == 0, p.stderr[-3000:]


def run_one(lang: str, d: str, timeout: float = 20) -> tuple[int, bytes, bytes]:
    cmds = {"c": ["./main"], "cpp": ["./main"], "go": ["./main"],
            "java": ["java", "-Xss8m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", ".", "Main"],
            "js": ["node", "main.js"], "php": ["php", "main.php"], "sh": ["bash", "main.sh"]}
    return _run(cmds[lang], d, timeout, _env(d))


def run_programs(lang: str, sources: list[str], timeout: float = 20) -> list[tuple[bool, bytes, str]]:
    """Compile and run each source; per source (compiled, fd-3 bytes, diagnostics)."""
    dirs = [build_dir(lang, s) for s in sources]
    try:
        if lang == "java":
            ok = compile_java_batch(dirs)
            diags = [""] * len(dirs)
            for i, good in enumerate(ok):
                if not good:  # compile it again alone for its diagnostics
                    ok[i], diags[i] = compile_one(lang, dirs[i])
        else:
            res = [compile_one(lang, d) for d in dirs]
            ok, diags = [r[0] for r in res], [r[1] for r in res]
        out = []
        for good, d, diag in zip(ok, dirs, diags):
            if not good:
                out.append((False, b"", diag))
                continue
            _, obs, err = run_one(lang, d, timeout)
            out.append((True, obs, err.decode("utf-8", "replace")[-2000:]))
        return out
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
