"""Issue 12, by class: a program cannot mask its own failure, cannot break the clean-up, cannot leave state
for the next program, cannot make the trusted judge spend unbounded CPU or memory, and its verdict does
not depend on the machine's load.

Every sandboxed case asserts the verdict and the invariants: no infrastructure outcome (no mask), the slot
was not replaced unless the case says so, no stray process, and right after it, on the same slot, a probe
program finds nothing left behind (``/dev`` as the slot started, ``/tmp`` holding only its own run
directory, ``/dev/shm`` and its directory empty, no System V IPC object) and a correct program passes.
"""

from __future__ import annotations

import ast
import contextlib
import os
import textwrap
import time
import tracemalloc
from collections.abc import Iterator

import pytest

from rewardlang.sandbox import _worker
from rewardlang.sandbox.config import Limits, SandboxConfig
from rewardlang.sandbox.convert import make_plan
from rewardlang.sandbox.judge import (
    MalformedObservation,
    decode_value,
    judge,
    parse_records,
)
from rewardlang.sandbox.raw import RawResult, RawRun
from rewardlang.sandbox.runner import NPROC_BASE, Sandbox, Task
from rewardlang.sandbox.safe_eval import (
    MAX_SAME_HASH,
    HashFlood,
    check_hashes,
    safe_eval,
)

LIMITS = Limits(cpu=1.0, wall=3.0, memory_mb=256, processes=12)
TESTS = ["assert f(2) == 4", "assert f(5) == 10"]
GOOD = "def f(x):\n    return 2 * x\n"
M61 = 2**61 - 1  # ints k * M61 + c all hash to c


