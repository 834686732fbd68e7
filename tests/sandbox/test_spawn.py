"""The argv steps' spawner (rewardlang/sandbox/spawn.c) and the program filter's search tree.

The spawner replaces the worker's fork for the compile and run steps of an argv program; it must leave a
step exactly as the forked child does (_child in _worker.py): its own session, stdio and the two channels
on fds 0-4 and nothing else open, the run directory, the rlimits, oom_score_adj 1000 (and the worker's own
unchanged), the program seccomp filter with its pid, the memory cgroup's fd written first, the set-up byte
before exec and the exec-failure byte after a failed exec. The library is built here from the tree's
spawn.c (gcc) and driven in a separate process (it sets no_new_privs, which cannot be undone).

The filter is a binary search over segments of the number line (one decision each); it must decide every system call number,
architecture and argument exactly as the chain of compares it replaced (kept below as the reference).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from rewardlang.sandbox import _worker, spawnlib

HERE = os.path.dirname(os.path.abspath(__file__))
SPAWN_C = os.path.join(HERE, "..", "..", "rewardlang", "sandbox", "spawn.c")


# -- the filter ---------------------------------------------------------------------------------------------

def chain_filter(deny: tuple[str, ...], pid: int | None, arch: str) -> bytes:
    """The program filter as it was built before the search tree: one compare per number, in order."""
    w = _worker
    table = w.SYSCALLS[arch]
    prog: list[tuple] = []
    labels: dict[str, int] = {}

    def emit(code: int, k: int = 0, jt: object = 0, jf: object = 0) -> None:
        prog.append((code, jt, jf, k & 0xFFFFFFFF))

    def label(name: str) -> None:
        labels[name] = len(prog)

    emit(w._LD_ABS_W, 4)
    emit(w._JEQ, w.AUDIT_ARCH[arch], jt=1, jf=0)
    emit(w._RET, w._RET_KILL_PROCESS)
    emit(w._LD_ABS_W, 0)
    if arch == "x86_64":
        emit(w._JGE, 0x40000000, jt="eperm", jf=0)
    special = {}
    if pid is not None:
        special = {"kill": "kill", "tgkill": "tgkill", "prlimit64": "prlimit", "clone": "clone",
                   "clone3": "enosys", "prctl": "prctl"}
    for name, target in special.items():
        emit(w._JEQ, table[name], jt=target, jf=0)
    for name in deny:
        if name in table and name not in special:
            emit(w._JEQ, table[name], jt="eperm", jf=0)
    emit(w._RET, w._RET_ALLOW)
    if pid is not None:
        label("kill")
        emit(w._LD_ABS_W, 16)
        emit(w._JEQ, pid, jt="allow2", jf=0)
        emit(w._JEQ, 0, jt="allow2", jf=0)
        emit(w._JEQ, -pid, jt="allow2", jf="eperm")
        label("tgkill")
        emit(w._LD_ABS_W, 16)
        emit(w._JEQ, pid, jt="allow2", jf="eperm")
        label("prlimit")
        emit(w._LD_ABS_W, 16)
        emit(w._JEQ, 0, jt="allow2", jf=0)
        emit(w._JEQ, pid, jt="allow2", jf="eperm")
        label("clone")
        emit(w._LD_ABS_W, 16)
        emit(w._JSET, w.CLONE_NS_FLAGS, jt="eperm", jf="allow2")
        label("enosys")
        emit(w._RET, w._RET_ERRNO | errno.ENOSYS)
        label("prctl")
        emit(w._LD_ABS_W, 16)
        emit(w._JEQ, w.PR_SET_DUMPABLE, jt="dumpable", jf=0)
        emit(w._JEQ, w.PR_SCHED_CORE, jt="eperm", jf="allow2")
        label("dumpable")
        emit(w._LD_ABS_W, 24)
        emit(w._JEQ, 0, jt=0, jf="eperm")
        emit(w._LD_ABS_W, 28)
        emit(w._JEQ, 0, jt="allow2", jf="eperm")
    label("eperm")
    emit(w._RET, w._RET_ERRNO | errno.EPERM)
    label("allow2")
    emit(w._RET, w._RET_ALLOW)
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        offs = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        out += struct.pack("=HBBI", code, offs[0], offs[1], k)
    return bytes(out)


@functools.lru_cache(maxsize=16)
def _insns(raw: bytes) -> tuple[tuple[int, int, int, int], ...]:
    """A filter's instructions, decoded once (the test runs each filter on thousands of calls)."""
    return tuple(struct.unpack_from("=HBBI", raw, i) for i in range(0, len(raw), 8))


