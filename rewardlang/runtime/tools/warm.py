"""Warm analysers: long-lived helper processes that have imported pylint, bandit and the in-Python analysers
(radon, vulture, the AST checks) once, and fork a fresh child for every tool run (or serve it in a reused
worker: below). pylint has a helper of its own (astroid's warm cache makes it ~90 MB, and a fork costs in
proportion); bandit and the analysers share a small one.

Why: a small batch of ``quality_score`` used to pay ~0.45 s of CPU per call however few rows it had, because
every call started three interpreters that imported the tools again, and pylint's astroid rebuilt the trees of
the standard-library modules the code imports (``typing`` alone is most of a one-file pylint run). The helper
pays that once: at start it imports the tools and lints a warm-up file that imports the modules code commonly
uses, so astroid's module cache holds their trees; each run then costs a ``fork`` and the analysis itself.
pylint's own set-up (registering ~45 checkers, building its argument parser, parsing the options: ~2/3 of a
small run's CPU after the warm-up) is done once per option set too: the helper keeps a linter that pylint's
``Run`` configured for those options (an empty configuration file only), and a run only checks its files with it
(:func:`_run_prepared_pylint`: what ``Run`` does after configuring, with the run's own directory and stdout).
What pylint's walker adds for each of that linter's checkers (the visit and leave methods whose messages are on)
is computed once as well (``warm_helper._walker_template``: ~6 ms of a one-file run's ~17 ms of CPU).

Each run is what ``python -m <tool> <args>`` in the run's directory would be, in a forked child of the helper:
its own session (the caller kills its whole process group on a deadline, pylint's ``--jobs`` workers
included), ``cwd``, environment, ``sys.argv`` and ``sys.path[0]`` of that command, stdout and stderr into files
the caller reads, the exit status of ``python -m`` (``SystemExit`` code, 1 on an uncaught exception, -N when
killed by signal N). The child exits after the run (but see the worker below), so nothing a run leaves in a
tool's global state (astroid's cache of the batch's own files, pylint's registries) reaches another run; the helper itself never analyses
the policy's code and never runs it (neither do the tools: they parse it). A run that shares astroid's cache of
library modules sees what a file late in a many-file pylint run sees today; the parity of every raw result with
the cold path is asserted on the HumanEval corpus (``tests/runtime/tools/test_tool_warm.py``).

Several runs can share one fork (:meth:`WarmHelper.run_many`, :func:`run_warm_many`): the child runs them one
after the other, each with its own stdout, stderr, exit status, ``cwd``, environment and ``sys.argv``, and puts
back before each what a run can leave in the process that a later one would read (the module path, the
recursion limit, the alarm and its handler, fresh standard streams on the run's files). Issue 38: in a batch of
a few rows, the fork and exit of the light tools' helper, the child's set-up and the caller's bookkeeping cost
more than bandit's analysis itself, twice (bandit and the analysers), so a small batch runs them in one fork
(:func:`~rewardlang.runtime.tools.runner.run_together`); a child that does not end cleanly gives no run a result,
and the caller runs them apart.

The light tools (bandit and the in-Python analysers: they only parse the code they analyse, and keep nothing
of it from one run to the next) are served by a **worker**: a child of their helper forked once, which runs
one request after another (``warm_helper._WorkerSlot``; issue 38: the fork of the helper, its copy-on-write
faults and its exit cost ~10 ms of CPU per request, as much as bandit's and the analysers' own work on a small
batch). After each request it puts back what a run leaves in the process (``warm_helper._State``: the modules
imported, the globals of the tools' and the standard library's modules they touch -- rebinding
``vulture.noqa.parse_noqa`` is what a run without ``--respect-noqa`` does --, loggers, warning filters,
signal handlers and timers, the recursion limit, the module path, cwd, environment, umask, descriptors, the
finders of the runs' directories); a request that did not end cleanly, or one that left a thread, a trace
function or a process behind, ends the worker, and so does its caller's kill at the deadline, which fails only
that request (the next one gets a fresh fork). A request that comes while the worker is busy gets a fork of its
own, as every run did before. To its caller a worker's run is a forked child's: the status pipe gives its pid
(with the CPU it had used before, which the deadline does not count: :class:`~rewardlang.runtime.tools.command.
Bound`) and its exit status. pylint's runs of a linter configured in the helper (the common case: one run a
request) have a worker of their own in pylint's helper, which puts back after each run what pylint and astroid
keep between runs (``warm_helper._PylintGuard``: the modules a run added to astroid's cache, the caches keyed by
nodes, the linter's, reporter's and checkers' state). What it cannot put back ends the worker after the run:
astroid's cache of library trees takes in what a run's code assigns to them (``collections.Counter.x = 1``
gives its tree of ``Counter`` a local ``x``, and a later run's ``Counter().x`` would no longer be a
``no-member``), so a run that changed a shared tree, imported a module for the first time, left an inference
unfinished or ended with a fatal status is the worker's last (issue 38: a one-row pylint run cost 13.8 ms of CPU
in a fork, 5.1 ms in the worker). ``REWARDLANG_TOOL_REUSE=0`` (read
when a helper starts) gives every request a fork of its own.

Failures are never silent: a helper that dies (or cannot start) is restarted once for the run and counted
(``tool.warm.restarts``); when that fails too, the run comes back as ``missing`` with the reason, which the
batch runner turns into an infrastructure failure of the tool (masked and counted, never a score). A run's own
crash or timeout is reported exactly as a subprocess's is, so per-sample isolation (probe, bisection) works
unchanged.

Only the default commands run warm (``[sys.executable, "-m", <tool>]``); a ``REWARDLANG_TOOL_<NAME>``
override runs as a subprocess, as before. ``REWARDLANG_TOOL_WARM=0`` turns the helper off (every run a fresh
interpreter).

    >>> import sys, tempfile
    >>> from rewardlang.runtime.tools.warm import WarmHelper
    >>> h = WarmHelper(["rewardlang.runtime.tools.pyanalyzers"], warmup=False)
    >>> h.start()
    >>> d = tempfile.mkdtemp()
    >>> _ = open(f"{d}/m.py", "w").write("import os\\n")
    >>> r = h.run("rewardlang.runtime.tools.pyanalyzers", ["--analyzers", "vulture", "m.py"], cwd=d,
    ...           env={}, timeout=30)
    >>> r.returncode, '"name": "os"' in r.stdout, r.stdout.splitlines()[-1]
    (0, True, '{"done": true}')
    >>> h.close()
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlang.runtime.tools.command import Bound, Completed, tool_environ

__all__ = ["MAX_RUNS", "TOOL_MODULES", "HelperDead", "WarmHelper", "enabled", "helper", "run_warm", "run_warm_many"]

#: the modules the process's helper runs as ``python -m``: the tools of the quality analysis and of ``pylint``
TOOL_MODULES: tuple[str, ...] = ("pylint", "bandit", "rewardlang.runtime.tools.pyanalyzers")
_ENV_OFF = "REWARDLANG_TOOL_WARM"
_HEADER = struct.Struct("!I")
_MAX_REQUEST = 64 << 20
#: runs one request may hold (:meth:`WarmHelper.run_many`), and so the descriptors it may carry
MAX_RUNS = 8
_MAX_FDS = 2 * MAX_RUNS + 2


class HelperDead(RuntimeError):
    """The helper process is gone (or never started): an infrastructure failure, never a tool result."""


def enabled() -> bool:
    """Whether tool runs go to the warm helper (``REWARDLANG_TOOL_WARM=0`` turns it off; POSIX ``fork`` only)."""
    return os.environ.get(_ENV_OFF, "1").strip().lower() not in ("0", "no", "false", "off") and hasattr(os, "fork")


def _shm_dir() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _last_line(data: bytes) -> str:
    """The last line of a stderr (an interpreter's traceback ends with the exception)."""
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:300] if lines else ""


