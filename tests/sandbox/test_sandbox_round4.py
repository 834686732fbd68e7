"""Reward integrity, round 4 (issue 32), the sandbox's classes: a program that breaks its own build gets its
own outcome, never a mask (class 1); no host-wide kernel quota is reachable from inside (class 5, ptys and
every other counter); a verdict does not depend on how the program was batched ("Also" item 2). Each attack
runs one by one on the one-slot fixture, followed on the same slot by a correct program, and pooled (several
slots, one batch, each followed by correct programs: ``pooled.run_pooled``). Nothing here is timed: where a
race was the bug, the test makes it go the bad way every time."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
from lang_programs import PROBE, PROBE_TESTS, lang_tests, require, unit
from pooled import run_pooled

from rewardlang.sandbox import _worker, languages, pool, spawnlib
from rewardlang.sandbox.config import Limits, SandboxConfig
from rewardlang.sandbox.judge import Verdict
from rewardlang.sandbox.languages import PROFILES, language_plan
from rewardlang.sandbox.raw import RawResult, RawRun
from rewardlang.sandbox.runner import NPROC_BASE, Sandbox, Task

LIMITS = Limits(cpu=2.0, wall=5.0, memory_mb=512, processes=16)
COMPILE_CPU = 10.0
TESTS = ["assert f(2) == 4", "assert f(5) == 10"]

#: the correct program that follows every attack: it uses multiprocessing and tempfile, so a slot left with
#: fewer processes, files or IPC than a fresh one fails it
GOOD_MP = textwrap.dedent("""
    import multiprocessing, os, tempfile

    def _work(q, path):
        with open(path) as fh:
            q.put(2 * int(fh.read()))

    def f(x):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x")
            with open(path, "w") as fh:
                fh.write(str(x))
            q = multiprocessing.Queue()
            p = multiprocessing.Process(target=_work, args=(q, path))
            p.start()
            v = q.get(timeout=20)
            p.join()
        return v
    """)


def good(k: int = 0) -> Task:
    return Task(GOOD_MP + f"# {k}\n", TESTS, None, "mbpp", LIMITS)


def good_lang(lang: str, k: int = 0) -> Task:
    return Task(unit(lang), lang_tests(lang), language=lang, limits=LIMITS, compile_cpu=COMPILE_CPU)


def good_mixed(k: int) -> Task:
    """The followers of a pooled batch, in turn: the Python program above, a correct Bash one, and the probe
    that the run directory, /tmp and /dev/shm hold nothing of an earlier program."""
    if k % 3 == 2:
        return Task(PROBE, PROBE_TESTS, limits=LIMITS, language="sh")
    return good(k) if k % 3 == 0 else good_lang("sh", k)


def _then_good(sb: Sandbox, v: Verdict, lang: str | None = None) -> None:
    """After an attack: no mask, and a correct program (Python, and one in ``lang``) passes on the same
    slot with no respawn and no stray process."""
    assert v.infra is None, v.infra
    starts = sb.pool.stats["slot_starts"]
    after = [good()] + ([good_lang(lang), Task(PROBE, PROBE_TESTS, limits=LIMITS, language="sh")]
                        if lang and lang != "python" else [])
    for a in sb.evaluate(after, use_cache=False):
        assert a.outcome == "pass", a.details()
    assert sb.pool.stats["slot_starts"] == starts, "the slot was respawned"
    assert sb.stray_processes() == []


# ------------------------------------------------------------------------------------------------------
# class 1: a program that makes its own run step fail to start gets its own outcome
# ------------------------------------------------------------------------------------------------------

#: an .interp section the kernel refuses (no NUL at its end): the link succeeds, exec says ENOEXEC
BAD_INTERP = '__asm__(".section .interp,\\"a\\"\\n.ascii \\"x\\"\\n.previous\\n");\n'


@dataclasses.dataclass(frozen=True)
class Build:
    name: str
    lang: str
    code: str
    outcome: str
    detail: str = ""
    slow: bool = False


BUILDS = [
    # the example: `go build -o main` of another package writes a package archive; any body
    Build("go_package_notmain", "go", unit("go").replace("package main", "package notmain"), "compile_error",
          "./main"),
    Build("go_package_notmain_wrong_body", "go", unit("go", False).replace("package main", "package notmain"),
          "compile_error", "./main", slow=True),
    Build("c_interp_refused", "c", BAD_INTERP + unit("c"), "compile_error", "./main"),
    Build("cpp_interp_refused", "cpp", BAD_INTERP + unit("cpp"), "compile_error", "./main", slow=True),
    # javac puts a unit that declares a package into a subdirectory: the JVM would start and find no Main
    Build("java_package", "java", "package p;\n" + unit("java"), "compile_error", "Main.class"),
    # what a program does to its own files once it runs is its own business (it already started)
    Build("c_unlinks_its_binary", "c", "#include <sys/stat.h>\n" + unit("c")
          + '__attribute__((constructor)) static void gone(void) { unlink("main"); chmod(".", 0); }\n', "pass",
          slow=True),
    Build("go_removes_its_binary", "go", unit("go") + 'func init() { os.Remove("main"); os.Chmod(".", 0) }\n',
          "pass", slow=True),
    Build("sh_removes_its_file_and_dir", "sh", "chmod 000 main.sh; rm -f main.sh; cd / && rmdir /tmp/run\n"
          + unit("sh"), "pass"),
    Build("js_unlinks_its_file", "js", "require('fs').unlinkSync(__filename); require('fs').chmodSync('.', 0);\n"
          + unit("js"), "pass", slow=True),
    Build("php_unlinks_its_file", "php", unit("php") + "chmod(__FILE__, 0); unlink(__FILE__); chmod('.', 0);\n",
          "pass", slow=True),
]


def _build_task(b: Build) -> Task:
    return Task(b.code, lang_tests(b.lang), language=b.lang, limits=LIMITS, compile_cpu=COMPILE_CPU)


def _check_build(b: Build, v: Verdict) -> None:
    assert v.infra is None, (b.name, v.infra)
    assert v.outcome == b.outcome, (b.name, v.details())
    assert all(t.status == b.outcome for t in v.tests), (b.name, v.details())
    if b.outcome == "compile_error":
        assert "nothing runnable was built" in v.tests[0].detail and b.detail in v.tests[0].detail, v.tests[0].detail


@pytest.mark.parametrize("b", [pytest.param(b, id=b.name, marks=[pytest.mark.slow] if b.slow else []) for b in BUILDS])
def test_a_program_that_breaks_its_own_run_step_gets_its_own_outcome(b: Build, sb1: Sandbox) -> None:
    require(b.lang)
    stats: Counter = Counter()
    v = sb1.evaluate([_build_task(b)], use_cache=False, stats=stats)[0]
    _check_build(b, v)
    assert stats["sandbox.infra_failures"] == 0 and stats["sandbox.toolchain_missing"] == 0
    _then_good(sb1, v, b.lang)


def _spy_spawns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    request = pool.Slot.request

    def spy(self: pool.Slot, req: object, hard: float) -> tuple:
        head, blobs = request(self, req, hard)   # type: ignore[arg-type]
        if isinstance(req, tuple) and b'"mode": "argv"' in req[0]:
            seen.extend(r.get("spawn") for r in head["runs"] if not r.get("not_built"))   # (not started)
        return head, blobs

    monkeypatch.setattr(pool.Slot, "request", spy)
    return seen


# The default run keeps the fork path (missing-library-forks), which only this test reaches with these builds. The
# spawner's (5 s) is in the slow run: every default build already runs through the installed spawner in
# test_a_program_that_breaks_its_own_run_step_gets_its_own_outcome (sb1's worker has it), and that a step is
# started by the spawner ("clone") or forked is test_spawn.py's test_steps_without_the_library_fork_with_the_same_verdicts.
@pytest.mark.parametrize("installed", [pytest.param(True, id="spawner", marks=pytest.mark.slow),
                                       pytest.param(False, id="missing-library-forks")])
def test_both_ways_of_starting_a_step_give_the_program_its_outcome(installed: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's C path (rl_program / rl_step in spawn.c) and its Python path (each step forked, where the
    spawner library is not installed) report the failed exec alike, and the trusted side decides it."""
    require("c")
    require("sh")
    lib = spawnlib.installed() if installed else None
    if installed and lib is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{spawnlib.library_path()} is missing: scripts/install.sh builds it")
        pytest.skip("the spawner is not installed here")
    monkeypatch.setattr(spawnlib, "installed", lambda lib_dir=spawnlib.LIB_DIR: lib)
    seen = _spy_spawns(monkeypatch)
    builds = [b for b in BUILDS if not b.slow or b.name == "cpp_interp_refused"]
    with Sandbox(SandboxConfig(slots=1)) as sb:
        for b in builds:
            require(b.lang)
            v = sb.evaluate([_build_task(b)], use_cache=False)[0]
            _check_build(b, v)
            _then_good(sb, v, b.lang)
    assert seen and set(seen) == {"clone" if installed else "fork"}, seen