def _d(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


# What the next program sees. `f` returns a description of every leftover; the test expects exactly the
# state of a fresh slot (taken when the fixture starts).
PROBE = _d("""
    import os
    def _ipc():
        out = []
        for p in ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"):
            try:
                out += open(p).read().splitlines()[1:]
            except OSError:
                pass
        return out
    def f(x):
        return [sorted(os.listdir("/dev")), sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")),
                sorted(os.listdir(".")), _ipc(), os.getcwd()]
    """)


@pytest.fixture(scope="module")
def sb() -> Iterator[tuple[Sandbox, list]]:
    """A one-slot sandbox and what the probe sees on a fresh slot."""
    s = Sandbox(SandboxConfig(slots=1))
    fresh = _probe(s)
    assert fresh[1] == ["run"] and fresh[2] == [] and fresh[3] == [] and fresh[4] == [], fresh
    assert "null" in fresh[0] and "fd" in fresh[0]
    yield s, fresh
    s.close()


def _values(s: Sandbox, code: str, limits: Limits = LIMITS) -> object:
    """Run ``code`` on the slot and return what ``f(1)`` returned (decoded as the judge does)."""
    plan = make_plan(["assert f(1) == 0"], None, "mbpp")
    req = plan.wire()
    req["code"] = code
    req["limits"] = limits.to_wire(NPROC_BASE[s.level])
    raw = s.pool.run([(req, 120.0)])[0]
    assert raw.runs is not None, raw.infra
    recs, _ = parse_records(raw.runs[0].res)
    (val,) = [decode_value(r[3]) for r in recs if r[0] == "t" and r[2] == "ok"]
    return val[0]


def _probe(s: Sandbox) -> list:
    return list(_values(s, PROBE))  # type: ignore[arg-type]


def _run_then_check(s: Sandbox, fresh: list, code: str, outcome: str, *, tests: list[str] = TESTS,
                    limits: Limits = LIMITS, respawn: bool = False) -> None:
    starts = s.pool.stats["slot_starts"]
    v = s.evaluate([Task(code, tests, None, "mbpp", limits)], use_cache=False)[0]
    assert v.infra is None, f"masked: {v.infra}"
    assert v.outcome == outcome, v.details()
    assert s.stray_processes() == []
    if not respawn:
        assert s.pool.stats["slot_starts"] == starts, "the program cost a slot respawn"
    after = _probe(s)
    assert after == fresh, "state left for the next program"
    good = s.evaluate([Task(GOOD, TESTS, None, "mbpp", LIMITS)], use_cache=False)[0]
    assert good.infra is None and good.outcome == "pass" and good.pass_rate == 1.0


# ------------------------------------------------------------------------------------------------------
# 1. a program cannot turn its failure into a mask
# ------------------------------------------------------------------------------------------------------

EXIT_STATUSES = [0, 1, 2, _worker.SETUP_FAILED, 124, 126, 127, 137, 255]
MASKING = [
    *[(f"os_exit_{n}_at_import", f"import os\nos._exit({n})\n") for n in EXIT_STATUSES],
    *[(f"os_exit_{n}_in_test", f"import os\ndef f(x):\n    os._exit({n})\n") for n in EXIT_STATUSES],
    ("sys_exit_setup_status", f"import sys\ndef f(x):\n    sys.exit({_worker.SETUP_FAILED})\n"),
    *[(f"kill_self_{sig}", f"import os\ndef f(x):\n    os.kill(os.getpid(), {sig})\n") for sig in (6, 9, 11, 15, 24)],
    ("write_to_closed_setup_fd", _d("""
        import os
        def f(x):
            for fd in range(4, 64):
                try:
                    os.write(fd, b"\\x00" * 64)
                except OSError:
                    pass
            os._exit(121)
        """)),
    ("reopen_fds_via_proc", _d("""
        import os
        def f(x):
            for pid in ("self", str(os.getppid()), "1"):
                for fd in range(0, 16):
                    try:
                        w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                        os.write(w, b"\\xff" * 8)
                    except OSError:
                        pass
            os._exit(121)
        """)),
    ("garbage_on_result_channel_then_setup_status", _d("""
        import os
        def f(x):
            os.write(3, b"\\xff\\xff\\xff\\x7f" + b"{" * 1000)
            os._exit(121)
        """)),
    ("fill_tmp_then_exit", _d("""
        import os
        def f(x):
            for d in ("/tmp", "/dev/shm", "."):
                try:
                    with open(d + "/fill", "wb") as fh:
                        while True:
                            fh.write(b"0" * (1 << 20))
                except OSError:
                    pass
            os._exit(121)
        """)),
]


@pytest.mark.parametrize("code", [c for _, c in MASKING], ids=[n for n, _ in MASKING])
def test_a_program_cannot_mask_itself(sb: tuple[Sandbox, list], code: str) -> None:
    s, fresh = sb
    # SIGKILL of itself is first taken for an outside kill (issue 26, class 4): one re-run on a fresh slot,
    # then the program's own failure (test_sandbox_outside_kill.py)
    sigkill = "os.getpid(), 9)" in code
    kills = s.pool.stats["kills_again_on_rerun"]
    _run_then_check(s, fresh, code, "runtime_error", respawn=sigkill)
    assert s.pool.stats["kills_again_on_rerun"] == kills + sigkill


def test_a_real_set_up_failure_is_still_masked(sb: tuple[Sandbox, list]) -> None:
    """The set-up channel does work: a set-up the worker cannot complete (an address-space limit setrlimit refuses,
    before any program code) is an infrastructure outcome, and the slot is replaced."""
    s, fresh = sb
    starts = s.pool.stats["slot_starts"]
    v = s.evaluate([Task(GOOD, TESTS, None, "mbpp", Limits(cpu=1.0, memory_mb=1 << 60))], use_cache=False)[0]
    assert v.outcome == "infra" and "set up" in (v.infra or "")
    assert _probe(s) == fresh
    assert s.pool.stats["slot_starts"] == starts + 1


# ------------------------------------------------------------------------------------------------------
# 2. clean-up cannot be broken, never follows a symlink, and never blames the next program
# ------------------------------------------------------------------------------------------------------

CLEANUP = [
    ("deep_tree_3000", _d("""
        import os
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        open("leaf", "w").write("x")
        """)),
    ("names_past_path_max", _d("""
        import os
        for i in range(40):
            n = chr(97 + i % 26) * 250
            os.mkdir(n)
            os.chdir(n)
        open("x" * 250, "w").write("x")
        """)),
    ("locked_directories", _d("""
        import os
        os.makedirs("a/b/c/d")
        open("a/b/c/d/f", "w").write("x")
        for p in ("a/b/c/d", "a/b/c", "a/b", "a"):
            os.chmod(p, 0)
        os.chmod(".", 0o500)
        """)),
    *[(f"run_dir_replaced_by_symlink_to_{t.strip('/').replace('/', '_') or 'root'}", _d(f"""
        import os
        os.chdir("/tmp")
        os.rename("run", "moved")
        os.symlink("{t}", "run")
        """)) for t in ("/dev", "/", "/tmp", "/dev/shm", "/proc/self/cwd")],
    ("symlinks_inside_to_dev", _d("""
        import os
        os.symlink("/dev", "devlink")
        os.makedirs("x/y")
        os.symlink("/dev", "x/y/devlink")
        os.symlink("/dev/shm", "/dev/shm/self")
        os.symlink("/dev", "/tmp/devlink")
        """)),
    ("fifos_and_hardlinks", _d("""
        import os
        for p in ("fifo", "/dev/shm/fifo"):
            try:
                os.mkfifo(p)   # mknod is denied by the filter; if it were not, a fifo is unlinked too
            except OSError:
                pass
        open("/tmp/a", "w").write("x")
        os.link("/tmp/a", "b")
        """)),
    ("deep_tree_in_dev_shm", _d("""
        import os
        os.chdir("/dev/shm")
        for _ in range(1500):
            os.mkdir("s")
            os.chdir("s")
        """)),
]


@pytest.mark.parametrize("code", [c for _, c in CLEANUP], ids=[n for n, _ in CLEANUP])
def test_clean_up_cannot_be_broken(sb: tuple[Sandbox, list], code: str) -> None:
    s, fresh = sb
    _run_then_check(s, fresh, code + GOOD, "pass", limits=Limits(cpu=3.0, wall=10.0, memory_mb=256))


def test_too_much_left_behind_replaces_the_slot_and_keeps_the_verdict(sb: tuple[Sandbox, list]) -> None:
    """A tree deeper than the clean-up budget: the verdict stands, the slot is replaced (fresh tmpfs),
    and the next program is not blamed."""
    s, fresh = sb
    code = "import os\nfor _ in range(25000):\n    os.mkdir('d')\n    os.chdir('d')\n" + GOOD
    recycles = s.pool.stats["slot_recycles"]
    _run_then_check(s, fresh, code, "pass", limits=Limits(cpu=8.0, wall=30.0, memory_mb=256), respawn=True)
    assert s.pool.stats["slot_recycles"] == recycles + 1


def _tree(root: str, depth: int, name: str = "d") -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        os.close(os.open("leaf", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    finally:
        os.close(fd)


@pytest.mark.parametrize("shape", ["deep", "long_names", "symlink_escape", "locked", "wide"])
def test_empty_dir_on_the_host(tmp_path: object, shape: str) -> None:
    """The clean-up routine itself, on hostile trees: it empties the directory, stays inside it, and
    counts its work (the budget is the bound)."""
    top = os.path.join(str(tmp_path), "top")
    outside = os.path.join(str(tmp_path), "outside")
    os.makedirs(top)
    os.makedirs(outside)
    with open(os.path.join(outside, "keep"), "w") as fh:
        fh.write("must survive")
    if shape == "deep":
        _tree(top, 2500)
    elif shape == "long_names":
        _tree(top, 40, "n" * 255)  # about 10 kB of path: far past PATH_MAX
    elif shape == "symlink_escape":
        os.symlink(outside, os.path.join(top, "link"))
        os.makedirs(os.path.join(top, "a", "b"))
        os.symlink(outside, os.path.join(top, "a", "b", "link"))
        os.symlink(os.path.join(outside, "keep"), os.path.join(top, "a", "filelink"))
    elif shape == "locked":
        os.makedirs(os.path.join(top, "a", "b", "c"))
        for p in ("a/b/c", "a/b", "a"):
            os.chmod(os.path.join(top, p), 0)
    else:
        for i in range(300):
            os.mkdir(os.path.join(top, f"d{i}"))
            open(os.path.join(top, f"d{i}", "f"), "w").close()
    budget = _worker._Budget(20_000, seconds=60.0)
    assert _worker._empty_dir(top, budget)
    assert os.listdir(top) == []
    assert os.listdir(outside) == ["keep"]
    assert 0 <= budget.n < 20_000


def test_empty_dir_stops_at_its_budget(tmp_path: object) -> None:
    top = str(tmp_path)
    _tree(top, 500)
    budget = _worker._Budget(100, seconds=60.0)
    assert not _worker._empty_dir(top, budget)   # not finished: the caller replaces the slot
    assert budget.n < 0
    assert _worker._empty_dir(top, _worker._Budget(10_000, seconds=60.0))  # a bigger budget finishes
    assert os.listdir(top) == []


def test_empty_dir_refuses_a_symlinked_top(tmp_path: object) -> None:
    target = os.path.join(str(tmp_path), "target")
    os.makedirs(target)
    open(os.path.join(target, "keep"), "w").close()
    link = os.path.join(str(tmp_path), "link")
    os.symlink(target, link)
    assert not _worker._empty_dir(link, _worker._Budget(100))
    assert os.listdir(target) == ["keep"]


# ------------------------------------------------------------------------------------------------------
# 3. nothing survives from one program to the next
# ------------------------------------------------------------------------------------------------------

LEAVE = _d("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    MARK = "rl-leftover-7d1"
    def _everywhere():
        made = []
        for root, dirs, files in os.walk("/"):
            if root.startswith(("/proc", "/sys")):
                dirs[:] = []
                continue
            for p in (os.path.join(root, MARK), os.path.join(root, MARK + "-dir")):
                try:
                    if p.endswith("-dir"):
                        os.mkdir(p)
                    else:
                        open(p, "w").write("42")
                    made.append(p)
                except OSError:
                    pass
        return made
    def _ipc():
        got = []
        got.append(libc.shmget(0x7d1, 1 << 30, 0o1666))
        got.append(libc.shmget(0, 1 << 20, 0o1666))   # IPC_PRIVATE
        got.append(libc.msgget(0x7d1, 0o1666))
        got.append(libc.semget(0x7d1, 4, 0o1666))
        mq = libc.syscall(240, b"rl7d1", 0o100 | 0o2, 0o666, None) if os.uname().machine == "x86_64" else -1
        got.append(mq)
        return got
    def f(x):
        made = _everywhere()
        ipc = _ipc()
        try:
            os.environ["RL_LEFT"] = "1"
            os.putenv("RL_LEFT", "1")
        except OSError:
            pass
        return [made, ipc]
    """)

FIND = _d("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    MARK = "rl-leftover-7d1"
    def f(x):
        found = []
        for root, dirs, files in os.walk("/"):
            if root.startswith(("/proc", "/sys")):
                dirs[:] = []
                continue
            found += [os.path.join(root, n) for n in dirs + files if n.startswith(MARK)]
        for p in ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"):
            try:
                found += open(p).read().splitlines()[1:]
            except OSError:
                pass
        for key in (0x7d1,):
            if libc.shmget(key, 0, 0) >= 0 or libc.msgget(key, 0) >= 0 or libc.semget(key, 0, 0) >= 0:
                found.append(("ipc key", key))
        if "RL_LEFT" in os.environ:
            found.append("environment")
        return found
    """)


def test_every_writable_place_is_emptied_between_programs(sb: tuple[Sandbox, list]) -> None:
    """The first program writes a marker in every directory it can and tries every kind of System V
    IPC object; the second searches the whole file system and the IPC namespace and finds nothing."""
    s, fresh = sb
    made, ipc = _values(s, LEAVE, Limits(cpu=5.0, wall=20.0, memory_mb=512))  # type: ignore[misc]
    # the writable places, enumerated: only the two size-capped tmpfs the worker empties
    assert {os.path.dirname(p).split("/")[1] for p in made} <= {"tmp", "dev"}, made
    assert all(p.startswith(("/tmp/", "/dev/shm/")) for p in made), made
    assert all(r < 0 for r in ipc), f"a System V IPC object or message queue was created: {ipc}"
    _run_then_check(s, fresh, FIND, "pass", tests=["assert f(1) == []"], limits=Limits(cpu=5.0, wall=20.0))


STATE = [
    ("dev_shm_answer", "import os\nopen('/dev/shm/answer', 'w').write('4')\n"),
    ("tmp_answer", "import os\nos.makedirs('/tmp/cache/deep', exist_ok=True)\nopen('/tmp/cache/deep/a', 'w').write('4')\n"),
    ("cwd_answer", "open('answer', 'w').write('4')\n"),
    ("dev_write", ("import os\nfor p in ('/dev/answer', '/dev/pts/answer', '/dev/mqueue/a'):\n"
                   "    try:\n        open(p, 'w').write('4')\n    except OSError:\n        pass\n")),
    ("posix_semaphore", "import multiprocessing\nlock = multiprocessing.Lock()\nlock.acquire()\n"),
    ("shm_private_segments", _d("""
        import ctypes
        libc = ctypes.CDLL(None)
        for i in range(16):
            libc.shmget(0, 64 << 20, 0o1600)
        """)),
]


@pytest.mark.parametrize("code", [c for _, c in STATE], ids=[n for n, _ in STATE])
def test_no_state_survives(sb: tuple[Sandbox, list], code: str) -> None:
    s, fresh = sb
    _run_then_check(s, fresh, code + GOOD, "pass")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for an IPC namespace")
def test_leftover_ipc_objects_are_removed() -> None:
    """The second wall (for levels or kernels where the filter is absent): in a private IPC namespace,
    objects of every kind are detected and removed, and the check is cheap when there are none."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            if libc.unshare(0x08000000) != 0:  # CLONE_NEWIPC: never touch the host's objects
                os._exit(2)
            empty = not _worker._ipc_in_use() and _worker._remove_ipc()
            ids = [libc.shmget(0, 1 << 20, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 3, 0o1600)]
            made = all(i >= 0 for i in ids) and _worker._ipc_in_use()
            removed = _worker._remove_ipc() and not _worker._ipc_in_use()
            left = sum(len(open(p).read().splitlines()) - 1
                       for p in ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"))
            os.write(w, repr((empty, made, removed, left)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    out = os.read(r, 1000).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert out == "(True, True, True, 0)"


def test_program_filter_denies_ipc_creation_and_scheduling() -> None:
    table = _worker.SYSCALLS[_worker._machine()]
    for name in ("shmget", "msgget", "semget", "mq_open", "setpriority", "sched_setscheduler",
                 "sched_setattr", "sched_setaffinity", "sched_setparam"):
        assert name in _worker.PROGRAM_DENY and name in table


# ------------------------------------------------------------------------------------------------------
# 4. the judge's work and memory are bounded
# ------------------------------------------------------------------------------------------------------


class Counted:
    """A key whose hash is chosen and whose equality tests are counted (work, not time)."""

    eqs = 0

    def __init__(self, h: int, v: int) -> None:
        self.h, self.v = h, v

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        Counted.eqs += 1
        return isinstance(other, Counted) and self.v == other.v


@pytest.mark.parametrize("n", [100, 2_000, 20_000])
@pytest.mark.parametrize("expr", ["set(__rl_v0)", "frozenset(__rl_v0)", "{0}.union(__rl_v0)",
                                  "{0}.issubset(__rl_v0)", "dict(__rl_v0)", "{}.keys() | __rl_v0"])
def test_judge_hash_tables_do_bounded_work(n: int, expr: str) -> None:
    """Every hash table the judge builds from the program's values costs at most MAX_SAME_HASH equality
    tests per element: a colliding input is refused before any table is built, a mildly colliding one
    (MAX_SAME_HASH per hash value) is accepted with bounded work."""
    pair = expr.startswith("dict")
    flood = [Counted(7, i) for i in range(n)]
    mild = [Counted(i // MAX_SAME_HASH, i) for i in range(n)]
    for keys, refused in ((flood, True), (mild, False)):
        vals = [(k, 1) for k in keys] if pair else keys
        Counted.eqs = 0
        tree = ast.parse(expr, mode="eval")
        if refused:
            with pytest.raises(HashFlood):
                safe_eval(tree, {"__rl_v0": vals})
            assert Counted.eqs == 0
        else:
            safe_eval(tree, {"__rl_v0": vals})
            assert Counted.eqs <= n * MAX_SAME_HASH


COLLIDING = [
    ("set_of_ints", lambda n: ["S", [["i", hex(k * M61 + 3)] for k in range(n)]]),
    ("frozenset_of_negative_ints", lambda n: ["F", [["i", hex(-k * M61 - 5)] for k in range(n)]]),
    ("dict_keys", lambda n: ["d", [[["i", hex(k * M61)], ["n"]] for k in range(n)]]),
    ("set_of_tuples", lambda n: ["S", [["t", [["i", hex(k * M61)], ["s", "a"]]] for k in range(n)]]),
    ("set_of_frozensets", lambda n: ["S", [["F", [["i", hex(k * M61 + 1)]]] for k in range(n)]]),
    ("duplicates", lambda n: ["S", [["i", "0x1"] for _ in range(n)]]),
    ("nested_in_list", lambda n: ["l", [["s", "x"], ["S", [["i", hex(k * M61 + 9)] for k in range(n)]]]]),
]


@pytest.mark.parametrize("make", [m for _, m in COLLIDING], ids=[n for n, _ in COLLIDING])
def test_decoding_colliding_values_is_refused(make: object) -> None:
    with pytest.raises(MalformedObservation, match="share one hash value"):
        decode_value(make(5_000))  # type: ignore[operator]
    # a few collisions are legitimate values and decode
    small = decode_value(make(MAX_SAME_HASH))  # type: ignore[operator]
    assert small is not None


@pytest.mark.parametrize("n", [12_000, 48_000])
def test_forged_observation_through_the_judge_is_bounded(n: int) -> None:
    """The attack of the issue, end to end: a forged frame of colliding integers. The test fails, and the
    judge's memory stays within a small multiple of the observation's size."""
    import json
    import struct

    plan = make_plan(["assert f(1) == {1, 2}"], None, "mbpp")
    rec = json.dumps(["t", 0, "ok", ["t", [["S", [["i", hex(k * M61 + 1)] for k in range(n)]]]]]).encode()
    data = struct.pack("<I", len(rec)) + rec
    run = RawRun(exit=0, reason=None, cpu=0.1, wall=0.1, setup_failed=False, clean=True, res=data, out=b"")
    tracemalloc.start()
    v = judge(plan, RawResult([run]))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert v.outcome == "fail" and v.infra is None
    assert "hash" in v.tests[0].detail
    assert peak < 40 * len(data) + (1 << 20)


def test_record_parser_builds_no_dict_and_no_huge_number() -> None:
    import struct

    for payload in (b'["t", 0, "ok", {"a": 1}]', b'["t", ' + b"9" * 5000 + b', "ok", ["n"]]'):
        recs, malformed = parse_records(struct.pack("<I", len(payload)) + payload)
        assert recs == [] and malformed


@pytest.mark.parametrize("expr", ["str(__rl_v0)", "repr(__rl_v0)", "''.join(__rl_v0)",
                                  "sum(__rl_v0, [])", "__rl_v0[0].replace('', __rl_v0[0])"])
def test_judge_text_building_is_bounded(expr: str) -> None:
    big = "x" * 100_000
    env = {"__rl_v0": [big] * 200} if "sum" not in expr else {"__rl_v0": [[0] * 200_000] * 100}
    with pytest.raises(Exception) as e:
        safe_eval(ast.parse(expr, mode="eval"), env)
    assert "too large" in str(e.value)


def test_check_hashes_counts() -> None:
    check_hashes(list(range(10_000)))
    check_hashes([k * M61 for k in range(MAX_SAME_HASH)])
    with pytest.raises(HashFlood) as e:
        check_hashes([k * M61 for k in range(MAX_SAME_HASH + 1)])
    assert e.value.count == MAX_SAME_HASH + 1
    with pytest.raises(TypeError):
        check_hashes([[1]] * 20)


# ------------------------------------------------------------------------------------------------------
# 5. the verdict does not depend on the machine's load
# ------------------------------------------------------------------------------------------------------

LOAD_CASES = [
    ("c_stack_overflow", _d("""
        import json, sys
        sys.setrecursionlimit(10**7)
        def f(x):
            a = []
            for _ in range(2 * 10**5):
                a = [a]
            return len(json.dumps(a))  # linear to the stack's end (repr's is quadratic: see the hostile case)
        """), "runtime_error"),
    ("segfault_after_work", _d("""
        import ctypes
        def f(x):
            sum(range(3 * 10**6))
            ctypes.string_at(0)
        """), "runtime_error"),
    ("abort_after_work", "import os\ndef f(x):\n    sum(range(3 * 10**6))\n    os.abort()\n", "runtime_error"),
    ("recursion_error", "def f(x):\n    return f(x + 1)\n", "runtime_error"),
    ("cpu_work_then_correct", "def f(x):\n    sum(range(3 * 10**6))\n    return 2 * x\n", "pass"),
    ("child_works_parent_waits", _d("""
        import os
        def f(x):
            pid = os.fork()
            if pid == 0:
                sum(range(3 * 10**6))
                os._exit(0)
            os.waitpid(pid, 0)
            return 2 * x
        """), "pass"),
    ("infinite_loop", "def f(x):\n    while True:\n        pass\n", "timeout"),
    ("sleeping", "import time\ndef f(x):\n    time.sleep(30)\n", "timeout"),
]

TIGHT = Limits(cpu=0.8, wall=1.5, memory_mb=512)  # idle backstop 1.5 s, hard wall 7.7 s
CPU_CGROUP = "/sys/fs/cgroup/cpu"  # cgroup v1 cpu controller (CFS bandwidth)


@contextlib.contextmanager
def cpu_quota(pids: list[int], percent: int) -> Iterator[None]:
    """Run ``pids`` (and every process they fork) with at most ``percent`` % of one CPU: a deterministic
    stand-in for a loaded machine (throttled time is run-queue time, as on a busy machine)."""
    root = CPU_CGROUP
    if not os.path.isfile(os.path.join(root, "cgroup.procs")) or os.geteuid() != 0:
        pytest.skip("needs root and the cgroup v1 cpu controller")
    d = os.path.join(root, f"rewardlang-test-{os.getpid()}-{percent}")
    os.makedirs(d, exist_ok=True)
    home = {}  # each process's own cpu group (the slot's fixed-weight group), restored afterwards
    for p in pids:
        with open(f"/proc/{p}/cgroup") as fh:
            path = next((ln.split(":", 2)[2] for ln in fh.read().splitlines() if "cpu" in ln.split(":")[1].split(",")), "/")
        home[p] = os.path.join(root, path.lstrip("/"))
    try:
        with open(os.path.join(d, "cpu.cfs_period_us"), "w") as fh:
            fh.write("100000")
        with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as fh:
            fh.write(str(1000 * percent))
        for p in pids:
            with open(os.path.join(d, "cgroup.procs"), "w") as fh:
                fh.write(str(p))
        yield
    finally:
        for p in pids:
            try:
                with open(os.path.join(home[p], "cgroup.procs"), "w") as fh:
                    fh.write(str(p))
            except OSError:
                pass
        for _ in range(50):
            try:
                os.rmdir(d)
                break
            except OSError:
                time.sleep(0.1)


@pytest.fixture(scope="module")
def loaded_sb() -> Iterator[Sandbox]:
    s = Sandbox(SandboxConfig(slots=1))
    assert s.run(GOOD, TESTS).outcome == "pass"
    yield s
    s.close()


# Every program runs throttled in the default run, and quiet too except the two timeouts: a quiet program that spins
# or sleeps to its deadline (1-1.5 s each) is test_sandbox_hostile.py's infinite_loop and slow_import_sleep in the
# default run; here their quiet runs are in the slow run.
_QUIET_TIMEOUTS = {"infinite_loop", "sleeping"}


@pytest.mark.parametrize("code,outcome,load", [
    pytest.param(c, o, load, id=f"{n}-{load}", marks=[pytest.mark.slow] * (load == "quiet" and n in _QUIET_TIMEOUTS))
    for load in ("quiet", "loaded") for n, c, o in LOAD_CASES])
def test_verdict_is_the_same_under_load(loaded_sb: Sandbox, code: str, outcome: str, load: str) -> None:
    """The same program gets the same class on a quiet machine and with its slot throttled to 30 % of one
    CPU: crashes stay runtime errors, a correct program that needs CPU time passes, only real CPU use or
    real idleness is a timeout."""
    pids = loaded_sb.pool.slots[0].worker_pids()
    task = Task(code, TESTS, None, "mbpp", TIGHT)
    if load == "loaded":
        with cpu_quota(pids, 30):
            v = loaded_sb.evaluate([task], use_cache=False)[0]
    else:
        v = loaded_sb.evaluate([task], use_cache=False)[0]
    assert v.infra is None, v.infra
    assert v.outcome == outcome, v.details()
    assert loaded_sb.stray_processes() == []
    assert loaded_sb.run(GOOD, TESTS).outcome == "pass"


def test_extreme_overload_is_masked_never_a_verdict(loaded_sb: Sandbox) -> None:
    """When a CPU-bound program gets so little CPU that neither its CPU limit nor its idle backstop is met
    within the hard wall time, no class can be decided: an infrastructure outcome (masked, counted),
    never a timeout. A sleeping program is not affected (its idle time counts)."""
    s = loaded_sb
    lim = Limits(cpu=0.5, wall=0.3, memory_mb=256)  # hard wall 2.9 s; 0.5 CPU-second at 5 % takes 10 s
    before = s.pool.stats["overload"]
    with cpu_quota(s.pool.slots[0].worker_pids(), 5):
        busy = s.evaluate([Task("def f(x):\n    while True:\n        pass\n", TESTS, None, "mbpp", lim)],
                          use_cache=False)[0]
        asleep = s.evaluate([Task("import time\ndef f(x):\n    time.sleep(30)\n", TESTS, None, "mbpp", lim)],
                            use_cache=False)[0]
    assert busy.outcome == "infra" and "overloaded" in (busy.infra or "")
    assert s.pool.stats["overload"] == before + 1
    assert asleep.outcome == "timeout" and asleep.infra is None
    assert s.run(GOOD, TESTS).outcome == "pass"
    assert s.stray_processes() == []