def run_bpf(raw: bytes, nr: int, arch: int, args: tuple[int, ...]) -> tuple[int, int]:
    """(return value, instructions executed) of a classic-BPF seccomp filter on one seccomp_data."""
    data = struct.pack("=iIQ", nr, arch, 0) + b"".join(struct.pack("=Q", a & (2 ** 64 - 1)) for a in args)
    insns = _insns(raw)
    pc = acc = steps = 0
    while True:
        code, jt, jf, k = insns[pc]
        steps += 1
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):
            taken = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:
            return k, steps
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("arch", sorted(_worker.AUDIT_ARCH))
def test_the_filter_tree_decides_every_call_as_the_chain(arch: str) -> None:
    pid = 4242
    argsets = [(pid, 0), (0, 0), (-pid, 0), (17, 0), (_worker.CLONE_NS_FLAGS, 0), (0x11, 0),
               (_worker.PR_SET_DUMPABLE, 1), (_worker.PR_SET_DUMPABLE, 0), (_worker.PR_SET_DUMPABLE, 2 ** 32),
               (_worker.PR_SCHED_CORE, 0)]
    numbers = [*range(1100), *range(0x40000000, 0x40000000 + 600, 7), -1, 2 ** 31 - 1]
    steps = [0, 0]
    checked = {_worker.SYSCALLS[arch][n] for n in ("kill", "tgkill", "prlimit64", "clone", "clone3", "prctl")}
    for deny in (_worker.PROGRAM_DENY, _worker.PROGRAM_DENY + _worker.FALLBACK_DENY, _worker.SLOT_DENY):
        for p in (None, pid):
            old, new = chain_filter(deny, p, arch), _worker.build_filter(deny, pid=p, arch=arch)
            for nr in numbers:
                for audit in (_worker.AUDIT_ARCH[arch], 0x40000003):
                    # the arguments are read only for the argument-checked calls
                    for args in argsets if nr in checked else argsets[:1]:
                        (a, sa), (b, sb) = run_bpf(old, nr, audit, args), run_bpf(new, nr, audit, args)
                        assert a == b, (deny is _worker.SLOT_DENY, p, nr, hex(audit), args, hex(a), hex(b))
                        steps[0] += sa
                        steps[1] += sb
    # a denied call is still denied, an allowed one allowed (not merely "the same as before")
    f = _worker.build_filter(_worker.PROGRAM_DENY, pid=pid, arch=arch)
    table = _worker.SYSCALLS[arch]
    assert run_bpf(f, table["ptrace"], _worker.AUDIT_ARCH[arch], (0,))[0] == _worker._RET_ERRNO | errno.EPERM
    assert run_bpf(f, 0 if arch == "x86_64" else 63, _worker.AUDIT_ARCH[arch], (0,))[0] == _worker._RET_ALLOW
    assert steps[1] * 3 < steps[0]   # the point of the tree: far fewer instructions per call