class WarmHelper:
    """A helper process for ``modules``; :meth:`run` one ``python -m module args`` in a forked child.

    Thread-safe: runs from several threads go to the helper at the same time (each its own child).
    """

    #: what the helper process runs after the package is on its path (a test puts a fault in it here)
    entry = "from rewardlang.runtime.tools.warm_helper import main; main()"

    def __init__(self, modules: Sequence[str] = TOOL_MODULES, *, warmup: bool = True,
                 start_timeout: float = 120.0, reuse: Sequence[str] | None = None) -> None:
        self.modules = tuple(modules)
        #: modules whose runs the helper's worker serves one after the other in one process (None: the
        #: helper's own choice, ``warm_helper.REUSABLE``); see ``warm_helper._WorkerSlot``
        self.reuse = None if reuse is None else tuple(reuse)
        self.warmup = warmup
        self.start_timeout = start_timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen | None = None
        #: PYTHONPATH the helper started with: a run asking for another one is not this helper's to run
        self.pythonpath = os.environ.get("PYTHONPATH", "")
        self.starts = 0
        self._err: Any = None
        self._failed: tuple[float, str] | None = None
        #: seconds after a failed start during which runs fail at once instead of starting it again
        self.retry_after_s = 10.0

    # ------------------------------------------------------------------------------------ lifecycle
    @property
    def pid(self) -> int | None:
        """The helper process's id (None before the first start)."""
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the helper (a fresh one if one was running) and wait until it has imported and warmed up."""
        with self._lock:
            self._start()

    def ensure(self) -> tuple[int, bool]:
        """Start the helper unless it runs: (its generation, whether this call started it). Thread-safe: of
        several threads finding it dead, one starts it. A start that failed less than :attr:`retry_after_s` ago
        is not retried (every run would wait for it): its error is raised again."""
        with self._lock:
            if self._sock is not None and self.alive():
                return self.starts, False
            if self._failed is not None and time.monotonic() - self._failed[0] < self.retry_after_s:
                raise HelperDead(self._failed[1])
            try:
                self._start()
            except HelperDead as exc:
                self._failed = (time.monotonic(), str(exc))
                raise
            self._failed = None
            return self.starts, True

    def discard(self, generation: int) -> None:
        """Stop the helper if it is still the one of ``generation`` (a run found it dead or broken)."""
        with self._lock:
            if self.starts == generation:
                self._stop()

    def _start(self) -> None:
        self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        err = tempfile.TemporaryFile(dir=_shm_dir())  # noqa: SIM115 - kept open: the helper's stderr
        # Its own directory as cwd, so nothing in the caller's cwd shadows a tool's modules; the package
        # this module is part of first on its path, as in the caller.
        root = str(Path(__file__).resolve().parents[3])
        code = f"import sys; sys.path.insert(0, {root!r}); {self.entry}"
        argv = [sys.executable, "-c", code, str(theirs.fileno()), json.dumps(self.modules),
                "1" if self.warmup else "0", json.dumps(self.reuse)]
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                          pass_fds=[theirs.fileno()], cwd=tempfile.gettempdir(),
                                          start_new_session=True, env=tool_environ())
        except OSError as exc:
            ours.close()
            raise HelperDead(f"the warm analyser helper could not be started: {exc}") from exc
        finally:
            theirs.close()
        ready = select.select([ours], [], [], self.start_timeout)[0]
        line = ours.recv(64) if ready else b""
        if line != b"ready\n":
            self._proc.kill()
            self._proc.wait()
            err.seek(0)
            tail = _last_line(err.read())
            err.close()
            ours.close()
            self._proc = None
            why = "did not start in time" if not ready else f"exited while starting: {tail or 'no message'}"
            raise HelperDead(f"the warm analyser helper {why}")
        self._err = err
        self._sock = ours
        self.starts += 1

    def _why(self) -> str:
        """How the helper ended, for the error of the runs it failed: exit status and its stderr's end."""
        rc = self._proc.poll() if self._proc is not None else None
        tail = ""
        if self._err is not None:
            try:
                self._err.seek(0)
                tail = _last_line(self._err.read())
            except (OSError, ValueError):
                pass
        return f"exit status {rc}" + (f": {tail}" if tail else "")

    def _stop(self) -> None:
        if self._err is not None:
            self._err.close()
            self._err = None
        if self._sock is not None:
            self._sock.close()  # the helper exits on EOF
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def close(self) -> None:
        """Stop the helper (runs in flight finish on their own; their callers see the helper gone)."""
        with self._lock:
            self._stop()

    # ------------------------------------------------------------------------------------------ runs
    def _send(self, payload: bytes, fds: list[int]) -> None:
        with self._lock:
            if self._sock is None or not self.alive():
                raise HelperDead("the warm analyser helper is not running")
            try:
                socket.send_fds(self._sock, [_HEADER.pack(len(payload))], fds)
                self._sock.sendall(payload)
            except OSError as exc:
                raise HelperDead(f"the warm analyser helper is gone ({exc})") from exc

    def run(self, module: str, args: Sequence[str], *, cwd: str | Path, env: dict[str, str],
            timeout: float) -> Completed:
        """``python -m module *args`` in ``cwd`` with ``env``, killed (its whole group) after ``timeout`` s.

        Raises :class:`HelperDead` when the helper is not running or died before the run ended.
        """
        if module not in self.modules:
            raise ValueError(f"{module!r} is not one of the helper's modules {self.modules}")
        t0 = time.monotonic()
        argv = [sys.executable, "-m", module, *args]
        payload = json.dumps({"module": module, "args": list(args), "cwd": str(cwd), "env": env}).encode()
        shm = _shm_dir()
        with tempfile.TemporaryFile(dir=shm) as out, tempfile.TemporaryFile(dir=shm) as err:
            code, timed_out, starved = self._exchange(payload, [out.fileno(), err.fileno()], t0, max(timeout, 0.01))
            out.seek(0)
            err.seek(0)
            return Completed(argv, code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                             timed_out=timed_out, elapsed=time.monotonic() - t0, starved=starved)

    def _exchange(self, payload: bytes, fds: list[int], t0: float, timeout: float) -> tuple[int | None, bool, bool]:
        """Send one request with its output descriptors (and a pipe's write end, whose closing says the child
        ended), wait for its end (:func:`~rewardlang.runtime.tools.command.wait_bounded`: ``timeout`` seconds of
        the run's CPU from ``t0``): ``(exit status, timed out, starved)``. Raises :class:`HelperDead` when the
        helper died before its child ended (the child, if any, is killed: nobody is left to report it)."""
        r, w = os.pipe()
        try:
            try:
                self._send(payload, [*fds, w])
            finally:
                os.close(w)
            pid, code, timed_out, starved = self._wait(r, t0, timeout)
        finally:
            os.close(r)
        if code is None and not timed_out:
            if pid is not None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)  # let its exit status arrive
            raise HelperDead(f"the warm analyser helper died during a run ({self._why()})")
        return code, timed_out, starved

    def run_many(self, runs: Sequence[tuple[str, Sequence[str], str | Path, dict[str, str]]], *,
                 timeout: float) -> list[Completed]:
        """``(module, args, cwd, env)`` runs, one after the other in one forked child (one fork and one exit
        instead of one per run; each run sees the process as a run of its own would, see
        ``warm_helper._children``), the whole killed after ``timeout`` s. One :class:`Completed` per run,
        each with its own stdout, stderr and exit status; when the child did not end on its own (killed at the
        deadline, or by anything else), every run is ``timed_out`` or has no status (``returncode`` None).

        Raises :class:`HelperDead` when the helper is not running or died before the child ended.
        """
        if not 1 <= len(runs) <= MAX_RUNS:
            raise ValueError(f"1 to {MAX_RUNS} runs in one request, not {len(runs)}")
        for module, *_ in runs:
            if module not in self.modules:
                raise ValueError(f"{module!r} is not one of the helper's modules {self.modules}")
        t0 = time.monotonic()
        payload = json.dumps({"runs": [{"module": m, "args": list(a), "cwd": str(c), "env": e}
                                       for m, a, c, e in runs]}).encode()
        shm = _shm_dir()
        with contextlib.ExitStack() as files:
            outs = [(files.enter_context(tempfile.TemporaryFile(dir=shm)),
                     files.enter_context(tempfile.TemporaryFile(dir=shm))) for _ in runs]
            codes_f = files.enter_context(tempfile.TemporaryFile(dir=shm))
            code, timed_out, starved = self._exchange(payload, [f.fileno() for pair in outs for f in pair]
                                                      + [codes_f.fileno()], t0, max(timeout, 0.01))
            codes_f.seek(0)
            lines = codes_f.read().decode("ascii", "replace").split()
            each: list[int | None] = [int(x) for x in lines] if code == 0 and len(lines) == len(runs) else \
                [None] * len(runs)
            elapsed = time.monotonic() - t0
            out = []
            for (module, args, _, _), (o, e), rc in zip(runs, outs, each):
                o.seek(0)
                e.seek(0)
                out.append(Completed([sys.executable, "-m", module, *args], rc, o.read().decode("utf-8", "replace"),
                                     e.read().decode("utf-8", "replace"), timed_out=timed_out, elapsed=elapsed,
                                     starved=starved))
            return out

    @staticmethod
    def _wait(r: int, t0: float, timeout: float) -> tuple[int | None, int | None, bool, bool]:
        """Read ``pid`` (with, from a reused worker, the CPU seconds it had used before the run) then the
        exit status from the run's status pipe; kill the group when :class:`~rewardlang.runtime.tools.command.Bound`
        says so: ``(pid, status, timed out, starved)``."""
        buf = b""
        pid: int | None = None
        bound = Bound(t0, timeout)
        while True:
            lines = buf.split(b"\n")
            if pid is None and len(lines) > 1:
                first = lines[0].split()
                pid = int(first[0])
                bound.base = float(first[1]) if len(first) > 1 else 0.0
            if len(lines) > 2:
                return pid, int(lines[1]), bound.timed_out, bound.starved
            left = bound.left(pid)
            if left <= 0:
                if bound.timed_out or pid is None:  # the kill did not end it, or the helper never forked: give up
                    return pid, None, True, bound.starved
                try:
                    os.killpg(pid, signal.SIGKILL)  # the child leads its own session: its workers die too
                except (ProcessLookupError, PermissionError):
                    pass
                bound.killed(10.0)  # the helper reaps it and reports the signal
                continue
            if not bound.select([r], left):
                continue
            chunk = os.read(r, 256)
            if not chunk:  # the helper closed the pipe without a status: it died
                return pid, None, bound.timed_out, bound.starved
            buf += chunk


