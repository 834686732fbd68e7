"""Warm analysers: long-lived helper processes that have imported pylint, bandit and the in-Python analysers
(radon, vulture, the AST checks) once, and fork a fresh child for every tool run. pylint has a helper of its own
(astroid's warm cache makes it ~90 MB, and a fork costs in proportion); bandit and the analysers share a small one.

Why: a small batch of ``quality_score`` used to pay ~0.45 s of CPU per call however few rows it had, because
every call started three interpreters that imported the tools again, and pylint's astroid rebuilt the trees of
the standard-library modules the code imports (``typing`` alone is most of a one-file pylint run). The helper
pays that once: at start it imports the tools and lints a warm-up file that imports the modules code commonly
uses, so astroid's module cache holds their trees; each run then costs a ``fork`` and the analysis itself.
pylint's own set-up (registering ~45 checkers, building its argument parser, parsing the options: ~2/3 of a
small run's CPU after the warm-up) is done once per option set too: the helper keeps a linter that pylint's
``Run`` configured for those options (an empty configuration file only), and a run only checks its files with it
(:func:`_run_prepared_pylint`: what ``Run`` does after configuring, with the run's own directory and stdout).

Each run is what ``python -m <tool> <args>`` in the run's directory would be, in a forked child of the helper:
its own session (the caller kills its whole process group on a deadline, pylint's ``--jobs`` workers
included), ``cwd``, environment, ``sys.argv`` and ``sys.path[0]`` of that command, stdout and stderr into files
the caller reads, the exit status of ``python -m`` (``SystemExit`` code, 1 on an uncaught exception, -N when
killed by signal N). The child exits after the run, so nothing a run leaves in a tool's global state (astroid's
cache of the batch's own files, pylint's registries) reaches another run; the helper itself never analyses
the policy's code and never runs it (neither do the tools: they parse it). A run that shares astroid's cache of
library modules sees what a file late in a many-file pylint run sees today; the parity of every raw result with
the cold path is asserted on the HumanEval corpus (``tests/runtime/tools/test_tool_warm.py``).

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

import gc
import io
import json
import os
import select
import selectors
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

from rewardlang.runtime.tools.runner import Completed

__all__ = ["TOOL_MODULES", "HelperDead", "WarmHelper", "enabled", "helper", "run_warm"]

#: the modules the process's helper runs as ``python -m``: the tools of the quality analysis and of ``pylint``
TOOL_MODULES: tuple[str, ...] = ("pylint", "bandit", "rewardlang.runtime.tools.pyanalyzers")
#: what each module needs imported before the first run (the tool's own start-up cost)
_PRELOAD: dict[str, tuple[str, ...]] = {
    "pylint": ("pylint", "pylint.lint", "pylint.checkers", "pylint.reporters.json_reporter", "astroid"),
    "bandit": ("bandit.cli.main", "bandit.core.manager", "bandit.core.extension_loader", "bandit.formatters.json"),
    "rewardlang.runtime.tools.pyanalyzers": (
        "rewardlang.runtime.tools.pyanalyzers", "rewardlang.runtime.tools.astchecks", "radon.complexity",
        "radon.raw", "vulture", "vulture.noqa",
    ),
}
#: the warm-up file pylint lints once in the helper: the imports (and uses, which pull in what they import)
#: of the modules completions commonly use, so that astroid's cache holds their trees
WARMUP_SOURCE = '''"""Warm-up."""
import bisect
import collections
import copy
import datetime
import decimal
import fractions
import functools
import hashlib
import heapq
import itertools
import json
import math
import operator
import os
import random
import re
import statistics
import string
import sys
from collections import Counter, OrderedDict, defaultdict, deque
from functools import lru_cache, reduce
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple, Union


@lru_cache(maxsize=None)
def warm(n: int, xs: Tuple[int, ...] = (), d: Optional[Dict[str, List[int]]] = None) -> Union[int, float]:
    c: Counter = Counter(xs)
    q: deque = deque(xs)
    g: defaultdict = defaultdict(list)
    o: OrderedDict = OrderedDict()
    h: List[int] = list(xs)
    heapq.heapify(h)
    heapq.heappush(h, n)
    s: Set[str] = set(string.ascii_lowercase + string.digits)
    p = re.compile(r"[a-z]+").findall(" ".join(s))
    r = random.Random(n).randint(0, 10) + bisect.bisect_left(h, n)
    t = itertools.combinations(xs, 2), itertools.permutations(xs), itertools.accumulate(xs)
    f: Callable[[int, int], int] = operator.add
    m = math.sqrt(n) + math.gcd(n, 2) + math.floor(math.log(n + 1)) + statistics.mean(xs or (1,))
    e = fractions.Fraction(n, 3) + decimal.Decimal(n) + datetime.date(2000, 1, 1).toordinal()
    k = hashlib.md5(json.dumps(d).encode()).hexdigest() + os.path.join("a", "b") + str(sys.maxsize)
    a: Any = copy.deepcopy((c, q, g, o, p, r, t, e, k, collections.abc.Iterable))
    it: Iterable[int] = reduce(f, xs, 0), functools.partial(f, 1)(2)
    return m + len(a) + len(list(it))
'''
#: rewardlang's own tool modules whose ``__main__`` block is exactly ``sys.exit(main())``: a run calls the preloaded
#: module's ``main`` (``python -m`` would compile the module's source again and re-run its top level: ~3 ms)
_DIRECT_MAIN = frozenset({"rewardlang.runtime.tools.pyanalyzers"})
_ENV_OFF = "REWARDLANG_TOOL_WARM"
_HEADER = struct.Struct("!I")
_MAX_REQUEST = 64 << 20


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

    def __init__(self, modules: Sequence[str] = TOOL_MODULES, *, warmup: bool = True,
                 start_timeout: float = 120.0) -> None:
        self.modules = tuple(modules)
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
        code = (f"import sys; sys.path.insert(0, {root!r}); "
                "from rewardlang.runtime.tools.warm import _helper_main; _helper_main()")
        argv = [sys.executable, "-c", code, str(theirs.fileno()), json.dumps(self.modules),
                "1" if self.warmup else "0"]
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                          pass_fds=[theirs.fileno()], cwd=tempfile.gettempdir(),
                                          start_new_session=True)
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
            r, w = os.pipe()
            try:
                try:
                    self._send(payload, [out.fileno(), err.fileno(), w])
                finally:
                    os.close(w)
                pid, code, timed_out = self._wait(r, t0 + max(timeout, 0.01))
            finally:
                os.close(r)
            if code is None and not timed_out:
                if pid is not None:  # the run outlived its helper: end it, nobody is left to report it
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.05)  # let its exit status arrive
                raise HelperDead(f"the warm analyser helper died during a run ({self._why()})")
            out.seek(0)
            err.seek(0)
            return Completed(argv, code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                             timed_out=timed_out, elapsed=time.monotonic() - t0)

    @staticmethod
    def _wait(r: int, deadline: float) -> tuple[int | None, int | None, bool]:
        """Read ``pid`` then the exit status from the run's status pipe; kill the group at ``deadline``."""
        buf = b""
        pid: int | None = None
        timed_out = False
        end = deadline
        while True:
            lines = buf.split(b"\n")
            if pid is None and len(lines) > 1:
                pid = int(lines[0])
            if len(lines) > 2:
                return pid, int(lines[1]), timed_out
            left = end - time.monotonic()
            if left <= 0:
                if timed_out or pid is None:  # the kill did not end it, or the helper never forked: give up
                    return pid, None, True
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)  # the child leads its own session: its workers die too
                except (ProcessLookupError, PermissionError):
                    pass
                end = time.monotonic() + 10  # the helper reaps it and reports the signal
                continue
            if not select.select([r], [], [], left)[0]:
                continue
            chunk = os.read(r, 256)
            if not chunk:  # the helper closed the pipe without a status: it died
                return pid, None, timed_out
            buf += chunk