def _raw(*runs: dict) -> RawResult:
    base = {"exit": 0, "reason": None, "cpu": 0.01, "wall": 0.01, "setup_failed": False, "clean": True,
            "res": b"", "out": b""}
    return RawResult([RawRun(**dict(base, **r)) for r in runs])


def test_the_judge_masks_only_a_toolchain_that_cannot_be_started() -> None:
    """The rule on raw results: an exec failure of a step whose executable is one of the profile's toolchain
    paths is masked; of anything else (``./main``, built by the program) or a missing file the step needs is
    ``compile_error`` for every case."""
    tests = {"format": "rewardlang-tests/1", "harness": "//", "cases": [{"expected": 1, "type": "int",
                                                                        "tolerance": None}] * 2}
    go = language_plan("go", tests)
    v = go.judge(_raw({}, {"exit": 121, "exec_failed": True}))
    assert v.outcome == "compile_error" and v.infra is None and [t.status for t in v.tests] == ["compile_error"] * 2
    v = go.judge(_raw({"exit": 121, "exec_failed": True}))             # /usr/bin/go itself
    assert v.outcome == "infra" and "/usr/bin/go" in (v.infra or "")
    java = language_plan("java", tests)
    v = java.judge(_raw({}, {"not_built": True}))
    assert v.outcome == "compile_error" and "Main.class" in v.tests[0].detail
    v = java.judge(_raw({}, {"exit": 121, "exec_failed": True}))       # /usr/bin/java
    assert v.outcome == "infra"
    js = language_plan("js", tests)
    assert js.judge(_raw({}, {"exit": 121, "exec_failed": True})).outcome == "infra"   # /usr/bin/node
    assert java.wire(Limits(), 2)["steps"][1]["needs"] == "Main.class"
    assert "needs" not in go.wire(Limits(), 2)["steps"][1]    # ./main: the exec checks it