# ----------------------------------------------------------------------------------- the process's helper
#: which helper process runs which modules. pylint has its own: its warm astroid cache makes it ~90 MB, and a fork
#: (and the child's exit) costs in proportion, ~5 ms of CPU against ~2 ms from the light tools' helper, which
#: never holds it. Every run of the light tools would pay the difference.
HELPER_GROUPS: tuple[tuple[str, ...], ...] = (("pylint",), ("bandit", "rewardlang.runtime.tools.pyanalyzers"))
_HELPERS: dict[tuple[str, ...], WarmHelper] = {}
_HELPER_PID = -1
_HELPER_LOCK = threading.Lock()


def helper(module: str | Sequence[str] = "pylint") -> WarmHelper:
    """This process's helper for ``module`` (one of :data:`TOOL_MODULES`), or the one that holds every module of
    a list (started on first use; a forked child starts its own)."""
    global _HELPER_PID
    wanted = {module} if isinstance(module, str) else set(module)
    group = next((g for g in HELPER_GROUPS if wanted <= set(g)), None)
    if group is None:
        raise ValueError(f"{module!r} is not one of the helpers' modules {TOOL_MODULES}")
    with _HELPER_LOCK:
        if _HELPER_PID != os.getpid():
            _HELPERS.clear()  # a forked child's copies are its parent's helpers, not its own
            _HELPER_PID = os.getpid()
            import atexit

            # stopped and reaped before this process ends (it would exit on its own at the socket's EOF, but
            # after us: a command would leave a process behind for a moment, and a subreaper would see it)
            atexit.register(_close_helper)
        if group not in _HELPERS:
            _HELPERS[group] = WarmHelper(group)
        return _HELPERS[group]


