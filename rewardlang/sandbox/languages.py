"""Programs in C, C++, Java, JavaScript, PHP, Bash and Go: one profile per language, the request the sandbox
runs (an *argv* program: a compile step and a run step, each exec'd in the program's run directory inside
the slot's isolation), and the verdict, computed here in the trusted process.

    >>> PROFILES["cpp"].file, PROFILES["cpp"].compile[0], PROFILES["js"].compile
    ('main.cpp', '/usr/bin/g++', ('/usr/bin/node', '--check', 'main.js'))
    >>> canonical_language("C++"), canonical_language("golang"), canonical_language("rust")
    ('cpp', 'go', None)

Tests of a non-Python program are *structured* (``rewardlang-tests/1``): a harness in the target language,
added after the program's unit (``code + "\\n" + harness``), calls the function once per case and writes
``<case index> <JSON>`` lines to file descriptor 3; the expected values stay here and are compared
type-directed (:mod:`~rewardlang.sandbox.values`). Exit statuses are never a pass signal: a C
constructor or a Java static initializer can ``exit(0)`` before any test, so a case without its record fails.

    >>> t = parse_tests({"format": "rewardlang-tests/1", "harness": "int main(){}",
    ...                  "cases": [{"expected": 3, "type": "int", "tolerance": None}]})
    >>> len(t.cases), t.cases[0].type
    (1, ('int',))
    >>> parse_tests("assert f(1) == 2")
    Traceback (most recent call last):
    ...
    rewardlang.sandbox.convert.TestFormatError: plain-text tests cannot be judged safely for a program that is not Python (its exit status can be forged): give a JSON object {"format": "rewardlang-tests/1", "harness": ..., "cases": [{"expected": ..., "type": ..., "tolerance": ...}]} (docs/languages.md)

Verdict rules: a compile step that does not end with status 0 within its limits (a diagnostic, a time, memory
or output limit: a C++ template recursion is one) is ``compile_error`` for every case (never a milder
class: a broken program could otherwise buy a timeout's value with an endless compile). In the run step
each case is decided by its record alone: one well-formed record equal to the expected value passes; a
duplicate or malformed record fails; a case without one gets how the run ended (``timeout``, ``memory``,
``output_limit``, ``runtime_error``: a signal, or an exit before the tests finished, ``exit(0)`` included).
A non-zero exit *after* every case has its record does not fail the program (the exit status decides
nothing, in either direction); a memory-cgroup kill during the run fails every case as ``memory`` (one
execution runs all cases, as for Python).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any

from rewardlang.sandbox.config import RUN_END_S, Limits
from rewardlang.sandbox.convert import TestFormatError
from rewardlang.sandbox.judge import OOM_WHY, TestResult, Verdict, termination, worst
from rewardlang.sandbox.raw import RawResult
from rewardlang.sandbox.values import (
    TypeExprError,
    compare,
    has_value,
    parse_records,
    parse_type,
)

__all__ = [
    "LANGUAGES",
    "PROFILES",
    "TESTS_FORMAT",
    "Case",
    "LanguagePlan",
    "Profile",
    "StructuredTests",
    "ToolchainMissing",
    "canonical_language",
    "fence_names",
    "language_plan",
    "parse_tests",
    "unknown_language_message",
]

TESTS_FORMAT = "rewardlang-tests/1"

#: JVM flags that fit the sandbox's 1 GiB address space and 18 processes (measured: with the defaults the
#: JVM cannot reserve its compressed class space under RLIMIT_AS, and its GC/compiler threads exceed NPROC)
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-UsePerfData", "-Xss1m",
             "-Xmx256m", "-XX:ReservedCodeCacheSize=64m", "-XX:CompressedClassSpaceSize=64m",
             "-XX:MaxMetaspaceSize=128m", "-XX:ActiveProcessorCount=1", "-XX:CICompilerCount=1")
JAVATUPLES = "/usr/share/java/javatuples.jar"

#: a precompiled ``bits/stdc++.h`` (built once by ``scripts/install.sh``: ``python3 -m
#: rewardlang.sandbox.languages --build-pch``). It lives under /usr, which every slot sees read-only at
#: every level, and g++ looks for ``bits/stdc++.h.gch`` in each ``-I`` directory before the header: a program
#: that includes ``bits/stdc++.h`` compiles in ~0.4 s CPU instead of ~2 s (shared/design/languages.md). Where it
#: is missing, or does not match the compiler (an upgraded g++), g++ ignores it and reads the header.
PCH_DIR = "/usr/local/lib/rewardlang/pch/c++17"
#: the flags the PCH is built with: those of the cpp profile's compile step that a PCH must match
PCH_FLAGS = ("-std=c++17", "-O0")

#: every step: a fixed PATH, HOME and TMPDIR in the run directory (``{run}`` is replaced inside the slot)
BASE_ENV = (("PATH", "/usr/bin:/bin"), ("HOME", "{run}"), ("TMPDIR", "{run}"), ("LANG", "C.UTF-8"))


@dataclass(frozen=True)
class Profile:
    """What one language's toolchain needs. ``compile``/``run``: argv run in the run directory (``compile``
    None: interpreted); ``env``: added to :data:`BASE_ENV`; ``compile_cpu``/``compile_memory_mb``/
    ``compile_processes``: the compile step's limits (the toolchain's own, not the program's);
    ``run_threads``: processes the runtime itself starts, added to the program's ``max_processes``;
    ``integral_floats``: the language has no integer type (an ``int`` may arrive as an integral float);
    ``packages``: Debian packages that install it; ``version``: argv printing the version."""

    code: str
    title: str
    file: str
    compile: tuple[str, ...] | None
    run: tuple[str, ...]
    fences: frozenset[str]
    packages: tuple[str, ...]
    version: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    compile_cpu: float = 10.0
    compile_memory_mb: int = 1024
    compile_processes: int = 16
    run_threads: int = 0
    integral_floats: bool = False
    #: the least address space (MiB) the runtime needs to start: V8, the Go runtime and the JVM reserve
    #: virtual memory up front (node dies with "Failed to reserve virtual memory for CodeRange" under 512 MiB).
    #: RLIMIT_AS is raised to it; the program's memory budget (the memory cgroup) is unchanged
    address_space_mb: int = 0
    #: a file the compile step must leave in the run directory for the run step to start, checked by the
    #: worker before the run step (a regular file, not a symlink): Java's ``Main.class`` (a unit that declares
    #: a package compiles it into a subdirectory, and the JVM would start and find no class). The run steps
    #: ``./main`` need no such check: the exec itself fails on anything that is not a runnable file there
    needs: str | None = None
    hello: str = field(default="", repr=False)

    def tools(self) -> list[str]:
        """The executables the steps exec (checked before a request is sent)."""
        return [argv[0] for argv in (self.compile, self.run) if argv and argv[0].startswith("/")]


PROFILES: dict[str, Profile] = {p.code: p for p in (
    Profile("c", "C (gcc)", "main.c",
            ("/usr/bin/gcc", "-std=gnu11", "-O0", "-pipe", "-w", "-o", "main", "main.c", "-lm"), ("./main",),
            frozenset({"c", "h"}), ("gcc", "libc6-dev"), ("/usr/bin/gcc", "--version"),
            hello='#include <unistd.h>\n#include <stdio.h>\nint main(void){dprintf(3, "0 \\"hello\\"\\n");return 0;}\n'),
    Profile("cpp", "C++17 (g++)", "main.cpp",
            ("/usr/bin/g++", *PCH_FLAGS, "-pipe", "-w", "-I", PCH_DIR, "-o", "main", "main.cpp"), ("./main",),
            frozenset({"cpp", "c++", "cc", "cxx", "hpp"}), ("g++",), ("/usr/bin/g++", "--version"),
            compile_cpu=20.0,
            hello='#include <cstdio>\n#include <unistd.h>\nint main(){dprintf(3, "0 \\"hello\\"\\n");}\n'),
    Profile("java", "Java 17 (OpenJDK)", "Main.java",
            ("/usr/bin/javac", *(f"-J{f}" for f in JVM_FLAGS), "-nowarn", "-encoding", "UTF-8", "-cp",
             JAVATUPLES, "-d", ".", "Main.java"),
            ("/usr/bin/java", *JVM_FLAGS, "-cp", ".:" + JAVATUPLES, "Main"),
            frozenset({"java"}), ("openjdk-17-jdk-headless", "libjavatuples-java"), ("/usr/bin/javac", "-version"),
            compile_cpu=20.0, address_space_mb=1024, needs="Main.class",
            hello='public class Main { public static void main(String[] a) throws Exception {\n'
                  '  try (java.io.FileOutputStream f = new java.io.FileOutputStream("/proc/self/fd/3")) {\n'
                  '    f.write("0 \\"hello\\"\\n".getBytes("UTF-8")); } } }\n'),
    # Interpreted languages: the compile step is the toolchain's own syntax check, so a program that does not
    # parse is `compile_error` as in Python (and Bash, which parses as it runs, never runs half of it).
    Profile("js", "JavaScript (Node.js)", "main.js", ("/usr/bin/node", "--check", "main.js"),
            ("/usr/bin/node", "--max-old-space-size=256", "--v8-pool-size=1", "main.js"),
            frozenset({"js", "javascript", "node", "nodejs", "mjs"}), ("nodejs",), ("/usr/bin/node", "--version"),
            # node reads /etc/ssl/openssl.cnf at start and exits on EACCES (Landlock at the uid level)
            env=(("OPENSSL_CONF", "/dev/null"),), integral_floats=True, address_space_mb=2048,
            hello='require("fs").writeSync(3, "0 " + JSON.stringify("hello") + "\\n");\n'),
    Profile("php", "PHP", "main.php", ("/usr/bin/php", "-l", "-d", "display_errors=stderr", "main.php"),
            ("/usr/bin/php", "-d", "display_errors=stderr", "-d", "memory_limit=-1", "main.php"),
            frozenset({"php"}), ("php-cli",), ("/usr/bin/php", "--version"),
            hello='<?php\n$f = fopen("php://fd/3", "w"); fwrite($f, "0 " . json_encode("hello") . "\\n");\n'),
    Profile("sh", "Bash", "main.sh", ("/usr/bin/bash", "-n", "main.sh"), ("/usr/bin/bash", "main.sh"),
            frozenset({"sh", "bash", "shell", "zsh"}), ("bash",), ("/usr/bin/bash", "--version"),
            hello='echo \'0 "hello"\' >&3\n'),
    Profile("go", "Go (gc)", "main.go", ("/usr/bin/go", "build", "-o", "main", "main.go"), ("./main",),
            frozenset({"go", "golang"}), ("golang-go",), ("/usr/bin/go", "version"),
            env=(("GOCACHE", "{run}/.gocache"), ("GOPATH", "{run}/go"), ("GO111MODULE", "off"),
                 ("CGO_ENABLED", "0"), ("GOMAXPROCS", "1"), ("GOFLAGS", "-buildvcs=false")),
            compile_cpu=20.0, address_space_mb=1024,
            hello='package main\nimport "os"\nfunc main() { os.NewFile(3, "r").WriteString("0 \\"hello\\"\\n") }\n'),
)}

#: the language codes, Python first (Python programs run in the worker's interpreter, not as argv)
LANGUAGES = ("python",) + tuple(PROFILES)
_PY_FENCES = frozenset({"python", "py", "python3", "py3"})
_ALIASES: dict[str, str] = {name: code for code, p in PROFILES.items() for name in p.fences}
_ALIASES.update({name: "python" for name in _PY_FENCES})
_ALIASES.update({"javascript": "js", "node": "js", "bash": "sh", "shell": "sh", "golang": "go", "c++": "cpp"})


def canonical_language(name: Any) -> str | None:
    """The language code for a name or fence name (case-insensitive), None when unknown."""
    if not isinstance(name, str):
        return None
    n = name.strip().lower()
    if n in LANGUAGES:
        return n
    return _ALIASES.get(n)


@functools.lru_cache(maxsize=256)
def fence_names(name: str) -> frozenset[str]:
    """The fence info strings that mark a block of this language (``code_block(text, "cpp")``).

        >>> sorted(fence_names("c++"))
        ['c++', 'cc', 'cpp', 'cxx', 'hpp']
    """
    code = canonical_language(name)
    if code is None:
        return frozenset({name.lower()})
    return _PY_FENCES if code == "python" else PROFILES[code].fences


def unknown_language_message(value: Any) -> str:
    return (f"unknown language {value!r}: one of {', '.join(LANGUAGES)} (or a fence name such as c++, "
            "javascript, bash, golang)")


@dataclass(frozen=True)
class Case:
    expected: Any
    type: tuple
    tolerance: float | None


@dataclass(frozen=True)
class StructuredTests:
    harness: str
    cases: tuple[Case, ...]


def parse_tests(tests: Any) -> StructuredTests:
    """Read a row's ``tests`` for a non-Python program: a ``rewardlang-tests/1`` JSON object (or its text).
    Anything else is refused with :class:`TestFormatError` naming why and the format expected."""
    obj = tests
    if isinstance(tests, str):
        text = tests.strip()
        if not text.startswith("{"):
            raise TestFormatError(_PLAIN)
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise TestFormatError(f"tests are not valid JSON ({e}); {_EXPECT}") from None
    if not isinstance(obj, dict):
        raise TestFormatError(_PLAIN)
    if obj.get("format") != TESTS_FORMAT:
        raise TestFormatError(f"tests have format {obj.get('format')!r}, not {TESTS_FORMAT!r}; {_EXPECT}")
    harness = obj.get("harness")
    cases = obj.get("cases")
    if not isinstance(harness, str) or not harness.strip():
        raise TestFormatError(f"tests have no harness (a string of target-language source); {_EXPECT}")
    if not isinstance(cases, list) or not cases:
        raise TestFormatError(f"tests have no cases; {_EXPECT}")
    out = []
    for i, c in enumerate(cases):
        if not isinstance(c, dict) or "expected" not in c or not isinstance(c.get("type"), str):
            raise TestFormatError(f"case {i} needs \"expected\" and a \"type\" string; {_EXPECT}")
        try:
            t = parse_type(c["type"])
        except TypeExprError as e:
            raise TestFormatError(f"case {i}: {e}") from None
        tol = c.get("tolerance")
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0):
            raise TestFormatError(f"case {i}: tolerance must be a number >= 0 or null, not {tol!r}")
        out.append(Case(c["expected"], t, None if tol is None else float(tol)))
    return StructuredTests(harness, tuple(out))


_EXPECT = ('expected a JSON object {"format": "rewardlang-tests/1", "harness": ..., "cases": [{"expected": ..., '
           '"type": ..., "tolerance": ...}]} (docs/languages.md)')
_PLAIN = ("plain-text tests cannot be judged safely for a program that is not Python (its exit status can be "
          f"forged): give a JSON object {_EXPECT[len('expected a JSON object '):]}")


class ToolchainMissing(RuntimeError):
    """A language's toolchain is not installed: an infrastructure failure (masked), never the program's."""


_tool_ok: dict[str, bool] = {}


def _check_tools(profile: Profile) -> None:
    for tool in profile.tools():
        ok = _tool_ok.get(tool)
        if ok is None:
            ok = _tool_ok[tool] = os.access(tool, os.X_OK)
        if not ok:
            raise ToolchainMissing(f"{profile.title}: {tool} is not installed (apt-get install -y "
                                   f"{' '.join(profile.packages)}; see `rewardlang doctor`)")


#: the compile step's output cap (the compiler's diagnostics, stdout and stderr together)
COMPILE_OUTPUT_BYTES = 1 << 20


#: LanguagePlan.encoded's headers and hard timeouts, by (profile, limits, nproc base, compile CPU, slack)
_ENCODED: dict[tuple, tuple[bytes, float]] = {}
#: the one passing result every passing case shares (a frozen dataclass: one object serves them all)
_PASSED = TestResult("pass")


@dataclass(frozen=True)
class LanguagePlan:
    """One program in another language: what to send into the sandbox and how to judge what returns."""

    profile: Profile
    tests: StructuredTests
    #: the compile step's CPU seconds (None: the profile's ``compile_cpu``)
    compile_cpu: float | None = None

    @property
    def n(self) -> int:
        return len(self.tests.cases)

    def source(self, code: str) -> str:
        """The one source file the sandbox writes: the program's unit, then the harness."""
        return code + "\n" + self.tests.harness

    def steps(self, limits: Limits) -> list[tuple[str, Limits]]:
        p = self.profile
        out = []
        if p.compile is not None:
            cpu = float(self.compile_cpu) if self.compile_cpu is not None else max(p.compile_cpu, float(limits.cpu))
            out.append(("compile", Limits(cpu=cpu,
                                          memory_mb=max(p.compile_memory_mb, int(limits.memory_mb)),
                                          output_bytes=COMPILE_OUTPUT_BYTES, observation_bytes=1 << 16,
                                          processes=max(p.compile_processes, int(limits.processes)),
                                          file_bytes=max(int(limits.file_bytes), 64 << 20))))
        out.append(("run", Limits(cpu=limits.cpu, wall=limits.wall, memory_mb=limits.memory_mb,
                                  output_bytes=limits.output_bytes, observation_bytes=limits.observation_bytes,
                                  processes=int(limits.processes) + p.run_threads, file_bytes=limits.file_bytes)))
        return out

    def wire(self, limits: Limits, nproc_base: int) -> dict[str, Any]:
        """The request header (the source travels as the program frame)."""
        _check_tools(self.profile)
        env = dict(BASE_ENV + self.profile.env)
        steps = []
        mem = 0
        for name, lim in self.steps(limits):
            argv = self.profile.compile if name == "compile" else self.profile.run
            w = lim.to_wire(nproc_base)
            mem = max(mem, int(w["mem"]))
            w["mem"] = max(int(w["mem"]), self.profile.address_space_mb << 20)
            st = {"step": name, "argv": list(argv or ()), "env": env, "limits": w, "stderr": name == "compile"}
            if name == "run" and self.profile.needs and self.profile.compile is not None:
                st["needs"] = self.profile.needs
            steps.append(st)
        # "limits" (last, see pool.request_memory): the memory group's budget, the largest step's budget
        top = dict(steps[-1]["limits"], mem=mem)
        return {"mode": "argv", "file": self.profile.file, "steps": steps, "limits": top}

    def hard_timeout(self, limits: Limits, slack: float) -> float:
        return sum(lim.hard_wall + RUN_END_S for _, lim in self.steps(limits)) + slack

    def encoded(self, limits: Limits, nproc_base: int, slack: float) -> tuple[bytes, float]:
        """:meth:`wire` as the JSON bytes sent, and :meth:`hard_timeout`: computed once per distinct (profile,
        limits, compile CPU) and kept (a batch sends the same header with every program of a language;
        building it was most of the per-program work of the caller, issue 20). The toolchain is checked at
        every call, as :meth:`wire` does.

            >>> plan = language_plan("sh", {"format": TESTS_FORMAT, "harness": "# h",
            ...                              "cases": [{"expected": 1, "type": "int", "tolerance": None}]})
            >>> head, hard = plan.encoded(Limits(cpu=2), 16, 5.0)
            >>> json.loads(head) == plan.wire(Limits(cpu=2), 16), hard == plan.hard_timeout(Limits(cpu=2), 5.0)
            (True, True)
        """
        _check_tools(self.profile)
        key = (self.profile, limits, nproc_base, self.compile_cpu, slack)
        got = _ENCODED.get(key)
        if got is None:
            got = (json.dumps(self.wire(limits, nproc_base)).encode("utf-8", "surrogatepass"),
                   self.hard_timeout(limits, slack))
            if len(_ENCODED) >= 256:
                _ENCODED.clear()
            _ENCODED[key] = got
        return got


    def judge(self, raw: RawResult, level: str = "") -> Verdict:
        """The verdict for what the sandbox returned."""
        if raw.runs is None:
            return Verdict("infra", infra=raw.infra or "sandbox failure", level=level)
        runs = raw.runs
        cpu = sum(r.cpu for r in runs)
        wall = sum(r.wall for r in runs)
        n = self.n
        for i, r in enumerate(runs):
            if r.exec_failed or r.not_built:
                return self._not_started(i, r, level, cpu, wall)
        run = runs[-1]
        if self.profile.compile is not None:
            comp = runs[0]
            if comp.reason is not None or comp.exit != 0:
                why = _compile_why(comp)
                return Verdict("compile_error", tuple(TestResult("compile_error", why) for _ in range(n)),
                               level=level, cpu=cpu, wall=wall, stdout=why)
            if len(runs) < 2:
                return Verdict("infra", infra="the run step did not run", level=level, cpu=cpu, wall=wall)
        values, problems = parse_records(run.res, n)
        results: list[TestResult] = []
        term = None   # how the run ended: needed only for a case without its record
        floats = self.profile.integral_floats
        for i, case in enumerate(self.tests.cases):
            v = values[i]
            if has_value(v):
                ok = compare(case.expected, v, case.type, case.tolerance, integral_floats=floats)
                results.append(_PASSED if ok else TestResult("fail", f"case {i}: got {_short(v)}"))
                continue
            bad = next((p for p in problems if p.startswith(f"case {i}:")), None)
            if bad is None and term is None:
                term = termination(run)
            results.append(TestResult("fail", bad) if bad else TestResult(*term))
        if run.reason == "memory":
            results = [TestResult("memory", OOM_WHY) if r.status == "pass" else r for r in results]
        outcome = worst([r.status for r in results])
        out = run.out[:2000].decode("utf-8", "replace")
        return Verdict(outcome, tuple(results), level=level, cpu=cpu, wall=wall, stdout=out)

    def _not_started(self, i: int, run: Any, level: str, cpu: float, wall: float) -> Verdict:
        """The verdict of a program whose step ``i`` could not be started. The rule (issue 32): only a
        toolchain executable (the profile's own absolute paths, under the read-only ``/usr``, checked before
        the request) may mask; an exec failure of anything else (``./main``: what the program's own compile
        step built in its run directory) or a missing file the step needs (Java's ``Main.class``) is the
        program's outcome, ``compile_error`` (nothing runnable was built), never a mask. A compile step that
        exits 0 without a runnable result (a Go unit of another package: an archive; a C unit whose
        ``.interp`` the kernel refuses; a Java unit in a package) therefore earns what a failed compile does."""
        steps = ([("compile", self.profile.compile)] if self.profile.compile is not None else []) + \
            [("run", self.profile.run)]
        name, argv = steps[min(i, len(steps) - 1)]
        exe = argv[0] if argv else ""
        if run.exec_failed and exe in self.profile.tools():
            _forget_tool(exe)
            return Verdict("infra", infra=f"{self.profile.title}: {exe} could not be started in the sandbox "
                                          f"(the toolchain is missing or unusable; see `rewardlang doctor`)",
                           level=level, cpu=cpu, wall=wall)
        if run.not_built:
            why = (f"nothing runnable was built: the compile step exited 0 without leaving {self.profile.needs} "
                   f"in the run directory")
        else:
            why = (f"nothing runnable was built: the {name} step's {exe} (made by the program's own compile "
                   f"step) could not be executed")
        return Verdict("compile_error", tuple(TestResult("compile_error", why) for _ in range(self.n)),
                       level=level, cpu=cpu, wall=wall, stdout=why)