def test_a_toolchain_that_cannot_be_started_in_the_slot_is_masked_and_checked_again(
        sb1: Sandbox, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A toolchain present where the trusted side checks it but not inside the slot (here: a file in the
    host's /tmp, which no slot sees) fails its exec there: an infrastructure failure, masked, and checked
    again before the next request."""
    require("sh")
    fake = os.path.join(str(tmp_path), "bash")
    with open(fake, "w") as fh:
        fh.write("#!/bin/sh\n")
    os.chmod(fake, 0o755)
    gone = dataclasses.replace(PROFILES["sh"], run=(fake, "main.sh"))
    monkeypatch.setitem(languages.PROFILES, "sh", gone)
    stats: Counter = Counter()
    v = sb1.evaluate([Task(unit("sh"), lang_tests("sh"), language="sh", limits=LIMITS)], use_cache=False,
                     stats=stats)[0]
    assert v.outcome == "infra" and fake in (v.infra or ""), v.details()
    assert stats["sandbox.infra_failures"] == 1
    assert fake not in languages._tool_ok          # checked again next time
    monkeypatch.undo()
    _then_good(sb1, Verdict("pass"), "sh")


# ------------------------------------------------------------------------------------------------------
# class 5: host-wide kernel quotas
# ------------------------------------------------------------------------------------------------------

_NR = _worker.SYSCALLS[_worker._machine()]
_SYSCALL = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
"""

#: name -> (the program: f(x) takes as many of the counter's objects as it can, holds them, and returns how
#: many it got; the most it may get). Each program would hold thousands where the quota is reachable.
COUNTERS: dict[str, tuple[str, int]] = {
    # kernel.pty.max (4096, of which 1024 reserved for the host's own devpts): a program held 3,071
    "pty": ("""
import os
def f(x):
    held = []
    for path in ("/dev/ptmx", "/dev/pts/ptmx", "/dev/tty"):
        for _ in range(50):
            try:
                held.append(os.open(path, os.O_RDWR | os.O_NOCTTY))
            except OSError:
                break
    for _ in range(4000):
        try:
            held.append(os.openpty())
        except OSError:
            break
    return len(held)
""", 0),
    # kernel.keys.maxkeys / root_maxkeys (per user) and the session keyring
    "keyring": (_SYSCALL + f"""
def f(x):
    n = 0
    for i in range(1000):
        if libc.syscall({_NR['add_key']}, b"user", b"k%d" % i, b"v", 1, -3) < 0:   # the session keyring
            break
        n += 1
    n += libc.syscall({_NR['keyctl']}, 1, None) >= 0                            # join a new session keyring
    n += libc.syscall({_NR['request_key']}, b"user", b"k0", None, 0) >= 0
    return n
""", 0),
    # fs.mqueue.queues_max, RLIMIT_MSGQUEUE
    "posix_mqueue": (_SYSCALL + f"""
def f(x):
    n = 0
    for i in range(300):
        if libc.syscall({_NR['mq_open']}, b"q%d" % i, os.O_CREAT | os.O_RDWR, 0o600, None) < 0:
            break
        n += 1
    return n + os.path.exists("/dev/mqueue")
""", 0),
    # kernel.sem (SEMMNI), kernel.shmmni / shmall, kernel.msgmni: System V IPC
    "sysv_sem": (_SYSCALL + f"""
def f(x):
    n = 0
    for _ in range(40000):
        if libc.syscall({_NR['semget']}, 0, 1, 0o1600) < 0:
            break
        n += 1
    return n
""", 0),
    "sysv_shm": (_SYSCALL + f"""
def f(x):
    n = 0
    for _ in range(5000):
        if libc.syscall({_NR['shmget']}, 0, 4096, 0o1600) < 0:
            break
        n += 1
    return n
""", 0),
    "sysv_msg": (_SYSCALL + f"""
def f(x):
    n = 0
    for _ in range(40000):
        if libc.syscall({_NR['msgget']}, 0, 0o1600) < 0:
            break
        n += 1
    return n
""", 0),
    # fs.fanotify.max_user_groups / marks, fs.inotify.max_user_instances / watches (per user)
    "fanotify": (_SYSCALL + f"""
def f(x):
    n = 0
    for _ in range(200):
        if libc.syscall({_NR['fanotify_init']}, 0, 0) < 0:
            break
        n += 1
    return n
""", 0),
    "inotify": (_SYSCALL + f"""
def f(x):
    n = 0
    for _ in range(200):
        fd = libc.syscall({_NR['inotify_init1']}, 0)
        if fd < 0:
            break
        n += 1 + (libc.syscall({_NR['inotify_add_watch']}, fd, b"/tmp", 0xfff) >= 0)
    return n
""", 0),
    # fs.aio-max-nr (host-global)
    "aio": (_SYSCALL + f"""
def f(x):
    n = 0
    for _ in range(2000):
        ctx = ctypes.c_ulong(0)
        if libc.syscall({_NR['io_setup']}, 64, ctypes.byref(ctx)) < 0:
            break
        n += 1
    return n
""", 0),
    # kernel.pid_max and kernel.threads-max (host-global): RLIMIT_NPROC of the slot's dedicated uid bounds
    # threads and processes together (the bound is filled in below per level)
    "pids_and_threads": ("""
import os, threading, time
def f(x):
    stop = threading.Event()
    n = 0
    for _ in range(3000):
        try:
            threading.Thread(target=stop.wait, daemon=True).start()
        except RuntimeError:
            break
        n += 1
    for _ in range(3000):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    stop.set()
    return n
""", -1),
    # fs.file-max (host-global): RLIMIT_NOFILE per process (256), times the processes above
    "open_files": ("""
import os
def f(x):
    held = []
    for _ in range(100000):
        try:
            held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            break
    return len(held) + 4          # 0-3 were open already
""", 256),
}


def _counter_task(name: str, level: str) -> Task:
    code, most = COUNTERS[name]
    if most < 0:
        most = LIMITS.processes + NPROC_BASE[level]
    return Task(textwrap.dedent(code), [f"assert f(0) <= {most}"], None, "mbpp", LIMITS)


@pytest.mark.parametrize("name", sorted(COUNTERS))
def test_no_host_wide_counter_can_be_spent_from_inside(name: str, sb1: Sandbox) -> None:
    v = sb1.evaluate([_counter_task(name, sb1.level)], use_cache=False)[0]
    assert v.outcome == "pass", v.details()
    _then_good(sb1, v)


PTY_C = """#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>
int ptys(void) {
    int n = 0;
    for (int i = 0; i < 4000; i++) { if (posix_openpt(O_RDWR | O_NOCTTY) < 0) break; n++; }
    for (int i = 0; i < 50; i++) { if (open("/dev/pts/ptmx", O_RDWR) < 0) break; n++; }
    return n;
}
"""
PTY_C_TESTS = {"format": "rewardlang-tests/1",
               "harness": 'int main(void) { dprintf(3, "0 %d\\n", ptys()); return 0; }\n',
               "cases": [{"expected": 0, "type": "int", "tolerance": None}]}


def test_a_compiled_program_opens_no_pty_either(sb1: Sandbox) -> None:
    require("c")
    v = sb1.evaluate([Task(PTY_C, PTY_C_TESTS, language="c", limits=LIMITS, compile_cpu=COMPILE_CPU)],
                     use_cache=False)[0]
    assert v.outcome == "pass", v.details()
    _then_good(sb1, v, "c")


def test_the_slot_has_no_pty_device() -> None:
    """Where programs could reach a devpts instance: bubblewrap's own /dev/pts is covered by an empty
    read-only tmpfs (/dev/ptmx points at nothing), the namespaces level's /dev has no pty device, the uid
    level's Landlock rules open none of /dev but null, zero, random and urandom."""
    from rewardlang.sandbox.launch import bwrap_argv

    argv = bwrap_argv("/usr/bin/bwrap", sys.executable, binds=[], worker_fd=5, seccomp_fd=6, tmp_size=1 << 20)
    i = argv.index("--dev")
    assert argv[argv.index("--tmpfs", i) + 1] == "/dev/pts" and "/dev/pts" == argv[argv.index("--remount-ro", i) + 1]


# ------------------------------------------------------------------------------------------------------
# "Also" item 2: a verdict does not depend on how the program was batched
# ------------------------------------------------------------------------------------------------------

#: the issue's program: a correct function that forks a daemon (setsid, then exec of /bin/sleep) and returns.
#: setsid is denied in the sandbox, so the child raised PermissionError back into the test runner, which
#: reported that error for the test its parent was passing: first or second, as the scheduler had it.
DAEMON = """
import os
def f(x):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.execv("/bin/sleep", ["sleep", "30"])
    WAIT
    return 2 * x
"""
#: the same race made to go the bad way every time: the parent returns only once the child has come back
#: into the runner (and, before the rule, written its record)
DAEMON_FIRST = DAEMON.replace("WAIT", "os.waitpid(pid, 0)")
DAEMON_RACE = DAEMON.replace("WAIT", "")
#: a fork whose child returns normally into the runner, which would then run the remaining tests in it too
FORK_RETURNS = """
import os
def f(x):
    pid = os.fork()
    if pid == 0:
        return -1
    os.waitpid(pid, 0)
    return 2 * x
"""
#: the module itself forks, and the child runs off the end of it
FORK_AT_IMPORT = """
import os
_pid = os.fork()
if _pid:
    os.waitpid(_pid, 0)
def f(x):
    return 2 * x
"""
#: a whole-program run (stdin/stdout): a fork's child ends the script with the parent's output still
#: buffered; only the program's own process flushes it
STDIO_FORK = """
import os, sys
a, b = map(int, sys.stdin.read().split())
print(a + b)
pid = os.fork()
if pid:
    os.waitpid(pid, 0)
"""
STDIO = json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})
#: tests that cannot be split run in the judge process: the daemon is forked inside a call it makes
JUDGED = "def check(candidate):\n    for k in range(3):\n        assert candidate(k) == 2 * k\n"


