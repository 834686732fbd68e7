"""The warm analyser helper: every raw result equal to the cold path's on the HumanEval corpus, a run is what
``python -m`` would be (status, output, cwd, env, argv), runs never see each other's state, deadlines kill the
whole group, and a dead helper is restarted or, when it cannot be, an infrastructure failure (never a score)."""

from __future__ import annotations

import doctest
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from rewardlang.runtime.api import Context
from rewardlang.runtime.components.quality import QualityParams, quality_score
from rewardlang.runtime.tools import codequal, pylint, warm, warm_helper
from rewardlang.runtime.tools.runner import file_name_for
from rewardlang.runtime.tools.warm import HelperDead, WarmHelper

ROOT = Path(__file__).resolve().parents[3]

# A stand-in tool module run by a private helper: what it does is chosen by its first argument. Its module-level
# STATE is the "global state" a run could leave behind for the next one.
TARGET = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    STATE = []

    def main():
        what = sys.argv[1]
        STATE.append(what)
        if what == "exit":
            print("to stdout")
            print("to stderr", file=sys.stderr)
            sys.exit(int(sys.argv[2]))
        if what == "raise":
            raise ValueError("boom")
        if what == "message":
            sys.exit("a message")
        if what == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if what == "hang":  # a grandchild in the same group, then hang
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            with open(sys.argv[2], "w") as f:
                f.write(str(child.pid))
            time.sleep(120)
        if what == "mess":  # what a run can leave behind in its process (the analysers raise the limit)
            print("messing")
            sys.setrecursionlimit(54321)
            sys.path.insert(0, "/nowhere")
            signal.signal(signal.SIGALRM, lambda *_: None)
            signal.setitimer(signal.ITIMER_REAL, 1000)
            os.chdir("/")
            sys.stdout.close()
        if what == "rlimit":  # a hard limit lowered: it cannot be raised again in that process
            import resource
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 64), min(hard, 64)))
        if what == "nofile":
            import resource
            print(json.dumps(resource.getrlimit(resource.RLIMIT_NOFILE)))
        if what == "thread":  # a thread left running: a reused worker must not serve another run after it
            import threading
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        if what == "rebind":  # a module global of a package a worker watches, rebound
            os.getcwd = lambda: "/rebound"
            json.dumps = lambda *a, **k: '"rebound"'
        if what == "spin":  # this much of its own CPU
            end = time.process_time() + float(sys.argv[2])
            while time.process_time() < end:
                pass
        if what == "sleep":
            time.sleep(float(sys.argv[2]))
        if what == "pid":
            print(os.getpid())
        if what == "block":  # says where it runs, then waits until the file argv[3] exists (the test's release)
            with open(sys.argv[2] + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(sys.argv[2] + ".tmp", sys.argv[2])
            while not os.path.exists(sys.argv[3]):
                time.sleep(0.02)
        if what == "where":
            print(json.dumps({"cwd": os.getcwd(), "env": os.environ.get("RL_WARM_TEST"), "path0": sys.path[0],
                              "argv": sys.argv, "state": len(STATE), "name": __name__,
                              "limit": sys.getrecursionlimit(), "paths": len(sys.path),
                              "alarm": signal.getitimer(signal.ITIMER_REAL)[0],
                              "handler": str(signal.getsignal(signal.SIGALRM)),
                              "getcwd": os.getcwd.__module__, "modules": len(sys.modules)}))

    if __name__ == "__main__":
        main()
""")


def _target_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in module in ``tmp_path/lib``, first on PYTHONPATH (once for the helpers of one test)."""
    lib = tmp_path / "lib"
    if not lib.exists():
        lib.mkdir()
        (lib / "rl_warm_target.py").write_text(TARGET)
        path = os.pathsep.join([str(lib), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        monkeypatch.setenv("PYTHONPATH", path)


@pytest.fixture()
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A private helper for the stand-in module ``rl_warm_target`` (preloaded, as the tools are)."""
    _target_path(tmp_path, monkeypatch)
    h = WarmHelper(["rl_warm_target"], warmup=False)
    h.start()
    yield h
    h.close()


@pytest.fixture()
def reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A private helper whose worker serves the stand-in module's runs one after the other."""
    _target_path(tmp_path, monkeypatch)
    h = WarmHelper(["rl_warm_target"], warmup=False, reuse=["rl_warm_target"])
    h.start()
    yield h
    h.close()


def _ends(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` is gone (or a zombie: killed, waiting for whoever adopted it) within ``within`` s."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def _cold(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rl_warm_target", *args], check=False, cwd=cwd,
                           capture_output=True, text=True,
                          env=dict(os.environ), timeout=60)


# ------------------------------------------------------------------------------- a run is `python -m`
def test_a_run_is_what_python_dash_m_would_be(target: WarmHelper, tmp_path: Path) -> None:
    env = {**os.environ, "RL_WARM_TEST": "yes"}
    r = target.run("rl_warm_target", ["exit", "7"], cwd=tmp_path, env=env, timeout=30)
    c = _cold(["exit", "7"], tmp_path)
    assert (r.returncode, r.stdout, r.stderr, r.timed_out) == (c.returncode, c.stdout, c.stderr, False) == \
        (7, "to stdout\n", "to stderr\n", False)
    r = target.run("rl_warm_target", ["message"], cwd=tmp_path, env=env, timeout=30)
    assert (r.returncode, r.stderr) == (1, "a message\n") == (_cold(["message"], tmp_path).returncode, "a message\n")
    r = target.run("rl_warm_target", ["raise"], cwd=tmp_path, env=env, timeout=30)
    assert r.returncode == 1 == _cold(["raise"], tmp_path).returncode
    assert r.stderr.startswith("Traceback") and r.stderr.strip().endswith("ValueError: boom")
    r = target.run("rl_warm_target", ["segv"], cwd=tmp_path, env=env, timeout=30)
    assert r.returncode == -signal.SIGSEGV == _cold(["segv"], tmp_path).returncode
    where = json.loads(target.run("rl_warm_target", ["where"], cwd=tmp_path, env=env, timeout=30).stdout)
    assert where["cwd"] == str(tmp_path) and where["path0"] == str(tmp_path) and where["env"] == "yes"
    assert where["argv"][1:] == ["where"] and where["argv"][0].endswith("rl_warm_target.py")
    assert where["name"] == "__main__"
    # nothing a run did to the module's state reaches the next run: each starts from the helper's state
    assert where["state"] == 1
    assert json.loads(target.run("rl_warm_target", ["where"], cwd=tmp_path, env=env, timeout=30).stdout)["state"] == 1


def test_the_deadline_kills_the_run_and_its_group(target: WarmHelper, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    t0 = time.monotonic()
    r = target.run("rl_warm_target", ["hang", str(pidfile)], cwd=tmp_path, env=dict(os.environ), timeout=0.6)
    assert r.timed_out and r.returncode == -signal.SIGKILL
    assert time.monotonic() - t0 < 20
    assert _ends(int(pidfile.read_text())), "the run's grandchild survived the deadline"
    # the helper is unharmed
    assert target.run("rl_warm_target", ["exit", "0"], cwd=tmp_path, env=dict(os.environ), timeout=30).returncode == 0


def test_runs_in_one_fork_are_each_what_a_run_of_its_own_is(target: WarmHelper, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    env = {**os.environ, "RL_WARM_TEST": "yes"}
    runs = [("rl_warm_target", ["exit", "7"], a, env), ("rl_warm_target", ["mess"], a, env),
            ("rl_warm_target", ["where"], b, {**env, "RL_WARM_TEST": "other"}), ("rl_warm_target", ["raise"], b, env),
            ("rl_warm_target", ["where"], a, env)]
    together = target.run_many(runs, timeout=60)
    alone = [target.run(m, args, cwd=cwd, env=e, timeout=30) for m, args, cwd, e in runs]
    assert [(r.returncode, r.stdout, r.stderr, r.timed_out) for r in together] == \
        [(r.returncode, r.stdout, r.stderr, r.timed_out) for r in alone]
    assert [r.returncode for r in together] == [7, 0, 0, 1, 0]
    # after a run that closed its stdout, moved, raised the recursion limit and set an alarm, the next one
    # starts as a run of its own does: its own stdout, cwd and environment, the helper's limit, no alarm
    where = json.loads(together[2].stdout)
    assert where["cwd"] == str(b) and where["env"] == "other" and where["limit"] != 54321 and where["alarm"] == 0
    assert where["state"] == 1 and json.loads(together[4].stdout)["cwd"] == str(a)
    with pytest.raises(ValueError, match="runs in one request"):
        target.run_many(runs * 2, timeout=60)


def test_runs_in_one_fork_share_one_deadline_that_kills_them_all(target: WarmHelper, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    env = dict(os.environ)
    got = target.run_many([("rl_warm_target", ["exit", "0"], tmp_path, env),
                           ("rl_warm_target", ["hang", str(pidfile)], tmp_path, env)], timeout=0.6)
    # no run of a killed child has a status, not even the one that had ended: the caller runs them again apart
    assert all(r.timed_out and r.returncode is None for r in got)
    assert _ends(int(pidfile.read_text())), "the run's grandchild survived the deadline"
    assert target.run("rl_warm_target", ["exit", "0"], cwd=tmp_path, env=env, timeout=30).returncode == 0


def test_a_helper_dying_mid_run_is_reported_never_a_result(target: WarmHelper, tmp_path: Path) -> None:
    import threading

    out: dict = {}

    def call() -> None:
        try:
            out["r"] = target.run("rl_warm_target", ["hang", str(tmp_path / "p")], cwd=tmp_path, env=dict(os.environ),
                                  timeout=60)
        except HelperDead as exc:
            out["dead"] = str(exc)

    t = threading.Thread(target=call)
    t.start()
    for _ in range(200):
        if (tmp_path / "p").exists():
            break
        time.sleep(0.05)
    assert target.pid is not None
    os.kill(target.pid, signal.SIGKILL)
    t.join(30)
    assert "r" not in out and "died during a run" in out["dead"] and "-9" in out["dead"]
    # the orphaned run was killed with its group, not left running
    assert _ends(int((tmp_path / "p").read_text()))
    with pytest.raises(HelperDead, match="not running"):
        target.run("rl_warm_target", ["exit", "0"], cwd=tmp_path, env=dict(os.environ), timeout=30)


def test_a_missing_tool_fails_in_its_runs_as_python_dash_m_does(target: WarmHelper, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    h = WarmHelper(["rl_no_such_module_anywhere", "rl_warm_target"], warmup=False)
    h.start()  # the missing tool does not keep the helper (and the other tools) from starting
    try:
        r = h.run("rl_no_such_module_anywhere", [], cwd=tmp_path, env=dict(os.environ), timeout=30)
        cold = subprocess.run([sys.executable, "-m", "rl_no_such_module_anywhere"], check=False, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert r.returncode == cold.returncode == 1
        assert "No module named rl_no_such_module_anywhere" in r.stderr
        assert h.run("rl_warm_target", ["exit", "0"], cwd=tmp_path, env=dict(os.environ), timeout=30).returncode == 0
    finally:
        h.close()


def test_a_helper_that_cannot_start_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rl_warm_dies.py").write_text("import sys\nsys.stderr.write('cannot go on\\n')\nimport os\nos._exit(3)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    h = WarmHelper(["rl_warm_dies"], warmup=False)
    with pytest.raises(HelperDead, match="exited while starting: cannot go on"):
        h.start()


# ------------------------------------------------------------------------------ the process's helper
P = 'import os\n\n\ndef add(a, b):\n    """Add."""\n    return a + b\n'


@pytest.mark.parametrize("module", ["pylint", "bandit"])
def test_a_killed_helper_is_restarted_and_counted(module: str) -> None:
    stats: Counter = Counter()
    first = codequal.analyze([P], timeout=20, stats=stats)
    h = warm.helper(module)
    assert h.alive(), (dict(stats), first)
    os.kill(h.pid, signal.SIGKILL)  # type: ignore[arg-type]
    h._proc.wait()  # type: ignore[union-attr]
    stats.clear()
    again = codequal.analyze([P + "\n"], timeout=20, stats=stats)
    assert stats["tool.warm.restarts"] >= 1 and stats["tool.warm.failures"] == 0
    assert h.alive()
    assert [r.findings for r in first[0].values()] == [r.findings for r in again[0].values()]
    assert all(r.ok for r in again[0].values())


def test_pylint_has_a_helper_of_its_own_and_the_light_tools_share_one() -> None:
    # the light tools fork from a process without astroid's cache (a fork costs in proportion to its size)
    assert warm.helper("bandit") is warm.helper("rewardlang.runtime.tools.pyanalyzers")
    assert warm.helper("pylint") is not warm.helper("bandit")
    assert warm.helper("pylint").modules == ("pylint",)
    with pytest.raises(ValueError, match="not one of"):
        warm.helper("ruff")


def test_a_helper_that_cannot_run_is_an_infrastructure_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = WarmHelper(warm.TOOL_MODULES, start_timeout=0.0)  # it never answers in time
    monkeypatch.setattr(warm, "helper", lambda module="pylint": broken)
    ctx = Context(use_cache=False)
    r = quality_score.fn([P, "x = 1\n"], params=QualityParams(), ctx=ctx)
    broken.close()
    assert r.infra == [True, True] and all(math.isnan(v) for v in r.values)
    assert all("warm analyser helper did not start in time" in e for e in r.errors)
    assert ctx.stats["tool.warm.failures"] >= 3 and ctx.stats["quality.infra"] == 2


def test_an_override_or_warm_off_runs_a_fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [sys.executable, "-m", "pylint", "--version"]
    assert warm._warm_module(argv) == "pylint"
    assert warm._warm_module(["/usr/bin/pylint", "--version"]) is None
    monkeypatch.setenv("REWARDLANG_TOOL_WARM", "0")
    assert not warm.enabled()
    assert warm.run_warm(argv, timeout=30, cwd=".", env=dict(os.environ)) is None


def test_no_run_sees_another_runs_files() -> None:
    # B imports the module A was linted as; A's tree must not be in the cache B's run starts from (cold: an
    # import-error, since A's file is not in B's batch)
    a = "def secret():\n    return 42\n"
    b = f"import {file_name_for(a)[:-3]}\n\nprint({file_name_for(a)[:-3]}.secret())\n"
    pylint.lint([a], enable=["E"], timeout=20)
    res = pylint.lint([b], enable=["E"], timeout=20)
    assert [f.name for f in res[0].findings] == ["import-error"]


# ------------------------------------------------------------------------------------ parity
def _corpus_codes(step: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.corpus import load_corpus
    finally:
        sys.path.remove(str(ROOT))
    rows = load_corpus()
    return sorted({r.candidate for r in rows} | {r.reference for r in rows})[::step]


def _parity(codes: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def both(flag: str) -> tuple:
        monkeypatch.setenv("REWARDLANG_TOOL_WARM", flag)
        stats: Counter = Counter()
        raw = codequal.analyze(codes, timeout=30, stats=stats)
        ew = pylint.lint(codes, enable=("E", "W"), timeout=30, stats=stats)
        scores = quality_score.fn(codes, params=QualityParams(), ctx=Context(use_cache=False))
        assert not any(k.endswith((".crashes", ".timeouts", ".bisections")) for k in stats), dict(stats)
        return raw, ew, scores

    cold, hot = both("0"), both("1")
    assert hot[0] == cold[0]          # every analyzer's raw result, findings and errors, per code
    assert hot[1] == cold[1]          # pylint with E and W (the `pylint` reward function's default)
    assert hot[2].values == cold[2].values and hot[2].errors == cold[2].errors and hot[2].infra == cold[2].infra
    assert sum(1 for r in cold[0] for x in r.values() if x.findings) > len(codes)  # there was something to find


@pytest.mark.slow
def test_parity_with_the_cold_path_on_humaneval(monkeypatch: pytest.MonkeyPatch) -> None:
    codes = _corpus_codes(8)  # 124 programs of every kind: references, broken, renamed, reordered, ...
    assert len(codes) > 100
    _parity(codes, monkeypatch)


@pytest.mark.slow
def test_parity_with_the_cold_path_on_the_whole_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _parity(_corpus_codes(1), monkeypatch)


def test_docstring_examples() -> None:
    result = doctest.testmod(warm, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# ------------------------------------------------------------------------ pylint configured once in the helper
def _forked_child(data: dict, tmp_path: Path) -> tuple[int, str, str]:
    """Run ``warm_helper._child(data)`` in a forked child as the helper does: (status, stdout, stderr)."""
    out, err = tmp_path / "child.out", tmp_path / "child.err"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            fo, fe = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            # the helper's streams are the interpreter's own, on descriptors 1 and 2 (not pytest's capture)
            sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)  # noqa: SIM115
            code = warm_helper._child(data)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code & 0xFF)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.read_text(), err.read_text()


def _pylint_data(tmp_path: Path, files: dict[str, str], enable: list[str], rc: str = "") -> dict:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    tool = pylint.PylintTool(enable)
    tool.prepare(work)
    (work / "empty-pylintrc").write_text(rc)
    for name, text in files.items():
        (work / name).write_text(text)
    argv = tool.argv(sorted(files), work)
    assert warm._warm_module(argv) == "pylint"
    return {"module": "pylint", "args": argv[3:], "cwd": str(work), "env": tool.env(work)}


CASES = {
    "clean": {"m_clean.py": '"""Doc."""\n\n\ndef add(a, b):\n    """Add."""\n    return a + b\n'},
    "findings": {"m_a.py": "import os\nimport sys\n\n\ndef f(x, y):\n    z = 1\n    return undefined_name\n",
                 "m_b.py": "from typing import List\n\n\ndef g(xs: List[int]) -> int:\n    return len(xs) + 'a'\n"},
    "syntax error": {"m_bad.py": "def f(:\n    pass\n"},
    "a file that is not there": {},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_of_the_configured_linter_is_what_python_dash_m_pylint_prints(case: str, tmp_path: Path) -> None:
    files = CASES[case] or {}
    data = _pylint_data(tmp_path, files or {"m_placeholder.py": "x = 1\n"}, ["E", "W", "unused-import"])
    if not files:  # the command line names a file the directory does not hold
        (Path(data["cwd"]) / "m_placeholder.py").unlink()
    warm_helper._prepare_pylint(data)
    assert data.get("prepared") is not None  # this run goes through the configured linter
    hot = _forked_child(data, tmp_path)
    cold = subprocess.run([sys.executable, "-m", "pylint", *data["args"]], cwd=data["cwd"], env=data["env"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert hot == (cold.returncode, cold.stdout, cold.stderr)
    report = json.loads(hot[1])
    assert (len(report["messages"]) > 0) == (case != "clean")


def test_a_run_that_the_configured_linter_does_not_fit_runs_as_python_dash_m(tmp_path: Path) -> None:
    files = {"m_a.py": "import os\n"}
    # a configuration file with something in it: read by the run itself
    data = _pylint_data(tmp_path, files, ["unused-import"], rc="[MAIN]\nignore-patterns=^m_a\\.py$\n")
    warm_helper._prepare_pylint(data)
    assert "prepared" not in data
    assert json.loads(_forked_child(data, tmp_path)[1])["messages"] == []  # the file's setting applied (ignored)
    # an option the configured linter is not kept for
    data = _pylint_data(tmp_path, files, ["unused-import"])
    data["args"].insert(1, "--load-plugins=pylint.extensions.docparams")
    warm_helper._prepare_pylint(data)
    assert "prepared" not in data
    # a set-up that emits a message (an unknown message name) is not kept: `python -m pylint` says it each time
    data = _pylint_data(tmp_path, files, ["unused-import", "no-such-message"])
    warm_helper._prepare_pylint(data)
    assert "prepared" not in data
    hot = _forked_child(data, tmp_path)
    cold = subprocess.run([sys.executable, "-m", "pylint", *data["args"]], cwd=data["cwd"], env=data["env"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert hot == (cold.returncode, cold.stdout, cold.stderr)
    assert "no-such-message" in hot[1]


def test_each_run_of_a_configured_linter_starts_from_the_same_state(tmp_path: Path) -> None:
    # the first run's findings (and the files it linted) are not in the second's report
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _pylint_data(tmp_path / "a", {"m_a.py": "import os\n"}, ["unused-import"])
    b = _pylint_data(tmp_path / "b", {"m_b.py": "import sys\n"}, ["unused-import"])
    warm_helper._prepare_pylint(a)
    warm_helper._prepare_pylint(b)
    assert a["prepared"] == b["prepared"]  # one linter for both: same options
    ra, rb = _forked_child(a, tmp_path), _forked_child(b, tmp_path)
    assert [m["path"] for m in json.loads(ra[1])["messages"]] == ["m_a.py"]
    assert [m["path"] for m in json.loads(rb[1])["messages"]] == ["m_b.py"]


# ------------------------------------------------------------------------------- the reused worker
def _pid(h: WarmHelper, cwd: Path) -> int:
    """The process that serves ``h``'s next run."""
    r = h.run("rl_warm_target", ["pid"], cwd=cwd, env=dict(os.environ), timeout=30)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def test_a_worker_serves_runs_one_after_the_other_each_as_a_fork_of_its_own(reused: WarmHelper,
                                                                           target: WarmHelper,
                                                                           tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    env = {**os.environ, "RL_WARM_TEST": "yes"}
    # what a run leaves behind (limit, path, alarm and handler, cwd, a closed stdout; a rebound os.getcwd and
    # json.dumps), then a run in another directory with another environment: as a fresh fork of the helper sees it
    runs = [("rl_warm_target", ["exit", "7"], a, env), ("rl_warm_target", ["mess"], a, env),
            ("rl_warm_target", ["rebind"], a, env), ("rl_warm_target", ["where"], b, {**env, "RL_WARM_TEST": "other"}),
            ("rl_warm_target", ["raise"], b, env), ("rl_warm_target", ["message"], a, env),
            ("rl_warm_target", ["where"], a, env)]
    first = _pid(reused, a)
    got = [reused.run(m, args, cwd=cwd, env=e, timeout=30) for m, args, cwd, e in runs]
    assert _pid(reused, a) == first, "the runs were not served by one worker"
    alone = [target.run(m, args, cwd=cwd, env=e, timeout=30) for m, args, cwd, e in runs]
    assert _pid(target, a) != _pid(target, a)
    where = [json.loads(got[k].stdout) for k in (3, 6)]
    assert where == [json.loads(alone[k].stdout) for k in (3, 6)]
    assert where[0]["getcwd"] == "posix" and where[0]["cwd"] == str(b) and where[0]["env"] == "other"
    assert [(r.returncode, r.stdout, r.stderr) for r in got] == [(r.returncode, r.stdout, r.stderr) for r in alone]


def test_a_run_killed_in_the_worker_fails_only_itself(reused: WarmHelper, tmp_path: Path) -> None:
    before = _pid(reused, tmp_path)
    pidfile = tmp_path / "grandchild.pid"
    r = reused.run("rl_warm_target", ["hang", str(pidfile)], cwd=tmp_path, env=dict(os.environ), timeout=0.6)
    assert r.timed_out and r.returncode == -signal.SIGKILL
    assert _ends(before) and _ends(int(pidfile.read_text())), "the worker or the run's grandchild survived"
    assert _pid(reused, tmp_path) != before


@pytest.mark.parametrize("what", ["thread", "raise-many"])
def test_a_worker_that_cannot_be_put_back_is_replaced(reused: WarmHelper, tmp_path: Path, what: str) -> None:
    first = _pid(reused, tmp_path)
    env = dict(os.environ)
    if what == "thread":
        assert reused.run("rl_warm_target", [what], cwd=tmp_path, env=env, timeout=30).returncode == 0
    else:  # a request of several runs whose child did not end cleanly: no run has a status; the worker ends
        got = reused.run_many([("rl_warm_target", ["exit", "0"], tmp_path, env),
                               ("rl_warm_target", ["segv"], tmp_path, env)], timeout=30)
        assert all(r.returncode is None for r in got)
    assert _ends(first)
    assert _pid(reused, tmp_path) != first


def test_a_lowered_resource_limit_never_reaches_the_next_run(reused: WarmHelper, tmp_path: Path) -> None:
    import resource

    env = dict(os.environ)
    assert reused.run("rl_warm_target", ["rlimit"], cwd=tmp_path, env=env, timeout=30).returncode == 0
    r = reused.run("rl_warm_target", ["nofile"], cwd=tmp_path, env=env, timeout=30)
    # put back, or (a hard limit this process may not raise again) the worker ended and a fresh fork ran it
    assert json.loads(r.stdout) == list(resource.getrlimit(resource.RLIMIT_NOFILE))


def test_a_workers_earlier_runs_cpu_is_not_the_next_runs(reused: WarmHelper, tmp_path: Path) -> None:
    env = dict(os.environ)
    assert reused.run("rl_warm_target", ["spin", "0.6"], cwd=tmp_path, env=env, timeout=30).returncode == 0
    # at its deadline the run has used none of its own CPU: held back by the machine (starved), never timed
    # out on the 0.6 s its worker used for the run before
    r = reused.run("rl_warm_target", ["sleep", "60"], cwd=tmp_path, env=env, timeout=0.5)
    assert r.starved


def test_runs_of_the_real_tools_in_one_worker_are_what_fresh_forks_give(tmp_path: Path) -> None:
    # a run without --respect-noqa replaces vulture's parser of suppression comments in its process; a later run
    # in the same worker that respects them must find vulture's own (a fresh fork does), and bandit logs through
    # handlers of its own each run
    from rewardlang.runtime.tools import pyanalyzers

    code = "import os  # noqa\nimport sys\n\n\ndef f(unused):  # noqa\n    return 1\n"
    (tmp_path / "m.py").write_text(code)
    calls = [("rewardlang.runtime.tools.pyanalyzers", ["--analyzers", ",".join(pyanalyzers.NAMES), "m.py"]),
             ("rewardlang.runtime.tools.pyanalyzers", ["--analyzers", "vulture", "--respect-noqa", "m.py"]),
             ("bandit", ["-f", "json", "-q", "--ignore-nosec", "--", "m.py"]),
             ("bandit", ["-f", "json", "-q", "--ignore-nosec", "--", "m.py"]),
             ("rewardlang.runtime.tools.pyanalyzers", ["--analyzers", "vulture", "--respect-noqa", "m.py"])]
    out = {}
    for reuse in ([], ["bandit", "rewardlang.runtime.tools.pyanalyzers"]):
        h = WarmHelper(["bandit", "rewardlang.runtime.tools.pyanalyzers"], warmup=False, reuse=reuse)
        h.start()
        try:
            out[bool(reuse)] = [h.run(m, a, cwd=tmp_path, env=dict(os.environ), timeout=60) for m, a in calls]
            kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(h.pid)], capture_output=True, text=True,
                                  check=False).stdout.split()
        finally:
            h.close()
        assert len(kids) == (1 if reuse else 0)  # the worker, alive between requests; no fork left otherwise
    import re

    def seen(runs: list) -> list:  # bandit's report says when it was made
        return [(r.returncode, re.sub(r'"generated_at": "[^"]*"', "", r.stdout)) for r in runs]

    fresh, reused_ = out[False], out[True]
    assert seen(reused_) == seen(fresh)
    assert '"name": "os"' in reused_[0].stdout and '"findings": []' in reused_[1].stdout


def test_a_request_that_finds_the_worker_busy_gets_a_fork_of_its_own(reused: WarmHelper, tmp_path: Path) -> None:
    import threading

    worker = _pid(reused, tmp_path)
    mark = tmp_path / "busy"
    out: dict = {}
    release = tmp_path / "release"
    t = threading.Thread(target=lambda: out.setdefault("r", reused.run(
        "rl_warm_target", ["block", str(mark), str(release)], cwd=tmp_path, env=dict(os.environ), timeout=600)))
    t.start()
    for _ in range(6000):
        if mark.exists():
            break
        time.sleep(0.05)
    assert int(mark.read_text()) == worker
    try:
        # the worker stays busy until released, however slow the machine: no timing in this test
        assert _pid(reused, tmp_path) != worker  # served by a fork while the worker is busy
    finally:
        release.write_text("")
    t.join(600)
    assert out["r"].returncode == 0 and _pid(reused, tmp_path) == worker  # and the worker again once it is free


#: faults put in the helper before it starts: its worker cannot be forked (EAGAIN), or it is forked and dies at
#: once, so that the request meant for it meets a socket whose other end is gone
_WORKER_FAULTS = {
    "fork-fails": "def spawn(*a):\n    raise OSError(11, 'Resource temporarily unavailable')\n",
    "socket-gone": textwrap.dedent("""\
        real = w._spawn_worker
        def spawn(*a):
            pid, sock = real(*a)
            os.kill(pid, signal.SIGKILL)
            while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                time.sleep(0.01)
            return pid, sock
        """),
}


@pytest.mark.parametrize("fault", sorted(_WORKER_FAULTS))
def test_a_request_the_worker_cannot_take_is_run_by_a_fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           fault: str) -> None:
    # the helper once ignored that its worker could not take a request and left it unanswered until its
    # caller's deadline: an infrastructure failure that reads as a tool timeout. Each request must be answered,
    # by a fork of its own, as it would be without a worker
    _target_path(tmp_path, monkeypatch)
    entry = ("import os, signal, time\nimport rewardlang.runtime.tools.warm_helper as w\n"
             + _WORKER_FAULTS[fault] + "w._spawn_worker = spawn\nw.main()")

    class Faulty(WarmHelper):
        pass

    Faulty.entry = "exec(" + repr(entry) + ")"
    h = Faulty(["rl_warm_target"], warmup=False, reuse=["rl_warm_target"])
    h.start()
    try:
        env = dict(os.environ)
        got = [h.run("rl_warm_target", ["pid"], cwd=tmp_path, env=env, timeout=60) for _ in range(3)]
        assert [(r.returncode, r.timed_out, r.stderr) for r in got] == [(0, False, "")] * 3
        assert len({int(r.stdout) for r in got}) == 3  # a fork each
        r = h.run("rl_warm_target", ["exit", "7"], cwd=tmp_path, env=env, timeout=60)
        assert (r.returncode, r.timed_out) == (7, False)
    finally:
        h.close()


def test_a_configured_linters_walker_adds_what_pylints_own_adds(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # the helper computes once what pylint's walker adds for each checker of a configured linter; every run's
    # walker must hold the same tables as pylint's own would build, in any order of checkers, and build its own
    # when the linter's messages changed since
    from pylint.lint import pylinter
    from pylint.utils.ast_walker import ASTWalker

    monkeypatch.setattr(pylinter, "ASTWalker", ASTWalker)
    monkeypatch.setattr(warm_helper, "_WALKERS", {})
    tool = pylint.PylintTool(pylint.DEFAULT_ENABLE)
    split = warm_helper._pylint_split(tool.argv(["m.py"], tmp_path)[3:])
    assert split is not None
    linter = warm_helper._configure_pylint(split[1], {k: None for k in warm_helper._PYLINT_ENV})
    assert linter is not None and pylinter.ASTWalker is not ASTWalker
    checkers = linter.prepare_checkers()
    assert len(checkers) > 5

    def tables(cls: type, order: list) -> tuple:
        w = cls(linter)
        for c in order:
            w.add_checker(c)
        return ({e: list(m) for e, m in w.visit_events.items() if m}, {e: list(m) for e, m in w.leave_events.items() if m},
                getattr(w, "_adds", None) is not None)

    for order in (checkers, checkers[::-1], checkers[2:5]):
        ours, theirs = tables(pylinter.ASTWalker, order), tables(ASTWalker, order)
        assert ours[:2] == theirs[:2] and ours[2]
    assert sum(map(len, tables(ASTWalker, checkers)[0].values())) > 50
    linter.disable("unused-import")
    ours, theirs = tables(pylinter.ASTWalker, checkers), tables(ASTWalker, checkers)
    assert ours[:2] == theirs[:2] and not ours[2]


# ------------------------------------------------------------------- pylint's runs in the reused worker
def _worker_of(h: WarmHelper) -> int:
    """The helper's one child between requests: its worker."""
    kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(h.pid)], capture_output=True, text=True,
                          check=False).stdout.split()
    assert len(kids) == 1, kids
    return int(kids[0])


def _lint_in(h: WarmHelper, tmp_path: Path, name: str, code: str, enable: list[str]) -> tuple[int | None, str, str]:
    (tmp_path / name).mkdir()
    data = _pylint_data(tmp_path / name, {f"m_{name}.py": code}, enable)
    r = h.run("pylint", data["args"], cwd=data["cwd"], env=data["env"], timeout=120)
    # the report names the run's own file and directory; with them out, runs of the same code compare
    return r.returncode, r.stdout.replace(str(tmp_path / name), "DIR").replace(f"m_{name}", "m_X"), r.stderr


@pytest.fixture(scope="module")
def pylint_worker() -> WarmHelper:
    """A pylint helper with the warm-up (the library trees every run shares) whose worker serves its runs."""
    h = WarmHelper(["pylint"], reuse=["pylint"])
    h.start()
    yield h
    h.close()


# Each assigns to an attribute of a library object whose tree the warm-up built (`collections`, `os`): astroid
# adds the assignment to that tree, where a later run's inference would find it. The victim reads the attribute,
# which the library does not have: `no-member` (E1101), unless a shared tree says otherwise.
HOSTILE = {
    "class attribute": ("import collections\n\ncollections.Counter.zz_planted = 1\n",
                        "import collections\n\nprint(collections.Counter().zz_planted)\n"),
    "instance attribute": ("import collections\n\nD = collections.OrderedDict()\nD.zz_planted = 1\n",
                           "import collections\n\nprint(collections.OrderedDict().zz_planted)\n"),
    "module attribute": ("import os\n\nos.zz_planted = 1\n", "import os\n\nprint(os.zz_planted)\n"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_pylint_run_that_changes_a_shared_library_tree_ends_the_worker(pylint_worker: WarmHelper, tmp_path: Path,
                                                                        case: str) -> None:
    hostile, victim = HOSTILE[case]
    enable = ["E", "W"]
    alone = _lint_in(pylint_worker, tmp_path, "alone", victim, enable)
    assert alone[0] is not None and "no-member" in alone[1]
    worker = _worker_of(pylint_worker)
    assert _lint_in(pylint_worker, tmp_path, "benign", "X = 1\n", enable)[0] == 0
    assert _worker_of(pylint_worker) == worker  # a run that changes nothing shared: the same worker serves on
    _lint_in(pylint_worker, tmp_path, "hostile", hostile, enable)
    # the worker that served the hostile run ended after it; the victim's run is what it is on its own
    assert _lint_in(pylint_worker, tmp_path, "victim", victim, enable) == alone
    assert _worker_of(pylint_worker) != worker


def test_pylint_runs_in_one_worker_are_what_fresh_forks_give(pylint_worker: WarmHelper, tmp_path: Path) -> None:
    # programs of every kind from the HumanEval corpus, one run each, as a server's one-row batches lint them:
    # each report (messages, statistics, status) is what a fresh fork of the helper gives for it
    codes = _corpus_codes(24)
    assert len(codes) > 40
    enables = (list(codequal.KEPT_PYLINT), ["E", "W"])
    fork = WarmHelper(["pylint"], reuse=[])
    fork.start()
    try:
        for k, code in enumerate(codes):
            enable = enables[k % 2]
            hot = _lint_in(pylint_worker, tmp_path, f"w{k}", code, enable)
            cold = _lint_in(fork, tmp_path, f"f{k}", code, enable)
            assert hot == cold, code
            assert hot[0] is not None and '"statistics"' in hot[1]
    finally:
        fork.close()