# ----------------------------------------------------------------------------------- the process's helper
#: which helper process runs which modules. pylint has its own: its warm astroid cache makes it ~90 MB, and a fork
#: (and the child's exit) costs in proportion, ~5 ms of CPU against ~2 ms from the light tools' helper, which
#: never holds it. Every run of the light tools would pay the difference.
HELPER_GROUPS: tuple[tuple[str, ...], ...] = (("pylint",), ("bandit", "rewardlang.runtime.tools.pyanalyzers"))
_HELPERS: dict[tuple[str, ...], WarmHelper] = {}
_HELPER_PID = -1
_HELPER_LOCK = threading.Lock()


def helper(module: str = "pylint") -> WarmHelper:
    """This process's helper for ``module`` (one of :data:`TOOL_MODULES`; started on first use; a forked child
    starts its own)."""
    global _HELPER_PID
    group = next((g for g in HELPER_GROUPS if module in g), None)
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
    last = ""
    for _ in range(2):
        generation = -1
        try:
            generation, started = h.ensure()
            if started and generation > 1 and stats is not None:
                stats["tool.warm.restarts"] += 1
            return h.run(module, argv[3:], cwd=cwd, env=env, timeout=timeout - (time.monotonic() - t0))
        except HelperDead as exc:
            last = str(exc)
            h.discard(generation)
    if stats is not None:
        stats["tool.warm.failures"] += 1
    return Completed(list(argv), None, "", last, missing=True, elapsed=time.monotonic() - t0)