def _daemon_tasks(k: int) -> list[Task]:
    tag = f"\n# {k}\n"
    return [Task(DAEMON_FIRST + tag, TESTS, None, "mbpp", LIMITS), Task(DAEMON_RACE + tag, TESTS, None, "mbpp", LIMITS),
            Task(FORK_RETURNS + tag, TESTS, None, "mbpp", LIMITS),
            Task(FORK_AT_IMPORT + tag, TESTS, None, "mbpp", LIMITS),
            Task(DAEMON_FIRST + tag, JUDGED, "f", "humaneval", LIMITS),
            Task(STDIO_FORK + tag, STDIO, None, "stdio", LIMITS)]


def test_the_records_of_a_forked_child_never_decide_a_test_alone(sb1: Sandbox) -> None:
    tasks = _daemon_tasks(0)
    assert tasks[4].tests == JUDGED
    for t in tasks:
        v = sb1.evaluate([t], use_cache=False)[0]
        assert v.outcome == "pass", v.details()
        if t.tests == JUDGED:
            assert all(r.inside for r in v.tests)     # run in the judge process, the daemon in a call
        assert [r.status for r in v.tests] == ["pass"] * len(v.tests)
        _then_good(sb1, v)


def test_a_second_record_for_a_test_fails_it_whichever_came_first(sb1: Sandbox) -> None:
    """The program writing a record of its own for a test, before or after the runner's: the test fails
    (it passed when the forged record came first and claimed the right value)."""
    forge = textwrap.dedent("""
        import os, struct, json
        def f(x):
            if x == WHEN:
                d = json.dumps(["t", 0, "ok", ["i", hex(4)]]).encode()    # test 0's right value
                os.write(3, struct.pack("<I", len(d)) + d)
            return 2 * x
        """)
    # WHEN 2: during test 0, before the runner's record of it; WHEN 5: during test 1, after it
    for when in (2, 5):
        v = sb1.evaluate([Task(forge.replace("WHEN", str(when)), TESTS, None, "mbpp", LIMITS)], use_cache=False)[0]
        assert [t.status for t in v.tests] == ["fail", "pass"], v.details()
        assert "more than one record" in v.tests[0].detail
        _then_good(sb1, v)