# -- the spawner --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The spawner built from this source, once for the module (the tests only load it; one that moves or
    changes the file works on its own copy)."""
    if shutil.which("gcc") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("gcc is missing (scripts/install.sh installs it): the spawner cannot be built")
        pytest.skip("gcc is missing")
    return spawnlib.build(os.path.join(str(tmp_path_factory.mktemp("spawner")), "librlspawn.so"))


# Run in a child process: it sets no_new_privs (needed by seccomp), which this process must not keep.
DRIVER = r"""
import json, os, resource, sys
from rewardlang.sandbox import _worker as w
spawn = w._spawner(sys.argv[1])
assert spawn is not None
assert w._lib().prctl(w.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
rundir, exe = sys.argv[2], sys.argv[3]
tpl = w.FilterTemplate(w.PROGRAM_DENY)
# fds 0-9 taken, as in the worker (the spawner refuses a source fd among the targets 0-4: -EBADF)
low = [os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC) for _ in range(10)]
sites = [x for s in tpl.sites for x in s]
import ctypes
out_r, out_w = os.pipe2(os.O_CLOEXEC)
res_r, res_w = os.pipe2(os.O_CLOEXEC)
ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
cg_r, cg_w = os.pipe2(os.O_CLOEXEC)
stray = os.open("/dev/null", os.O_RDONLY)   # inheritable: must still not reach the step
os.set_inheritable(stray, True)
devnull = os.open("/dev/null", os.O_WRONLY | os.O_CLOEXEC)
script = ("echo session=$(cut -d' ' -f6 /proc/$$/stat) pid=$$; echo fds=$(ls /proc/$$/fd | sort -n | tr '\n' ,); "
          "echo cwd=$(pwd); echo nofile=$(ulimit -n) cpu=$(ulimit -t); echo oom=$(cat /proc/$$/oom_score_adj); "
          "grep -E '^(Seccomp|NoNewPrivs):' /proc/$$/status | tr -d '\t' | tr '\n' ' '; echo; "
          "kill -0 1 2>/dev/null && echo kill1=allowed || echo kill1=denied; echo res >&3; echo err >&2")
argv = [exe, "-c", script]
strings = lambda xs: (ctypes.c_char_p * (len(xs) + 1))(*[x.encode() for x in xs], None)
limits = [(resource.RLIMIT_NOFILE, 77), (resource.RLIMIT_CPU, 5)]
rl = (ctypes.c_longlong * 4)(*[x for p in limits for x in p])
raw = bytes(tpl.raw)
pid = spawn(exe.encode(), strings(argv), strings(["PATH=/usr/bin:/bin", "HOME=" + rundir]), b"/dev/null", out_w,
            devnull, res_w, ready_w, cg_w, rundir.encode(), rl, 2, raw, len(raw), (ctypes.c_int * len(sites))(*sites),
            len(sites) // 2)
for fd in (out_w, res_w, ready_w, cg_w):
    os.close(fd)
_, status = os.waitpid(pid, 0) if pid > 0 else (0, -1)
read = lambda fd: os.read(fd, 65536).decode()
print(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status) if pid > 0 else None, "out": read(out_r),
                  "res": read(res_r), "ready": read(ready_r), "cg": read(cg_r),
                  "own_oom": open("/proc/self/oom_score_adj").read().strip()}))