# --------------------------------------------------------------------------------------- the helper side
def _helper_main() -> None:
    """The helper process: preload, warm up, then serve fork requests until the socket closes."""
    fd, modules, warmup = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "1"
    sock = socket.socket(fileno=fd)
    base_path = [p for p in sys.path[1:] if p != ""]  # without the -c entries: what `python -m` adds is cwd
    import importlib
    import runpy  # noqa: F401 - what every run's child uses, imported once here
    import traceback  # noqa: F401

    loaded = set()
    for m in modules:
        try:
            for name in _PRELOAD.get(m, (m,)):
                importlib.import_module(name)
            loaded.add(m)
        except Exception as exc:  # noqa: BLE001 - a tool that is missing or broken here fails in its runs, as
            # `python -m` would (and only its runs: the other tools still run warm); said on the helper's stderr
            sys.stderr.write(f"rewardlang warm helper: {m} not preloaded: {type(exc).__name__}: {exc}\n")
    if warmup and "pylint" in loaded:
        try:
            _warm_pylint()
        except Exception as exc:  # noqa: BLE001 - no warm cache: pylint's runs build what they need, as cold runs do
            sys.stderr.write(f"rewardlang warm helper: no pylint warm-up: {type(exc).__name__}: {exc}\n")
    if warmup and "rewardlang.runtime.tools.pyanalyzers" in loaded:
        try:
            _warm_analyzers()
        except Exception as exc:  # noqa: BLE001 - the runs compile what they need, as cold runs do
            sys.stderr.write(f"rewardlang warm helper: no analyzer warm-up: {type(exc).__name__}: {exc}\n")
    sys.path[:] = base_path
    # every object the children inherit goes to the permanent generation: their collections never walk (and
    # so never copy-on-write) the helper's heap, astroid's trees included
    gc.collect()
    gc.freeze()
    sys.stdout.flush()
    sys.stderr.flush()
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    os.set_blocking(rfd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wfd)
    status: dict[int, int] = {}  # child pid -> the write end of its caller's status pipe
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(rfd, selectors.EVENT_READ)
    sock.sendall(b"ready\n")
    while True:
        for key, _ in sel.select():
            if key.fileobj is sock:
                req = _receive(sock)
                if req is None:  # the caller closed the socket (or is gone): stop
                    return
                data, fds = req
                if data.get("module") == "pylint":
                    _prepare_pylint(data)  # configured here once per option set: each run only checks its files
                pid = _fork_run(data, fds, sock, (rfd, wfd), status)
                os.close(fds[0])
                os.close(fds[1])
                _write(fds[2], f"{pid}\n")
                status[pid] = fds[2]
            else:
                try:
                    os.read(rfd, 4096)
                except BlockingIOError:
                    pass
        _reap(status)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    try:
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, 3)
        while head and len(head) < _HEADER.size:
            more = sock.recv(_HEADER.size - len(head))
            if not more:
                return None
            head += more
        if not head:
            return None
        (n,) = _HEADER.unpack(head)
        if n > _MAX_REQUEST or len(fds) != 3:
            return None
        body = b""
        while len(body) < n:
            more = sock.recv(min(n - len(body), 1 << 20))
            if not more:
                return None
            body += more
        return json.loads(body), fds
    except (OSError, ValueError):
        return None