def _burners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def test_batched_or_alone_the_verdict_is_the_same_under_load() -> None:
    """The same programs, alone on one slot and in one batch over two slots, with every core busy: pass
    every time (before: runtime_error or pass, as the scheduler had it)."""
    burn = _burners(os.cpu_count() or 2)
    try:
        with Sandbox(SandboxConfig(slots=1)) as alone:
            for k in range(2):
                for t in _daemon_tasks(k):
                    v = alone.evaluate([t], use_cache=False)[0]
                    assert v.outcome == "pass", v.details()
        with Sandbox(SandboxConfig(slots=2)) as batched:
            vs = batched.evaluate([t for k in range(4) for t in _daemon_tasks(100 + k)], use_cache=False)
            assert [v.outcome for v in vs] == ["pass"] * len(vs), [v.details() for v in vs if v.outcome != "pass"]
            assert batched.stray_processes() == []
    finally:
        for p in burn:
            p.kill()
            p.wait()


# ------------------------------------------------------------------------------------------------------
# pooled: every class above over three slots in one batch, each followed by correct programs
# ------------------------------------------------------------------------------------------------------

def _passes(name: str):
    def check(v: Verdict) -> None:
        assert v.outcome == "pass", (name, v.details())
    return check


def _pooled_hostile(level: str, slow: bool) -> tuple[list[Task], list]:
    hostile: list[Task] = []
    check: list = []
    for b in BUILDS:
        if (b.slow and not slow) or not all(os.access(t, os.X_OK) for t in PROFILES[b.lang].tools()):
            continue
        hostile.append(_build_task(b))
        check.append(lambda v, b=b: _check_build(b, v))
    for name in sorted(COUNTERS):
        hostile.append(_counter_task(name, level))
        check.append(_passes(name))
    for i, t in enumerate(_daemon_tasks(7)):
        hostile.append(t)
        check.append(_passes(f"daemon {i}"))
    return hostile, check