"""


def _drive(lib: str, rundir: str, exe: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", ".."))
    r = subprocess.run([sys.executable, "-c", DRIVER, lib, rundir, exe], capture_output=True, text=True, check=False,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.skipif(_worker._machine() not in _worker.AUDIT_ARCH, reason="no program filter on this architecture")
def test_the_spawner_sets_a_step_up_as_the_forked_child_does(tmp_path: object, built: str) -> None:
    lib = built
    rundir = os.path.join(str(tmp_path), "run")
    os.mkdir(rundir)
    r = _drive(lib, rundir, "/bin/sh")
    assert r["pid"] > 0 and r["exit"] == 0, r
    fields = dict(kv.split("=", 1) for line in r["out"].splitlines() for kv in line.split() if "=" in kv)
    assert fields["session"] == fields["pid"]           # its own session
    assert fields["fds"] == "0,1,2,3,4,"                # nothing of the worker's but the five
    assert fields["cwd"] == rundir
    assert (fields["nofile"], fields["cpu"]) == ("77", "5")
    assert fields["oom"] == "1000" and r["own_oom"] == "0"   # the step's own value; the spawner's unchanged
    assert "Seccomp:2" in r["out"] and "NoNewPrivs:1" in r["out"]
    assert fields["kill1"] == "denied"                   # the program filter, with the step's pid
    assert r["res"] == "res\n"                           # the result channel on fd 3
    assert r["ready"] == "R"                             # the set-up byte, nothing after a good exec
    assert r["cg"] == "0"                                # into the memory group first
    assert "err" not in r["out"]                         # stderr went where it was told (/dev/null)


def test_a_failed_exec_is_reported_on_the_set_up_channel(tmp_path: object, built: str) -> None:
    lib = built
    r = _drive(lib, str(tmp_path), "/nonexistent/toolchain")
    assert r["ready"] == "RE" and r["exit"] == _worker.SETUP_FAILED, r


def test_the_installed_spawner_is_the_one_built_from_this_source() -> None:
    """Where scripts/install.sh built it, the library for this very spawn.c is there and loads (the same
    interface version); under CI it must be there. Elsewhere the worker forks, with the same set-up in Python."""
    path = spawnlib.installed()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{spawnlib.library_path()} is missing: scripts/install.sh builds it")
        pytest.skip("the spawner is not installed here")
    assert _worker._spawner(path) is not None


def test_a_library_from_another_source_is_never_found(tmp_path: object, built: str) -> None:
    """The library's name carries the digest of the spawn.c it was built from: one built from an edited
    source is not the one this package looks for (a stale library is ignored, never called)."""
    lib = shutil.copy(built, os.path.join(str(tmp_path), "librlspawn.so"))
    assert spawnlib.installed(str(tmp_path)) is None            # built, but not under this source's name
    os.rename(lib, spawnlib.library_path(str(tmp_path)))
    assert spawnlib.installed(str(tmp_path)) == spawnlib.library_path(str(tmp_path))
    assert _worker._spawner(None) is None and _worker._spawner(str(tmp_path) + "/absent.so") is None
    other = tmp_path / "other"                                   # type: ignore[operator]
    os.mkdir(other)
    shutil.copy(spawnlib.SOURCE, other / "spawn.c")
    with open(other / "spawn.c", "a") as fh:
        fh.write("/* edited */\n")
    old, spawnlib.SOURCE = spawnlib.SOURCE, str(other / "spawn.c")
    spawnlib.source_digest.cache_clear()
    try:
        assert spawnlib.installed(str(tmp_path)) is None         # the edited source's library is not there
    finally:
        spawnlib.SOURCE = old
        spawnlib.source_digest.cache_clear()


def _spawns(monkeypatch: pytest.MonkeyPatch, lib: str | None) -> tuple[list, list[str | None]]:
    """Verdicts of a passing Bash program, a failing one, and two that `bash -n` rejects (one writes a
    marker before its syntax error), through a bwrap slot whose worker gets ``lib`` as its spawner; and how
    each step was started ("clone": the spawner, "fork": the worker forked)."""
    from lang_programs import lang_tests, require, unit

    from rewardlang.sandbox import pool
    from rewardlang.sandbox.config import SandboxConfig
    from rewardlang.sandbox.runner import Sandbox, Task

    require("sh")
    monkeypatch.setattr(spawnlib, "installed", lambda lib_dir=spawnlib.LIB_DIR: lib)
    seen: list[str | None] = []
    request = pool.Slot.request

    def spy(self: pool.Slot, req: object, hard: float) -> tuple:
        head, blobs = request(self, req, hard)
        if isinstance(req, tuple) and b'"mode": "argv"' in req[0]:   # not the start-up probe (Python)
            seen.extend(r.get("spawn") for r in head["runs"])
        return head, blobs

    monkeypatch.setattr(pool.Slot, "request", spy)
    tests = lang_tests("sh")
    with Sandbox(SandboxConfig(slots=1, level="bwrap")) as sb:
        vs = sb.evaluate([Task(unit("sh", True), tests, language="sh"), Task(unit("sh", False), tests, language="sh"),
                          Task("echo ran >&3\necho ran\nevens() { if then; }\n", tests, language="sh"),
                          Task("evens( {\n", tests, language="sh")], use_cache=False)
    return vs, seen


@pytest.mark.parametrize("installed", [True, False], ids=["spawner", "missing-library-forks"])
def test_steps_without_the_library_fork_with_the_same_verdicts(monkeypatch: pytest.MonkeyPatch,
                                                               installed: bool) -> None:
    """A missing library is a correct fallback, not a weaker one: the worker forks each step (the set-up in
    Python) and every verdict is the same; `bash -n` still gates the run (the line before the syntax error
    never runs: no record reaches the result channel)."""
    from rewardlang.sandbox.config import SandboxConfig
    from rewardlang.sandbox.launch import find_bwrap

    if find_bwrap(SandboxConfig()) is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bwrap is missing (scripts/install.sh installs it)")
        pytest.skip("bwrap is missing")
    lib = spawnlib.installed() if installed else None
    if installed and lib is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{spawnlib.library_path()} is missing: scripts/install.sh builds it")
        pytest.skip("the spawner is not installed here")
    vs, seen = _spawns(monkeypatch, lib)
    assert [v.outcome for v in vs] == ["pass", "fail", "compile_error", "compile_error"], [v.details() for v in vs]
    assert [t.status for t in vs[2].tests] == ["compile_error"] * 3
    # two steps for each program that compiled, one (the syntax check) for each that did not
    assert seen == ["clone" if installed else "fork"] * 6, seen


def test_spawnlib_examples() -> None:
    import doctest

    assert doctest.testmod(spawnlib).failed == 0


WAIT_DRIVER = r"""
import ctypes, json, os, sys
from rewardlang.sandbox import _worker as w
lib = sys.argv[1]
spawn = w._spawner(lib)
wait = w._WAIT_SHORT[lib]
low = [os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC) for _ in range(10)]
devnull = os.open("/dev/null", os.O_WRONLY | os.O_CLOEXEC)
strings = lambda xs: (ctypes.c_char_p * (len(xs) + 1))(*[x.encode() for x in xs], None)
out = {}
for name, script, room in (("quick", "printf hello; printf 'res\\n' >&3", 3), ("slow", "sleep 1; printf late", 64),
                           ("absent", None, 64)):
    pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(3)]
    (out_r, out_w), (res_r, res_w), (ready_r, ready_w) = pipes
    exe = "/bin/sh" if script is not None else "/nonexistent/toolchain"
    pid = spawn(exe.encode(), strings([exe, "-c", script or ""]), strings(["PATH=/usr/bin:/bin"]), b"/dev/null",
                out_w, devnull, res_w, ready_w, -1, b"/", (ctypes.c_longlong * 0)(), 0, None, 0,
                (ctypes.c_int * 1)(), 0)
    for fd in (out_w, res_w, ready_w):
        os.close(fd)
    ob, rb = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    r = (ctypes.c_longlong * 5)()
    k = wait(pid, 20, out_r, ctypes.addressof(ob), room, res_r, ctypes.addressof(rb), 64, ready_r, r)
    rec = {"k": k}
    if k == 1:
        rec.update(status=r[0], out=ob.raw[:r[1]].decode(), res=rb.raw[:r[2]].decode(),
                   ready=bytes((r[4] & 0xFF, r[4] >> 8))[:r[3]].decode())
    else:
        _, status = os.waitpid(pid, 0)       # not reaped by the short wait: still ours to reap
        rec.update(status=status, later=os.read(out_r, 64).decode())
    out[name] = rec