def _write(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:  # the caller gave up on this run
        pass


def _reap(status: dict[int, int]) -> None:
    while status:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status.pop(pid, None)
        if fd is not None:
            _write(fd, f"{os.waitstatus_to_exitcode(st)}\n")
            os.close(fd)


def _fork_run(data: dict[str, Any], fds: list[int], sock: socket.socket, wake: tuple[int, int],
              status: dict[int, int]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # the child: become `python -m module args` in cwd, then exit with its status
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for f in (*wake, *status.values()):
            os.close(f)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for f in (devnull, *fds):
            os.close(f)
        # sys.stdout and sys.stderr stay the interpreter's own objects (empty: the helper never writes to them),
        # now writing to the run's files: a tool that pickles its streams (pylint --jobs) finds what it expects
        code = _child(data)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF if code >= 0 else 1)
    return 0  # unreachable: os._exit


def _child(data: dict[str, Any]) -> int:
    import runpy
    import traceback

    cwd = data["cwd"]
    os.chdir(cwd)
    env = data["env"]
    # the run's environment exactly; only what differs is changed (the run's is the helper's but for a few
    # variables: setting each of ~40 again costs ~0.6 ms of a run)
    for k in [k for k in os.environ if k not in env]:
        del os.environ[k]
    for k, v in env.items():
        if os.environ.get(k) != v:
            os.environ[k] = v
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    sys.path.insert(0, os.getcwd())  # as `python -m` does
    module = data["module"]
    if module == "pylint":  # read from the environment at import time: the run's own PYLINTHOME
        _repoint_pylint_home()
    if module in sys.modules and not hasattr(sys.modules[module], "__path__") and module not in _DIRECT_MAIN:
        del sys.modules[module]  # preloaded for its imports; `python -m` executes it afresh as __main__
    sys.argv = [module, *data["args"]]  # run_module puts the module's file in sys.argv[0], as `-m` does
    try:
        linter = _PREPARED.get(data.get("prepared"))  # type: ignore[arg-type]
        if linter is not None:
            sys.argv[0] = sys.modules["pylint"].__file__ or module
            _run_prepared_pylint(linter, data["args"])
        main = getattr(sys.modules.get(module), "main", None) if module in _DIRECT_MAIN else None
        if main is not None:  # its `__main__` block is `sys.exit(main())`: no need to compile and run it again
            sys.argv[0] = sys.modules[module].__file__ or module
            sys.exit(main())
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as exc:
        c = exc.code
        if c is None:
            return 0
        if isinstance(c, int):
            return c
        print(c, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        traceback.print_exc()
        return 1


def _repoint_pylint_home() -> None:
    from pylint import constants
    from pylint.lint import caching, utils

    home = constants._get_pylint_home()
    constants.PYLINT_HOME = home
    utils.PYLINT_HOME = home
    caching.PYLINT_HOME = home
    caching.PYLINT_HOME_AS_PATH = Path(home)


def _warm_analyzers() -> None:
    """Analyse :data:`WARMUP_SOURCE` once with every in-Python analyzer, so that what they build on first use
    (the tokenizer's and radon's compiled patterns, lazily imported parts) is built here once, not in every run.
    With ``respect_noqa``: the run without it replaces vulture's ``# noqa`` parser, which must stay vulture's own
    in the helper (a run that respects ``noqa`` uses it)."""
    import shutil

    from rewardlang.runtime.tools import pyanalyzers

    d = tempfile.mkdtemp(prefix="rewardlang-warmup-", dir=_shm_dir())
    try:
        path = Path(d, "rewardlang_warmup_module.py")
        path.write_text(WARMUP_SOURCE, encoding="utf-8")
        pyanalyzers._analyze_file(path, pyanalyzers.NAMES, respect_noqa=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _warm_pylint() -> None:
    """Lint :data:`WARMUP_SOURCE` once with every message on, in a scratch directory, then drop what is
    specific to that run (its own module, path-keyed lookups, inference caches) and keep the library trees."""
    import contextlib
    import shutil

    import astroid
    from astroid import manager as astroid_manager
    from pylint.lint import Run

    saved_path, saved_cwd = list(sys.path), os.getcwd()
    d = tempfile.mkdtemp(prefix="rewardlang-warmup-", dir=_shm_dir())
    try:
        Path(d, "rewardlang_warmup_module.py").write_text(WARMUP_SOURCE, encoding="utf-8")
        Path(d, "rc").write_text("", encoding="utf-8")
        os.chdir(d)
        os.environ["PYLINTHOME"] = d
        _repoint_pylint_home()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            Run([f"--rcfile={d}/rc", "--persistent=n", "--score=n", "--reports=n", "--jobs=1", "--enable=all",
                 "--", "rewardlang_warmup_module.py"], exit=False)
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        os.environ.pop("PYLINTHOME", None)
        shutil.rmtree(d, ignore_errors=True)
    mgr = astroid.MANAGER
    for name in [n for n, m in mgr.astroid_cache.items()
                 if n == "rewardlang_warmup_module" or str(getattr(m, "file", "") or "").startswith(d)]:
        del mgr.astroid_cache[name]
    mgr._mod_file_cache.clear()
    from astroid.inference_tip import clear_inference_tip_cache
    from astroid.interpreter._import.spec import _find_spec, _is_setuptools_namespace

    clear_inference_tip_cache()
    astroid_manager._invalidate_cache()
    for lru in (astroid_manager._cache_normalize_path_, astroid_manager._has_init,
                astroid_manager.cached_os_path_isfile, _find_spec, _is_setuptools_namespace):
        lru.cache_clear()
    from astroid.interpreter._import import spec as astroid_spec

    for finder in astroid_spec._SPEC_FINDERS:
        finder.find_module.cache_clear()


# ------------------------------------------------------------------------------ pylint, configured once
#: the options a configured linter is kept for: those :class:`~rewardlang.runtime.tools.pylint.PylintTool`
#: passes. A run with any other option (or a configuration file that is not empty) runs ``python -m pylint``.
_PYLINT_OPTIONS = ("--output-format=", "--persistent=", "--score=", "--reports=", "--jobs=1", "--disable=",
                   "--enable=")
#: environment variables pylint reads while it is configured (colour handling of its reporters)
_PYLINT_ENV = ("NO_COLOR", "FORCE_COLOR", "TERM")
#: configured linters by (options, values of _PYLINT_ENV); None: that option set could not be prepared
_PREPARED: dict[Any, Any] = {}
_PREPARED_MAX = 16


def _pylint_split(args: Sequence[str]) -> tuple[str, tuple[str, ...], list[str]] | None:
    """``(rcfile, options, files)`` of a ``--rcfile=F OPTION... -- FILE...`` command line whose options are all
    :data:`_PYLINT_OPTIONS`; None for any other."""
    args = list(args)
    if "--" not in args:
        return None
    k = args.index("--")
    opts, files = args[:k], args[k + 1:]
    if not opts or not opts[0].startswith("--rcfile=") or not files:
        return None
    rest = tuple(opts[1:])
    if not all(o.startswith(_PYLINT_OPTIONS) for o in rest) or any(o.startswith("--jobs=1") and o != "--jobs=1"
                                                                    for o in rest):
        return None
    return opts[0][len("--rcfile="):], rest, files


def _prepare_pylint(data: dict[str, Any]) -> None:
    """Give a pylint run (``data``) a linter configured for its options, built here in the helper the first
    time they are seen, so that the forked run only checks its files (pylint's own set-up -- registering ~45
    checkers, building its argument parser, parsing the options -- is most of a small run's CPU). Sets
    ``data["prepared"]`` to the key of :data:`_PREPARED`; leaves it unset where the run must be ``python -m
    pylint`` (another option, a non-empty configuration file, a set-up that printed or failed)."""
    split = _pylint_split(data.get("args") or [])
    if split is None:
        return
    rcfile, opts, _ = split
    try:
        if os.path.getsize(os.path.join(data["cwd"], rcfile)) != 0:  # only an empty configuration file
            return
    except OSError:
        return
    env = data.get("env") or {}
    key = (opts, tuple(env.get(k) for k in _PYLINT_ENV))
    if key not in _PREPARED:
        if len(_PREPARED) >= _PREPARED_MAX:
            return
        _PREPARED[key] = _configure_pylint(opts, {k: env.get(k) for k in _PYLINT_ENV})
        gc.freeze()  # the new linter too: the children's collections never walk it
    if _PREPARED[key] is not None:
        data["prepared"] = key


def _configure_pylint(opts: tuple[str, ...], env: dict[str, str | None]) -> Any:
    """A linter that pylint's own ``Run`` configured with ``opts`` (and an empty configuration file), stopped
    where ``Run`` starts checking; None when that set-up printed anything, emitted a message or exited (the
    runs then go through ``python -m pylint``, which does the same again in front of the caller)."""
    import contextlib
    import shutil

    from pylint.lint import PyLinter, Run
    from pylint.reporters import MultiReporter

    class _Configured(Exception):
        pass

    box: list[Any] = []

    class _Linter(PyLinter):
        def check(self, files_or_modules: Any) -> None:
            box.append(self)
            raise _Configured

    class _Run(Run):
        LinterClass = _Linter

    saved_env = {k: os.environ.get(k) for k in env}
    saved_cwd, saved_path = os.getcwd(), list(sys.path)
    d = tempfile.mkdtemp(prefix="rewardlang-pylint-config-", dir=_shm_dir())
    out, err = io.StringIO(), io.StringIO()
    try:
        Path(d, "rc").write_text("", encoding="utf-8")
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        os.chdir(d)
        prefix = os.getcwd() + os.sep
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                _Run([f"--rcfile={d}/rc", *opts, "--", "placeholder.py"], exit=False)
            except _Configured:
                pass
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: this option set runs as `python -m pylint`
        sys.stderr.write(f"rewardlang warm helper: pylint not configured for {opts}: {type(exc).__name__}: {exc}\n")
        return None
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(d, ignore_errors=True)
    if not box or out.getvalue() or err.getvalue():
        return None
    linter = box[0]
    reporter = linter.reporter
    # what configuring recorded of the directory and the streams it ran in, the run replaces with its own:
    # the reporter's output and the prefix it strips from paths, and the directory of the base configuration
    if (linter.msg_status or getattr(reporter, "messages", None) or getattr(reporter, "out", None) is not out
            or isinstance(reporter, MultiReporter) or getattr(reporter, "path_strip_prefix", None) != prefix
            or len(linter._directory_namespaces) != 1 or linter.config.jobs != 1):
        return None
    linter.__class__ = PyLinter
    return linter


def _run_prepared_pylint(linter: Any, args: Sequence[str]) -> None:
    """The rest of ``python -m pylint ARGS`` for a linter configured with ARGS' options: what
    ``pylint/__main__.py`` and ``pylint.lint.Run`` do after configuring (pylint 4.1), in this run's directory.
    Ends with ``SystemExit`` and pylint's exit status."""
    from glob import glob
    from itertools import chain

    import pylint

    pylint.modify_sys_path()
    split = _pylint_split(args)
    assert split is not None  # prepared only for such a command line
    linter.reporter.out = sys.stdout  # the run's own stdout, as a reporter `python -m pylint` makes writes to
    linter.reporter.path_strip_prefix = os.getcwd() + os.sep  # its paths relative to the run's directory
    (namespace,) = linter._directory_namespaces.values()
    linter._directory_namespaces = {Path.cwd(): namespace}  # what configuring in this directory records
    linter.config.files = list(chain.from_iterable(glob(a, recursive=True) or [a] for a in split[2]))
    try:
        linter.check(linter.config.files)
        score_value = linter.generate_reports(verbose=False)
        if linter.config.clear_cache_post_run:
            from astroid import MANAGER
            from pylint.checkers.clear_lru_cache import clear_lru_caches

            clear_lru_caches()
            MANAGER.clear_cache()
        if linter.config.exit_zero:
            sys.exit(0)
        elif linter.any_fail_on_issues():
            sys.exit(linter.msg_status or 1)
        elif score_value is not None:
            sys.exit(0 if score_value >= linter.config.fail_under else (linter.msg_status or 1))
        sys.exit(linter.msg_status)
    except KeyboardInterrupt:  # pylint.run_pylint's
        sys.exit(1)