def _forget_tool(tool: str) -> None:
    """Check ``tool`` again before the next request (its exec failed in the sandbox: it may be gone)."""
    _tool_ok.pop(tool, None)


def _compile_why(run: Any) -> str:
    if run.reason in ("cpu", "wall"):
        head = "compilation exceeded its time limit"
    elif run.reason == "memory":
        head = "compilation exceeded its memory limit"
    elif run.reason == "output":
        head = "compilation exceeded its output limit"
    elif run.exit < 0:
        head = f"the compiler was killed by signal {-run.exit}"
    else:
        head = f"compilation failed (exit {run.exit})"
    msg = run.out[:600].decode("utf-8", "replace").strip()
    return (head + (": " + msg if msg else ""))[:600]


def _short(v: Any) -> str:
    s = json.dumps(v)
    return s if len(s) <= 120 else s[:117] + "..."


def language_plan(language: str, tests: Any, compile_cpu: float | None = None) -> LanguagePlan:
    """The plan for one program in ``language`` (a code or fence name) with structured ``tests``.
    Raises :class:`TestFormatError` (bad tests) or ``ValueError`` (unknown language)."""
    code = canonical_language(language)
    if code is None or code == "python":
        raise ValueError(unknown_language_message(language))
    return LanguagePlan(PROFILES[code], parse_tests(tests), compile_cpu)