print(json.dumps(out))
"""


def test_the_short_wait_reaps_a_quick_step_and_leaves_a_slow_one(built: str) -> None:
    """rl_wait_short: a step that exits within the timeout is reaped, its pipes read up to the room given
    (the caller's cap + 1) and its set-up bytes returned; one that outlives it is neither reaped nor read
    (the worker's loop takes over); a failed exec reports "RE" as on the Python path."""
    lib = built
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", ".."))
    r = subprocess.run([sys.executable, "-c", WAIT_DRIVER, lib], capture_output=True, text=True, check=False,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["quick"] == {"k": 1, "status": 0, "out": "hel", "res": "res\n", "ready": "R"}
    assert got["slow"] == {"k": 0, "status": 0, "later": "late"}
    assert got["absent"]["k"] == 1 and got["absent"]["ready"] == "RE"
    assert os.waitstatus_to_exitcode(got["absent"]["status"]) == _worker.SETUP_FAILED


STEP_DRIVER = r"""
import ctypes, json, os, sys
from rewardlang.sandbox import _worker as w
lib = sys.argv[1]
assert w._spawner(lib) is not None
step = w._STEP[lib]
PR_SET_CHILD_SUBREAPER = 36
assert w._lib().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0    # as the worker is: orphans come to us
low = [os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC) for _ in range(10)]
devnull = os.open("/dev/null", os.O_WRONLY | os.O_CLOEXEC)
strings = lambda xs: (ctypes.c_char_p * (len(xs) + 1))(*[x.encode() for x in xs], None)
keep = []
out = {}
for name, script, room, stderr in (("quick", "printf hello; printf 'res\\n' >&3; echo err >&2", 3, 1),
                                   ("quiet_err", "echo err >&2; exit 3", 64, 0),
                                   ("leaves", "sleep 5 & printf ok", 64, 0),
                                   ("slow", "sleep 1; printf late", 64, 0),
                                   ("absent", None, 64, 0)):
    exe = "/bin/sh" if script is not None else "/nonexistent/toolchain"
    argv, envp = strings([exe, "-c", script or ""]), strings(["PATH=/usr/bin:/bin"])
    exe_b, stdin_b, run_b = (ctypes.create_string_buffer(x) for x in (exe.encode(), b"/dev/null", b"/"))
    rl = (ctypes.c_longlong * 2)(7, 64)     # RLIMIT_NOFILE 64
    cfg = w._StepCfg(ctypes.cast(exe_b, ctypes.c_char_p), ctypes.cast(argv, ctypes.c_void_p),
                     ctypes.cast(envp, ctypes.c_void_p), ctypes.cast(stdin_b, ctypes.c_char_p),
                     ctypes.cast(run_b, ctypes.c_char_p), ctypes.cast(rl, ctypes.c_void_p), 1, stderr, None, 0,
                     None, 0)
    keep += [cfg, argv, envp, exe_b, stdin_b, run_b, rl]
    ob, rb = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    r = (ctypes.c_longlong * 14)()
    fds_before = len(os.listdir("/proc/self/fd"))
    k = step(ctypes.addressof(cfg), devnull, -1, 20, ctypes.addressof(ob), room, ctypes.addressof(rb), 64,
             ctypes.addressof(r))
    rec = {"k": k, "pid_ok": r[0] > 0}
    if k == 1:
        rec.update(status=r[6], out=ob.raw[:r[7]].decode(), res=rb.raw[:r[8]].decode(),
                   ready=bytes((r[10] & 0xFF, r[10] >> 8))[:r[9]].decode(), clean=r[13],
                   wall_ok=r[11] >= r[4], cpu_ok=r[12] >= r[5] >= 0,
                   fds_left=len(os.listdir("/proc/self/fd")) - fds_before)
        if not r[13]:
            os.kill(-r[0], 9)
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
    else:
        _, status = os.waitpid(r[0], 0)     # not reaped by rl_step: still ours to reap, its pipes open
        rec.update(status=status, later=os.read(r[1], 64).decode())
        for fd in (r[1], r[2], r[3]):
            os.close(fd)
    out[name] = rec
print(json.dumps(out))
"""


def test_rl_step_runs_a_short_step_whole_and_hands_a_long_one_over(built: str) -> None:
    """rl_step: a step that ends within the first tick is spawned, reaped and read in one call (stdout up to
    the room given, the result channel, stderr only where the step joins it to stdout, the set-up byte), its
    descriptors closed, the clock and the children's CPU before and after; a step that leaves a process
    behind is reported not clean (the worker then kills it); one that outlives the tick is neither reaped nor
    read, its pipes left open for the worker's loop; a failed exec reports "RE" and the set-up exit status."""
    lib = built
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", ".."))
    r = subprocess.run([sys.executable, "-c", STEP_DRIVER, lib], capture_output=True, text=True, check=False,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["quick"] == {"k": 1, "pid_ok": True, "status": 0, "out": "hel", "res": "res\n", "ready": "R",
                            "clean": 1, "wall_ok": True, "cpu_ok": True, "fds_left": 0}
    q = got["quiet_err"]
    assert (q["k"], os.waitstatus_to_exitcode(q["status"]), q["out"], q["clean"]) == (1, 3, "", 1)
    assert got["leaves"]["k"] == 1 and got["leaves"]["clean"] == 0 and got["leaves"]["out"] == "ok"
    assert got["slow"] == {"k": 0, "pid_ok": True, "status": 0, "later": "late"}
    a = got["absent"]
    assert a["k"] == 1 and a["ready"] == "RE" and os.waitstatus_to_exitcode(a["status"]) == _worker.SETUP_FAILED


def _head(**kw: object) -> dict:
    h = {"exit": 0, "reason": None, "cpu": 0.0012, "wall": 0.0031, "idle": 0.0, "setup_failed": False,
         "clean": True, "recycle": False, "oom": 0, "exec_failed": False, "not_built": False, "spawn": "clone",
         "t": [1e-05, 0.0031, 2e-05, 0.0004], "res_len": 12, "out_len": 0, "last": False}
    h.update(kw)
    return h


@pytest.mark.parametrize("kw", [{}, {"reason": "cpu", "exit": -9, "last": True}, {"reason": "memory", "oom": 3},
                                {"reason": "killed", "exit": -9}, {"reason": "output", "out_len": 1 << 20},
                                {"setup_failed": True, "clean": False, "recycle": True, "exec_failed": True,
                                 "spawn": "fork", "exit": 121}, {"not_built": True, "last": True},
                                {"reason": "obs"}, {"reason": "wall"},
                                {"reason": "overload", "idle": 3.5}])
def test_a_run_head_travels_binary_and_comes_back_the_same(kw: dict) -> None:
    from rewardlang.sandbox.pool import unpack_run

    h = _head(**kw)
    f = _worker.run_frame(h)
    assert struct.unpack("<I", f[:4])[0] == len(f) - 4 == _worker.RUN_STRUCT.size
    assert f[4] == _worker.RUN_TAG
    assert unpack_run(f[4:]) == {"run": h}


@pytest.mark.parametrize("kw", [{"reason": "something new"}, {"exit": 1 << 40}, {"oom": -1},
                                {"judge": {"exit": 0}, "judge_len": 5}, {"extra": 1}])
def test_a_head_the_binary_frame_cannot_carry_goes_as_json(kw: dict) -> None:
    from rewardlang.sandbox.pool import _loads

    h = _head(**kw)
    f = _worker.run_frame(h)
    assert f[4:5] == b"{"
    assert _loads(f[4:]) == {"run": h}


def test_a_malformed_binary_head_is_refused() -> None:
    from rewardlang.sandbox.pool import unpack_run

    good = _worker.run_frame(_head())[4:]
    for bad in (good[:-1], good + b"\0", good[:5] + bytes([200]) + good[6:]):   # byte 5: the reason
        with pytest.raises(ValueError):
            unpack_run(bad)


PROGRAM_DRIVER = r"""
import ctypes, json, os, sys, tempfile
from rewardlang.sandbox import _worker as w
lib = sys.argv[1]
assert w._spawner(lib) is not None
prog = w._PROGRAM[lib]
assert w._lib().prctl(36, 1, 0, 0, 0) == 0    # PR_SET_CHILD_SUBREAPER, as the worker is
low = [os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC) for _ in range(10)]
devnull = os.open("/dev/null", os.O_WRONLY | os.O_CLOEXEC)
strings = lambda xs: (ctypes.c_char_p * (len(xs) + 1))(*[x.encode() for x in xs], None)
keep = []

def cfg(argv, rundir):
    a, e = strings(argv), strings(["PATH=/usr/bin:/bin"])
    bufs = [ctypes.create_string_buffer(x) for x in (argv[0].encode(), b"/dev/null", rundir.encode())]
    rl = (ctypes.c_longlong * 2)(7, 64)
    c = w._StepCfg(ctypes.cast(bufs[0], ctypes.c_char_p), ctypes.cast(a, ctypes.c_void_p),
                   ctypes.cast(e, ctypes.c_void_p), ctypes.cast(bufs[1], ctypes.c_char_p),
                   ctypes.cast(bufs[2], ctypes.c_char_p), ctypes.cast(rl, ctypes.c_void_p), 1, 1, None, 0, None, 0)
    keep.extend([c, a, e, rl, *bufs])
    return ctypes.addressof(c)

out = {}
cases = {
    "both": (["exit 0", "printf '0 1\\n' >&3"], ""),
    "compile_fails": (["echo bad; exit 1", "printf never >&3"], ""),
    "compile_talks": (["printf warning", "printf '0 1\\n' >&3"], ""),
    "leaves": (["exit 0", "sleep 5 & printf '0 1\\n' >&3"], ""),
    "extra_file": (["exit 0", "echo x > extra"], ""),
    "root_xattr": (["exit 0", "python3 -c 'import os; os.setxattr(\"..\", \"user.answer\", b\"42\")'"], ""),
    "exists": (["exit 0", "exit 0"], "premade"),
}
for name, (scripts, pre) in cases.items():
    root = tempfile.mkdtemp(dir="/dev/shm")
    rundir = os.path.join(root, "run")
    if pre:
        os.mkdir(rundir)
    f = os.stat(root, follow_symlinks=False)
    pg = w._Prog()
    bufs = [rundir.encode(), os.path.join(rundir, "main.sh").encode(), root.encode()]
    src = ctypes.create_string_buffer(b"# the source\n")
    keep.extend([pg, src, *bufs])
    pg.rundir, pg.srcpath = bufs[0], bufs[1]
    pg.src, pg.src_len = ctypes.addressof(src), 13
    pg.n_steps = len(scripts)
    for i, sc in enumerate(scripts):
        pg.cfg[i] = cfg(["/bin/sh", "-c", sc], rundir)
        pg.out_room[i], pg.res_room[i] = 64, 64
    ob, rb = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    pg.out_buf, pg.res_buf = ctypes.addressof(ob), ctypes.addressof(rb)
    pg.devnull, pg.cg_fd, pg.oom_fd, pg.timeout_ms, pg.oom_before = devnull, -1, -1, 2000, 0
    pg.n_roots = 1
    pg.roots[0] = w._Root(bufs[2], f.st_mode, f.st_uid, f.st_gid, f.st_nlink, f.st_size, f.st_atime_ns, f.st_mtime_ns)
    r = (ctypes.c_longlong * (8 + 16 * w._PROG_STEPS))()
    k = prog(ctypes.addressof(pg), ctypes.addressof(r))
    recs = [list(r[8 + 16 * i:24 + 16 * i]) for i in range(r[0])]
    rec = {"k": k, "n": r[0], "bits": r[1], "err": r[2], "stage": r[3],
           "exits": [os.waitstatus_to_exitcode(x[6]) for x in recs], "clean": [x[13] for x in recs],
           "ks": [x[14] for x in recs], "out": [ob.raw[:x[7]].decode() for x in recs],
           "res": [rb.raw[:x[8]].decode() for x in recs], "dir_left": os.path.isdir(rundir),
           "times_back": os.stat(root).st_mtime_ns == f.st_mtime_ns}
    for x in recs:
        if not x[13]:
            os.kill(-x[0], 9)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    out[name] = rec
print(json.dumps(out))
"""


def test_rl_program_runs_the_common_case_whole_and_stops_where_the_worker_must_go_on(built: str) -> None:
    """rl_program: the run directory and the source, then the steps while each went well and left nothing to
    relay or kill, then the clean-up of an interpreted program's directory and the roots' check (their times
    put back). It stops, leaving the rest to the worker, after a step that failed (no run after a failed
    compile), wrote something, or left a process behind; it does not claim a clean-up it could not prove (a
    file the program left, an extended attribute on a root); a directory that cannot be made is an error."""
    lib = built
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", ".."))
    r = subprocess.run([sys.executable, "-c", PROGRAM_DRIVER, lib], capture_output=True, text=True, check=False,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    b = got["both"]
    assert (b["n"], b["exits"], b["clean"], b["ks"], b["res"], b["bits"]) == (2, [0, 0], [1, 1], [1, 1],
                                                                               ["", "0 1\n"], 3)
    assert not b["dir_left"] and b["times_back"]
    f = got["compile_fails"]
    assert (f["n"], f["exits"], f["out"], f["bits"], f["dir_left"]) == (1, [1], ["bad\n"], 0, True)
    t = got["compile_talks"]
    assert (t["n"], t["exits"], t["out"], t["bits"]) == (1, [0], ["warning"], 0)
    lv = got["leaves"]
    assert (lv["n"], lv["clean"], lv["bits"], lv["dir_left"]) == (2, [1, 0], 0, True)
    x = got["extra_file"]
    assert (x["n"], x["exits"], x["bits"], x["dir_left"]) == (2, [0, 0], 0, True)
    xa = got["root_xattr"]
    assert (xa["n"], xa["exits"], xa["bits"], xa["dir_left"]) == (2, [0, 0], 1, False)
    e = got["exists"]
    assert (e["k"], e["n"], e["err"], e["stage"]) == (-errno.EEXIST, 0, -errno.EEXIST, 1)