def _close_helper() -> None:
    with _HELPER_LOCK:
        if _HELPER_PID == os.getpid():
            for h in _HELPERS.values():
                h.close()


def _warm_module(argv: Sequence[str]) -> str | None:
    if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and argv[2] in TOOL_MODULES:
        return argv[2]
    return None


def run_warm(argv: Sequence[str], *, timeout: float, cwd: str | Path, env: dict[str, str],
             stats: Counter | None = None) -> Completed | None:
    """Run ``argv`` in the process's warm helper when it is one of the helper's commands; None otherwise.

    A dead helper is restarted once for the run (``tool.warm.restarts``); if it cannot run it, the result is
    ``missing`` with the reason (an infrastructure failure of the tool: masked and counted by the runner).
    """
    module = _warm_module(argv)
    if module is None or not enabled():
        return None
    h = helper(module)
    if env.get("PYTHONPATH", "") != h.pythonpath:  # the helper's path is not the one asked for
        return None
    t0 = time.monotonic()
    done, result, last = _restarting(h, stats, lambda: h.run(module, argv[3:], cwd=cwd, env=env,
                                                              timeout=timeout - (time.monotonic() - t0)))
    if done:
        return result
    return Completed(list(argv), None, "", last, missing=True, elapsed=time.monotonic() - t0)