def build_pch(dest: str = PCH_DIR, gxx: str = "/usr/bin/g++") -> str:
    """Build the precompiled ``bits/stdc++.h`` into ``dest`` (written beside, then renamed: complete or absent).
    Returns the path of the ``.gch``. About 5 s CPU and 100 MB.

        >>> build_pch("/tmp/pch")                                  # doctest: +SKIP
        '/tmp/pch/bits/stdc++.h.gch'
    """
    import subprocess
    import tempfile

    r = subprocess.run([gxx, *PCH_FLAGS, "-x", "c++", "-E", "-H", "-"], input="#include <bits/stdc++.h>\n",
                       capture_output=True, text=True, check=False)
    header = next((ln[2:].strip() for ln in r.stderr.splitlines() if ln.startswith(". ")
                   and ln.rstrip().endswith("bits/stdc++.h")), None)
    if r.returncode != 0 or header is None:
        raise RuntimeError(f"{gxx} cannot find bits/stdc++.h: {r.stderr.strip()[:300]}")
    out_dir = os.path.join(dest, "bits")
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, "stdc++.h.gch")
    fd, tmp = tempfile.mkstemp(prefix=".stdc++.h.gch.", dir=out_dir)
    os.close(fd)
    try:
        subprocess.run([gxx, *PCH_FLAGS, "-x", "c++-header", header, "-o", tmp], check=True, capture_output=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--build-pch"]:
        print(build_pch())
    else:
        print("usage: python3 -m rewardlang.sandbox.languages --build-pch", file=sys.stderr)
        raise SystemExit(2)