@pytest.mark.parametrize("slow", [pytest.param(False, id="fast"), pytest.param(True, id="all", marks=pytest.mark.slow)])
def test_round4_attacks_pooled(slow: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    require("sh")
    with Sandbox(SandboxConfig(slots=3)) as sb:
        hostile, check = _pooled_hostile(sb.level, slow)
        got = run_pooled(sb, hostile, good_mixed, monkeypatch=monkeypatch)
        for c, v in zip(check, got.verdicts):
            c(v)


def test_host_ptys_are_untouched_by_a_batch_of_pty_hoarders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several slots hoarding ptys at once: each program reports how many it got, none."""
    with Sandbox(SandboxConfig(slots=2)) as sb:
        got = run_pooled(sb, [_counter_task("pty", sb.level) for _ in range(4)], good, monkeypatch=monkeypatch)
        assert [v.outcome for v in got.verdicts] == ["pass"] * 4


def test_stat_of_a_not_built_file_is_never_followed() -> None:
    """The worker's check of the file a step needs: a regular file, never a symlink to one."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        assert not _worker._built(d, "Main.class")
        os.symlink("/etc/passwd", os.path.join(d, "Main.class"))
        assert not _worker._built(d, "Main.class")
        os.unlink(os.path.join(d, "Main.class"))
        os.mkdir(os.path.join(d, "Main.class"))
        assert not _worker._built(d, "Main.class")
        os.rmdir(os.path.join(d, "Main.class"))
        with open(os.path.join(d, "Main.class"), "wb"):
            pass
        assert _worker._built(d, "Main.class") and stat.S_ISREG(os.lstat(os.path.join(d, "Main.class")).st_mode)
        for bad in ("", ".", "..", "a/b", None):
            assert not _worker._built(d, bad)



def test_the_doctor_names_the_hosts_core_dump_handler(tmp_path: object) -> None:
    """A pipe in kernel.core_pattern would run the host's handler for every crash of an exec'd program
    (RLIMIT_CORE does not apply to a pipe): the doctor warns; a file pattern is disabled by the limit."""
    from rewardlang.sandbox.doctor import core_dumps

    path = os.path.join(str(tmp_path), "core_pattern")
    for pattern, pipe in (("core", False), ("|/usr/share/apport/apport -p%p -s%s -c%c", True)):
        with open(path, "w") as fh:
            fh.write(pattern + "\n")
        r = core_dumps(path)
        assert r["core_pattern"] == pattern and r["pipe"] is pipe and bool(r["warning"]) is pipe
    assert core_dumps(os.path.join(str(tmp_path), "absent"))["core_pattern"] is None
    with open("/proc/sys/kernel/core_pattern") as fh:
        assert core_dumps()["core_pattern"] == fh.read().strip()