def _restarting(h: "WarmHelper", stats: Counter | None, call: Any) -> tuple[bool, Any, str]:
    """``(True, call(), "")`` from a live helper, restarted once if it died (``tool.warm.restarts``); else
    ``(False, None, why)``, counted in ``tool.warm.failures``."""
    last = ""
    for _ in range(2):
        generation = -1
        try:
            generation, started = h.ensure()
            if started and generation > 1 and stats is not None:
                stats["tool.warm.restarts"] += 1
            return True, call(), ""
        except HelperDead as exc:
            last = str(exc)
            h.discard(generation)
    if stats is not None:
        stats["tool.warm.failures"] += 1
    return False, None, last


def run_warm_many(argvs: Sequence[Sequence[str]], *, timeout: float, cwds: Sequence[str | Path],
                  envs: Sequence[dict[str, str]], stats: Counter | None = None) -> list[Completed] | None:
    """Run several of the helpers' commands one after the other in one fork of the helper that holds them all
    (:meth:`WarmHelper.run_many`); None when they cannot go there (one is not a helper's command, the helpers
    are off, a PYTHONPATH that is not the helper's, or no helper holds them all): the caller runs them apart.

    A dead helper is restarted once; if it cannot run them, every run is ``missing`` with the reason.
    """
    modules = [_warm_module(a) for a in argvs]
    if not argvs or any(m is None for m in modules) or not enabled() or len(argvs) > MAX_RUNS:
        return None
    try:
        h = helper([m for m in modules if m is not None])
    except ValueError:
        return None
    if any(env.get("PYTHONPATH", "") != h.pythonpath for env in envs):
        return None
    runs = [(m, list(a[3:]), c, e) for m, a, c, e in zip(modules, argvs, cwds, envs)]
    t0 = time.monotonic()
    done, result, last = _restarting(h, stats, lambda: h.run_many(
        runs, timeout=timeout - (time.monotonic() - t0)))  # type: ignore[arg-type]
    if done:
        return result
    return [Completed(list(a), None, "", last, missing=True, elapsed=time.monotonic() - t0) for a in argvs]
