"""Test-only helpers for the translated HumanEval: a type-directed comparator with the contract's rules (until the
execution engineer's ``rewardlang/sandbox/values.py`` is merged), and a direct compile-and-run of
``code + "\\n" + harness`` with the real toolchains (fd 3 a pipe, a timeout), outside the sandbox.

Java compiles go through one JVM (``javax.tools``) for a whole batch: javac's start-up is most of its cost.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from rewardlang.datasets.targets import FILE_NAMES

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


# ---------------------------------------------------------------------------------------------- comparator

def parse_type(text: str) -> Any:
    """``list[tuple[int,str]]`` -> ``("list", ("tuple", "int", "str"))``."""
    text = text.replace(" ", "")
    if "[" not in text:
        if text not in ("int", "float", "bool", "str", "none"):
            raise ValueError(f"unknown type {text!r}")
        return text
    head, rest = text.split("[", 1)
    if not rest.endswith("]"):
        raise ValueError(f"bad type {text!r}")
    parts, depth, cur = [], 0, ""
    for ch in rest[:-1]:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    parts.append(cur)
    arity = {"list": 1, "optional": 1, "dict": 2}
    if head not in ("list", "optional", "dict", "tuple") or head in arity and len(parts) != arity[head]:
        raise ValueError(f"bad type {text!r}")
    return (head,) + tuple(parse_type(p) for p in parts)


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(v) if isinstance(v, str) else None


def compare(expected: Any, actual: Any, t: Any, tolerance: float | None) -> bool:
    """Type-directed equality: int exact (a JSON integer), float within ``tolerance`` (absolute; None: 1e-6
    relative + absolute), bool strict, str exact, sequences elementwise, dict by keys, optional None-aware."""
    if isinstance(t, str):
        t = parse_type(t)
    if t == "int":
        return isinstance(actual, int) and not isinstance(actual, bool) and actual == expected
    if t == "float":
        e, a = _num(expected), _num(actual)
        if e is None or a is None:
            return False
        if math.isnan(e) or math.isnan(a):
            return math.isnan(e) and math.isnan(a)
        if math.isinf(e) or math.isinf(a):
            return e == a
        tol = 1e-6 + 1e-6 * abs(e) if tolerance is None else tolerance
        return abs(a - e) <= tol
    if t == "bool":
        return isinstance(actual, bool) and actual == expected
    if t == "str":
        return isinstance(actual, str) and actual == expected
    if t == "none":
        return actual is None
    kind = t[0]
    if kind == "optional":
        return actual is None if expected is None else actual is not None and compare(expected, actual,
                                                                                       t[1], tolerance)
    if not isinstance(actual, list):
        return False
    if kind == "list":
        return len(actual) == len(expected) and all(compare(e, a, t[1], tolerance)
                                                    for e, a in zip(expected, actual))
    if kind == "tuple":
        return len(actual) == len(expected) == len(t) - 1 and all(
            compare(e, a, x, tolerance) for e, a, x in zip(expected, actual, t[1:]))
    if kind == "dict":
        if not all(isinstance(p, list) and len(p) == 2 for p in actual) or len(actual) != len(expected):
            return False
        got = {json.dumps(k): v for k, v in actual}
        if len(got) != len(actual):
            return False  # a key twice
        for k, v in expected:
            key = json.dumps(k)
            if key not in got or not compare(k, json.loads(key), t[1], tolerance) or \
                    not compare(v, got[key], t[2], tolerance):
                return False
        return True
    return False


def parse_records(data: bytes, n: int) -> list[Any]:
    """The values of complete records ``<i> <JSON>\\n`` in order; a record out of order, a duplicate, or a
    malformed line ends the list (what follows cannot be trusted)."""
    values: list[Any] = []
    for line in data.split(b"\n")[:-1]:  # an unterminated last line is not a record
        head, _, body = line.partition(b" ")
        if head != str(len(values)).encode() or len(values) >= n:
            break
        try:
            values.append(json.loads(body.decode("utf-8")))
        except ValueError:
            break
    return values


def judge(tests: dict[str, Any], records: list[Any]) -> list[bool]:
    """Per case: recorded and equal."""
    out = []
    for i, case in enumerate(tests["cases"]):
        out.append(i < len(records) and compare(case["expected"], records[i], case["type"], case["tolerance"]))
    return out


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
