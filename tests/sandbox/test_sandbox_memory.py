"""Issue 19, classes 6, 7 and 4 (mechanism): the memory budget holds across all of a program's processes and
every kind of memory it can pin; host-wide kernel quotas are out of reach; a program cannot lower its own
CPU share into a masked "overload".

Each attack is followed, on the same slot, by a correct program that uses ``multiprocessing`` and
``tempfile`` (it must pass, without a respawn)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
from pathlib import Path
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from rewardlang.sandbox import _worker, cgroups
from rewardlang.sandbox.config import Limits, SandboxConfig
from rewardlang.sandbox.doctor import doctor_report
from rewardlang.sandbox.runner import Sandbox, Task

TESTS = ["assert f(2) == 4", "assert f(5) == 10"]

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

MB = 1 << 20
BUDGET_MB = 128
LIM = Limits(cpu=10.0, wall=30.0, memory_mb=BUDGET_MB)
#: what the memory group may hold above the budget: the worker's size (the program starts as its copy,
#: as RLIMIT_AS counts "current size + budget"; about 17 MiB) and the 1 MiB rounding of the limit
SLACK = 40 * MB

_SUPPORT = cgroups.support()
needs_memcg = pytest.mark.skipif(_SUPPORT.memory is None, reason=f"no writable memory cgroup: {_SUPPORT.reasons}")


def _check_then_good(sb: Sandbox, code: str, lim: Limits = LIM) -> tuple[object, int | None]:
    """Run an attack, return (verdict, peak of the program's memory group); then a correct
    multiprocessing/tempfile program on the same slot must pass without a respawn."""
    slot = sb.pool.slots[0]
    starts = sb.pool.stats["slot_starts"]
    v = sb.evaluate([Task(code, TESTS, None, "mbpp", lim)], use_cache=False)[0]
    peak = slot.cgroup.peak() if slot.cgroup is not None else None
    good = sb.evaluate([Task(GOOD_MP, TESTS, None, "mbpp", LIM)], use_cache=False)[0]
    assert good.outcome == "pass", good.details()
    assert sb.pool.stats["slot_starts"] == starts, "the slot was respawned"
    assert sb.stray_processes() == []
    return v, peak


# ----------------------------------------------------------------------------------------------------------
# class 6: memory beyond the budget
# ----------------------------------------------------------------------------------------------------------

MEMORY_ATTACKS = [
    # memfds written but never mapped: no rlimit counts them (517 MiB held under memory_mb=128 before;
    # RLIMIT_FSIZE caps each file, not their number)
    ("memfd_write", 128, """
        import os
        def f(x):
            fds = [os.memfd_create("hoard") for _ in range(40)]
            chunk = b"m" * (1 << 20)
            for fd in fds:
                for _ in range(15):
                    os.write(fd, chunk)
            return 2 * x
        """),
    # four forked children, each under its own RLIMIT_AS, 400 MiB together (407 MiB held before)
    ("forked_children", 128, """
        import os, time
        def f(x):
            pids = []
            for _ in range(4):
                pid = os.fork()
                if pid == 0:
                    hoard = b"c" * (100 << 20)
                    time.sleep(1.5)
                    os._exit(0)
                pids.append(pid)
            for pid in pids:
                os.waitpid(pid, 0)
            return 2 * x
        """),
    # anonymous shared mappings (shmem), 100 MiB in each of four children
    ("mmap_shared_anon", 128, """
        import mmap, os, time
        def f(x):
            pids = []
            for _ in range(4):
                pid = os.fork()
                if pid == 0:
                    m = mmap.mmap(-1, 100 << 20, flags=mmap.MAP_SHARED)
                    for i in range(0, len(m), 4096):
                        m[i] = 1
                    time.sleep(1.5)
                    os._exit(0)
                pids.append(pid)
            for pid in pids:
                os.waitpid(pid, 0)
            return 2 * x
        """),
    # tmpfs files (the sandbox's /tmp is 64 MiB, so the budget is 24 MiB here): written, and allocated
    # without writing (fallocate), in /tmp and /dev/shm; they outlive the process until the clean-up
    ("tmpfs_files", 24, """
        import os
        def f(x):
            with open("/dev/shm/s", "wb") as fh:
                fh.write(b"s" * (900 << 10))
            chunk = b"t" * (1 << 20)
            for k in range(4):   # RLIMIT_FSIZE (16 MiB) caps each file, not their number
                with open(f"/tmp/hoard{k}", "wb") as fh:
                    for _ in range(15):
                        fh.write(chunk)
            return 2 * x
        """),
    ("tmpfs_fallocate", 24, """
        import os
        def f(x):
            for k in range(4):
                fd = os.open(f"/tmp/hoard{k}", os.O_RDWR | os.O_CREAT, 0o600)
                os.posix_fallocate(fd, 0, 15 << 20)
            return 2 * x
        """),
    # page cache dirtied through a shared file mapping (the writable file systems are tmpfs) in four
    # children, each mapping under its RLIMIT_AS
    ("dirty_shared_file_mappings", 128, """
        import mmap, os, time
        def f(x):
            pids = []
            for k in range(4):
                pid = os.fork()
                if pid == 0:
                    fd = os.open(f"/tmp/m{k}", os.O_RDWR | os.O_CREAT, 0o600)
                    os.ftruncate(fd, 15 << 20)
                    m = mmap.mmap(fd, 15 << 20, flags=mmap.MAP_SHARED)
                    for i in range(0, len(m), 4096):
                        m[i] = 1
                    time.sleep(1.5)
                    os._exit(0)
                pids.append(pid)
            for pid in pids:
                os.waitpid(pid, 0)
            hoard = [b"p" * (40 << 20) for _ in range(3)]
            return 2 * x
        """),
]


@needs_memcg
@pytest.mark.parametrize("budget,code", [(b, c) for _, b, c in MEMORY_ATTACKS], ids=[n for n, _, _ in MEMORY_ATTACKS])
def test_memory_budget_holds_across_processes_and_kinds(sb1: Sandbox, budget: int, code: str) -> None:
    """Every attack ends as ``memory`` (the kernel killed a process of the program in its memory group, or
    the program's own allocation failed), never a pass, never masked, and the group's peak charge stays
    within the budget plus the worker's size."""
    lim = Limits(cpu=10.0, wall=30.0, memory_mb=budget)
    before = sb1.pool.stats["oom_kills"]
    v, peak = _check_then_good(sb1, textwrap.dedent(code), lim)
    assert v.infra is None, v.infra
    assert v.outcome == "memory", v.details()
    assert peak is not None and peak <= budget * MB + SLACK, (peak, budget)
    assert sb1.pool.stats["oom_kills"] >= before  # counted when the kernel killed (not for MemoryError)


@needs_memcg
def test_stdio_case_over_budget_is_memory_and_the_other_cases_run(sb1: Sandbox) -> None:
    """stdin/stdout cases are one execution each: the OOM kill is attributed to the case that caused it
    (the counter is read around each run), the others are judged normally."""
    code = textwrap.dedent("""
        import os, time
        n = int(input())
        if n == 2:
            pids = []
            for _ in range(4):
                pid = os.fork()
                if pid == 0:
                    hoard = b"c" * (100 << 20)
                    time.sleep(1.5)
                    os._exit(0)
                pids.append(pid)
            for pid in pids:
                os.waitpid(pid, 0)
        print(2 * n)
        """)
    tests = json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": ["2\n", "4\n", "6\n"]})
    v = sb1.evaluate([Task(code, tests, None, "stdio", LIM)], use_cache=False)[0]
    assert v.infra is None, v.infra
    assert [t.status for t in v.tests] == ["pass", "memory", "pass"], v.details()
    assert v.outcome == "memory"
    assert sb1.run(GOOD_MP, TESTS).outcome == "pass"


@needs_memcg
def test_correct_program_within_budget_passes_and_is_charged(sb1: Sandbox) -> None:
    """A program that holds 60 MiB in two processes under a 128 MiB budget passes; the group saw it."""
    code = textwrap.dedent("""
        import os
        def f(x):
            pid = os.fork()
            if pid == 0:
                hoard = b"c" * (30 << 20)
                os._exit(0)
            hoard = b"p" * (30 << 20)
            os.waitpid(pid, 0)
            return 2 * x
        """)
    v, peak = _check_then_good(sb1, code)
    assert v.outcome == "pass", v.details()
    assert peak is not None and 30 * MB < peak <= BUDGET_MB * MB + SLACK


@needs_memcg
def test_oom_kill_hits_the_program_never_the_worker(sb1: Sandbox) -> None:
    """The worker and bubblewrap live in the slot's ``worker`` group, outside the program's group (the
    only one with a limit), so the kernel's OOM killer cannot choose them; programs run with
    oom_score_adj 1000 (preferred victims on the host too), the worker keeps its own."""
    slot = sb1.pool.slots[0]
    assert sb1.run(GOOD_MP, TESTS).outcome == "pass"
    worker = slot.worker_pids()
    probe = textwrap.dedent("""
        def f(x):
            with open("/proc/self/oom_score_adj") as fh:
                adj = int(fh.read())
            with open("/proc/self/cgroup") as fh:
                mem = [l for l in fh.read().splitlines() if ":memory:" in l][0]
            return (adj, mem.endswith("/prog"))
        """)
    v = sb1.evaluate([Task(probe, ["assert f(1) == (1000, True)"], None, "mbpp", LIM)], use_cache=False)[0]
    assert v.outcome == "pass", v.details()
    for pid in worker:
        with open(f"/proc/{pid}/cgroup") as fh:
            assert any(":memory:" in ln and ln.endswith("/worker") for ln in fh.read().splitlines())
        with open(f"/proc/{pid}/oom_score_adj") as fh:
            assert int(fh.read()) < 1000
    v, _ = _check_then_good(sb1, textwrap.dedent(MEMORY_ATTACKS[0][2]))
    assert v.outcome == "memory"
    assert slot.worker_pids() == worker  # the same processes: nothing of the slot was killed


def test_fallback_denies_memfd_and_doctor_says_which_accounting() -> None:
    """Without a memory cgroup (SandboxConfig(cgroups=False), REWARDLANG_SANDBOX_CGROUPS=off, or a machine
    without a writable one) RLIMIT_AS stays and memfd_create fails with EPERM (the program sees an
    error); ``doctor`` says which accounting is in force."""
    code = textwrap.dedent("""
        import os
        def f(x):
            try:
                os.memfd_create("x")
            except OSError as e:
                return e.errno
            return 0
        """)
    with Sandbox(SandboxConfig(slots=1, cgroups=False)) as sb:
        assert sb.pool.slots[0].cgroup is None
        v = sb.evaluate([Task(code, [f"assert f(1) == {errno.EPERM}"], None, "mbpp", LIM)], use_cache=False)[0]
        assert v.outcome == "pass", v.details()
        bomb = "def f(x):\n    hoard = b'x' * (600 << 20)\n    return 2 * x\n"
        assert sb.evaluate([Task(bomb, TESTS, None, "mbpp", LIM)], use_cache=False)[0].outcome == "memory"
    rep = doctor_report(SandboxConfig(slots=1, cgroups=False), all_levels=False)
    assert rep["memory"]["memory_accounting"] == "rlimit"
    rep = doctor_report(SandboxConfig(slots=1), all_levels=False)
    assert rep["memory"]["memory_accounting"] == (_SUPPORT.memory or "rlimit")


@needs_memcg
def test_memfd_allowed_and_bounded_with_memcg(sb1: Sandbox) -> None:
    """With the memory group in force memfd_create works (its pages are charged to the program)."""
    code = textwrap.dedent("""
        import os
        def f(x):
            fd = os.memfd_create("small")
            os.write(fd, b"q" * (4 << 20))
            return 2 * x
        """)
    v, peak = _check_then_good(sb1, code)
    assert v.outcome == "pass", v.details()
    assert peak is not None and peak > 4 * MB


# ----------------------------------------------------------------------------------------------------------
# class 7: host-wide kernel quotas
# ----------------------------------------------------------------------------------------------------------

#: (name, arguments) of every call denied for host-wide quotas (docs/sandbox.md, "Host-wide kernel quotas")
DENIED = ["io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents", "inotify_init1",
          "inotify_add_watch", "fanotify_init", "fanotify_mark", "memfd_secret", "keyctl", "add_key",
          "request_key", "userfaultfd", "fsopen", "fsmount", "fspick", "open_tree", "move_mount",
          "mount_setattr", "quotactl_fd", "open_tree_attr", "shmget", "msgget", "semget", "mq_open", "sync", "syncfs"]


def test_host_quota_calls_fail_with_eperm(sb1: Sandbox) -> None:
    """Each call that would charge a host-global or per-user quota fails with EPERM inside: the program
    sees the error, it is not killed, and the next program passes."""
    table = _worker.SYSCALLS[_worker._machine()]
    nrs = {n: table[n] for n in DENIED if n in table}
    assert len(nrs) >= len(DENIED) - 1   # inotify_init exists on x86_64 only; all others on both
    code = textwrap.dedent(f"""
        import ctypes
        NRS = {nrs!r}
        def f(x):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            buf = ctypes.create_string_buffer(256)
            out = {{}}
            for name, nr in NRS.items():
                ctypes.set_errno(0)
                r = libc.syscall(nr, 1, buf, 0, 0, 0, 0)
                out[name] = ctypes.get_errno() if r == -1 else -r - 1000
            return out
        """)
    expected = {n: errno.EPERM for n in nrs}
    v = sb1.evaluate([Task(code, [f"assert f(1) == {expected!r}"], None, "mbpp", LIM)], use_cache=False)[0]
    assert v.outcome == "pass", v.details()
    _check_then_good(sb1, "def f(x):\n    return 2 * x\n")


def _host_io_setup() -> int:
    """io_setup(1) then io_destroy on the host: 0 on success, else the errno (EAGAIN: fs.aio-max-nr spent)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ctx = ctypes.c_ulong(0)
    table = _worker.SYSCALLS[_worker._machine()]
    if libc.syscall(table["io_setup"], 1, ctypes.byref(ctx)) != 0:
        return ctypes.get_errno()
    libc.syscall(table["io_destroy"], ctx)
    return 0


def test_aio_loop_cannot_spend_the_hosts_aio_quota(sb1: Sandbox) -> None:
    """A program looping on io_setup (which once reserved all of fs.aio-max-nr, so the host's own io_setup
    failed with EAGAIN) gets EPERM on every attempt; the host's io_setup works meanwhile and after."""
    nr = _worker.SYSCALLS[_worker._machine()]["io_setup"]
    code = textwrap.dedent(f"""
        import ctypes, time
        def f(x):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            errs = set()
            made = 0
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                ctx = ctypes.c_ulong(0)
                if libc.syscall({nr}, 64, ctypes.byref(ctx)) == 0:
                    made += 1
                else:
                    errs.add(ctypes.get_errno())
            return (made, sorted(errs))
        """)
    results: list[int] = []
    done = threading.Event()

    def host() -> None:
        while not done.is_set():
            results.append(_host_io_setup())
            done.wait(0.05)

    t = threading.Thread(target=host)
    t.start()
    try:
        v = sb1.evaluate([Task(code, [f"assert f(1) == (0, [{errno.EPERM}])"], None, "mbpp", LIM)],
                         use_cache=False)[0]
    finally:
        done.set()
        t.join()
    assert v.outcome == "pass", v.details()
    assert results and all(r == 0 for r in results), results
    assert _host_io_setup() == 0


# ----------------------------------------------------------------------------------------------------------
# class 4 (mechanism): the program cannot lower its own CPU share
# ----------------------------------------------------------------------------------------------------------

def test_program_cannot_become_dumpable_nor_write_its_autogroup(sb1: Sandbox) -> None:
    """prctl(PR_SET_DUMPABLE, non-zero) fails with EPERM (both words of arg2 are checked); 0 and
    PR_GET_DUMPABLE work; a non-dumpable program cannot open /proc/self/autogroup for writing;
    PR_SCHED_CORE is denied."""
    code = textwrap.dedent("""
        import ctypes
        def f(x):
            libc = ctypes.CDLL(None, use_errno=True)
            out = []
            for args in ((4, 1), (4, 2), (4, 1 << 32), (4, 0), (3, 0), (62, 0)):
                ctypes.set_errno(0)
                r = libc.prctl(ctypes.c_int(args[0]), ctypes.c_ulong(args[1]), ctypes.c_ulong(0),
                               ctypes.c_ulong(0), ctypes.c_ulong(0))
                out.append(ctypes.get_errno() if r == -1 else ("ok", r))
            try:
                open("/proc/self/autogroup", "w").close()
                out.append("autogroup writable")
            except OSError as e:
                out.append(e.errno)
            return out
        """)
    expected = [errno.EPERM, errno.EPERM, errno.EPERM, ("ok", 0), ("ok", 0), errno.EPERM, errno.EACCES]
    v = sb1.evaluate([Task(code, [f"assert f(1) == {expected!r}"], None, "mbpp", LIM)], use_cache=False)[0]
    assert v.outcome == "pass", v.details()


_NICE_AUTOGROUP = textwrap.dedent("""
    import subprocess, sys
    def f(x):
        # an exec'd process is dumpable again, owns /proc/self/autogroup, and the autogroup is the whole
        # session's: this lowers the weight of the program's own process too
        subprocess.run([sys.executable, "-S", "-c",
                        "open('/proc/self/autogroup', 'w').write('19')"], check=False)
        while True:
            pass
    """)


@pytest.fixture
def cpu_hogs() -> Iterator[None]:
    """Two CPU-bound processes on the host, each in a session (and autogroup) of its own."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.skipif(_SUPPORT.cpu is None, reason="no writable cpu cgroup")
def test_autogroup_nice_cannot_turn_a_timeout_into_an_overload(sb1: Sandbox, cpu_hogs: None) -> None:
    """The slot runs in a cpu cgroup of its own with the default weight, so the autogroup nice a program
    sets (autogroups apply to the root task group only) does not change its CPU share: with two CPU-bound
    processes on the host, the spinning program reaches its CPU limit (a timeout), and is not masked as
    an overload. Generous limits: 1 CPU-second, hard wall 13 s (reached at a share of 1/13 of a core)."""
    before = sb1.pool.stats["overload"]
    lim = Limits(cpu=1.0, wall=3.0, memory_mb=256)
    v = sb1.evaluate([Task(_NICE_AUTOGROUP, TESTS, None, "mbpp", lim)], use_cache=False)[0]
    assert v.infra is None, v.infra
    assert v.outcome == "timeout", v.details()
    assert sb1.pool.stats["overload"] == before
    assert sb1.run(GOOD_MP, TESTS).outcome == "pass"


@needs_memcg
def test_memory_attacks_pooled_with_correct_programs() -> None:
    """The same attacks in one batch on a two-slot pool, interleaved with correct multiprocessing/tempfile
    programs: every attack is ``memory``, every correct program passes, nothing is masked or respawned."""
    tasks = []
    for k, (_, budget, code) in enumerate(MEMORY_ATTACKS):
        tasks.append(Task(textwrap.dedent(code), TESTS, None, "mbpp",
                          Limits(cpu=10.0, wall=30.0, memory_mb=budget)))
        tasks.append(Task(GOOD_MP + f"\n# {k}\n", TESTS, None, "mbpp", LIM))
    with Sandbox(SandboxConfig(slots=2)) as sb:
        verdicts = sb.evaluate(tasks, use_cache=False)
        assert [v.outcome for v in verdicts] == ["memory", "pass"] * len(MEMORY_ATTACKS), \
            [v.details() for v in verdicts]
        assert sb.pool.stats["infra_failures"] == 0
        assert sb.pool.stats["slot_starts"] == 2
        assert sb.stray_processes() == []


def test_a_programs_whole_cpu_time_is_found_where_cpuacct_is_mounted(tmp_path: Path) -> None:
    """Where a v1 machine counts a program's CPU time whole (its self-reaped children's included)."""
    paths = {"memory": "/m", "cpu": "/c", "cpuacct": "/a"}
    with_memory = [("/", "/sys/fs/cgroup/memory", "cgroup", {"rw", "memory", "cpuacct"})]
    assert cgroups._v1_acct(with_memory, paths, True) == ("prog", None)
    with_cpu = [("/", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", {"rw", "cpu", "cpuacct"})]
    assert cgroups._v1_acct(with_cpu, paths, True) == ("slot", None)
    assert cgroups._v1_acct(with_cpu, paths, False) == (None, None)  # no slot group in that hierarchy
    (tmp_path / "a").mkdir()
    alone = [("/", str(tmp_path), "cgroup", {"rw", "cpuacct"})]
    assert cgroups._v1_acct(alone, paths, True) == (None, None)  # no cpuacct.usage there
    (tmp_path / "a" / "cpuacct.usage").write_text("0\n")
    assert cgroups._v1_acct(alone, paths, True) == ("slot", str(tmp_path / "a"))
    assert cgroups._v1_acct([], paths, True) == (None, None)


@needs_memcg
def test_cgroup_fds_handed_to_the_worker_keep_clear_of_its_protocol_fds() -> None:
    """The worker moves its protocol pipes onto fds 10 and 11 at start; the inherited cgroup fds are
    duplicated to 64 and above first (a trainer with few open files once handed over fd 10: every
    program of that slot then failed with 'Illegal seek', masked)."""
    cg = cgroups.SlotCgroup.create(_SUPPORT, 99)
    try:
        fds = cg.worker_fds()
        assert min(fds.values()) >= cgroups.FD_MIN
        assert cgroups.parse_oom_kills(os.pread(fds["oom"], 4096, 0)) == 0
        if _SUPPORT.acct is not None:  # the counter of a program's whole CPU time, read by the worker
            raw = os.pread(fds["acct"], 4096, 0)
            assert (b"usage_usec " in raw) if cg.acct_kind.startswith("cpu.stat") else int(raw) >= 0
    finally:
        cg.destroy()
    assert not os.path.exists(cg.mem_dir)
