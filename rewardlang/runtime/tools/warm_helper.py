"""The warm helper process of :mod:`rewardlang.runtime.tools.warm` (the client): it imports the tools once, warms
them up, then serves fork requests on its socket until the client closes it (:func:`main`). Each request forks a
child that runs one ``python -m <tool> <args>`` (:func:`_child`) and reports its exit status; see the client's
docstring for why and for what a run sees. This module runs only in the helper; the client starts it as
``python -c "from rewardlang.runtime.tools.warm_helper import main; main()" FD MODULES WARMUP``.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import io
import json
import operator
import os
import selectors
import signal
import socket
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlang.runtime.tools import pyanalyzers
from rewardlang.runtime.tools.warm import _HEADER, _MAX_FDS, _MAX_REQUEST, _shm_dir

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


# --------------------------------------------------------------------------------------- the helper side
def main() -> None:
    """The helper process: preload, warm up, then serve fork requests until the socket closes."""
    fd, modules, warmup = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "1"
    reuse = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
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
    worker = _WorkerSlot(sel, REUSABLE if reuse is None else frozenset(reuse))
    sock.sendall(b"ready\n")
    while True:
        for key, _ in sel.select():
            if key.fileobj is sock:
                req = _receive(sock)
                if req is None:  # the caller closed the socket (or is gone): stop
                    return
                data, fds = req
                for run in data.get("runs") or [data]:
                    if run.get("module") == "pylint":
                        _prepare_pylint(run)  # configured here once per option set: each run only checks its files
                # a worker that cannot take it (it could not be forked, or its socket is gone) leaves the request to
                # a fork of its own, as before: never a request left without an answer until its caller's deadline
                if worker.takes(data, status) and worker.dispatch(
                        data, fds, status, lambda: _spawn_worker(sock, (rfd, wfd), status)):
                    continue
                pid = _fork_run(data, fds, sock, (rfd, wfd), status)
                for f in fds[:-1]:
                    os.close(f)
                _write(fds[-1], f"{pid}\n")
                status[pid] = fds[-1]
            elif key.fileobj is rfd:
                try:
                    os.read(rfd, 4096)
                except BlockingIOError:
                    pass
            else:
                worker.answered(status)
        _reap(status, worker)


# ------------------------------------------------------------------------------------ the reused worker
#: modules whose runs a worker serves one after the other in one process (:class:`_WorkerSlot`): tools that only
#: parse the code they analyse and keep nothing of it between runs (bandit, radon, vulture, the AST checks), and
#: pylint's runs of a linter configured in the helper (one run a request): :class:`_PylintGuard` puts back what
#: such a run leaves (astroid's caches, the linter's and its checkers' state), and a run that changed a library
#: tree astroid keeps for every run (``os.x = 1`` adds ``x`` to its tree of ``os``) ends the worker after it.
REUSABLE = frozenset({"bandit", "rewardlang.runtime.tools.pyanalyzers", "pylint"})
#: requests one worker serves before it is replaced by a fresh fork (bounds whatever a long life accumulates)
WORKER_RUNS = 256
#: descriptors of the helper that no forked child keeps (the worker's socket: a child holding it would keep a
#: retired worker from seeing its end)
_HELPER_ONLY: set[int] = set()
#: top-level packages whose modules' globals a worker puts back after each request (by identity: a run that
#: rebinds a name -- vulture's parser of suppression comments, a logging hook, a builtin -- finds it as it was)
_WATCHED = ("bandit", "vulture", "radon", "rewardlang", "stevedore", "logging", "warnings", "argparse", "ast",
            "tokenize", "json", "builtins", "sys", "os", "io", "re", "signal", "codecs", "linecache", "traceback",
            "pylint", "astroid")


def _reusable(data: dict[str, Any], modules: frozenset[str]) -> bool:
    runs = data["runs"] if isinstance(data.get("runs"), list) else [data]
    return (os.environ.get("REWARDLANG_TOOL_REUSE", "1").strip().lower() not in ("0", "no", "false", "off")
            and all(isinstance(r, dict) and r.get("module") in modules for r in runs)
            # pylint: only a run of a configured linter, alone in its request (what _PylintGuard puts back)
            and all(r.get("module") != "pylint" or (r is data and r.get("prepared") in _PREPARED) for r in runs))


def _cpu_of(pid: int) -> float:
    """CPU seconds of process ``pid`` (with what it reaped), as :func:`~rewardlang.runtime.tools.command.session_cpu`
    counts them; 0.0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class _WorkerSlot:
    """The helper's side of its worker: a child forked once that serves requests of :data:`REUSABLE` tools one
    at a time, each as the forked child of a request would (issue 38: a small batch's fork of the helper, its
    copy-on-write faults and its exit cost ~10 ms of CPU, more than bandit's and the analysers' own work). To
    its caller a request looks as one of its own child's: the status pipe says the worker's pid (with the CPU it
    had used before, which the caller's deadline does not count) and then the request's exit status, written
    by the helper when the worker answers or, when the worker dies (the caller killed its session at the
    deadline, or it crashed), the worker's own exit status, as a forked child's would be. A request that comes
    while the worker is busy gets a fork of its own, as before. The worker puts back after each request what a
    run leaves in the process (:class:`_State`); it exits when it cannot, after a request that did not end
    cleanly, and after :data:`WORKER_RUNS` requests: the next request forks a fresh one."""

    def __init__(self, sel: selectors.BaseSelector, modules: frozenset[str]) -> None:
        self.sel = sel
        self.modules = modules
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        self.served = 0
        self.buf = b""
        #: the configured linters the worker was forked with (its copy of :data:`_PREPARED`)
        self.linters: frozenset[str] = frozenset()
        #: workers retired or dead, not yet reaped
        self.exited: set[int] = set()

    def takes(self, data: dict[str, Any], status: dict[int, int]) -> bool:
        """Whether the worker serves this request (reusable tools, and the worker idle or not started). An idle
        worker forked before the request's configured linter existed is retired: a fresh one has it."""
        if not _reusable(data, self.modules) or (self.pid is not None and self.pid in status):
            return False
        if self.pid is not None and data.get("prepared") is not None and data["prepared"] not in self.linters:
            self.retire()
        return True

    def dispatch(self, data: dict[str, Any], fds: list[int], status: dict[int, int], spawn: Any) -> bool:
        """Send the request to the worker (started first when there is none); False when it cannot take it (it
        is gone: the request forks a child of its own)."""
        if self.pid is None:
            try:
                self.pid, self.sock = spawn()
            except OSError:
                return False
            self.served, self.buf, self.linters = 0, b"", frozenset(_PREPARED)
            self.sel.register(self.sock, selectors.EVENT_READ)
            _HELPER_ONLY.add(self.sock.fileno())
        assert self.sock is not None
        base = _cpu_of(self.pid)
        body = json.dumps(data).encode()
        try:
            socket.send_fds(self.sock, [_HEADER.pack(len(body))], fds[:-1])
            self.sock.sendall(body)
        except OSError:
            self.retire()
            return False
        for f in fds[:-1]:
            os.close(f)
        _write(fds[-1], f"{self.pid} {base:.2f}\n")
        status[self.pid] = fds[-1]
        self.served += 1
        return True

    def answered(self, status: dict[int, int]) -> None:
        """The worker's socket is readable: a request's exit status (passed on to its caller), or its end."""
        assert self.sock is not None and self.pid is not None
        try:
            chunk = self.sock.recv(64)
        except OSError:
            chunk = b""
        if not chunk:  # it exited: the reap says how, to the request it was running if any
            self.retire()
            return
        self.buf += chunk
        ends = False
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            words = line.split()
            ends = ends or b"end" in words[1:]
            fd = status.pop(self.pid, None)
            if fd is not None:
                _write(fd, f"{int(words[0]) if words else 1}\n")
                os.close(fd)
        if ends or (self.served >= WORKER_RUNS and self.pid not in status):
            self.retire()

    def retire(self) -> None:
        """Stop using the worker (it exits at its socket's end); its reap is still awaited."""
        if self.sock is not None:
            self.sel.unregister(self.sock)
            _HELPER_ONLY.discard(self.sock.fileno())
            self.sock.close()
        if self.pid is not None:
            self.exited.add(self.pid)
        self.pid, self.sock, self.buf = None, None, b""

    def reaped(self, pid: int) -> None:
        if pid == self.pid:  # died without its socket's end being seen yet
            self.retire()
        self.exited.discard(pid)


def _spawn_worker(sock: socket.socket, wake: tuple[int, int], status: dict[int, int]) -> tuple[int, socket.socket]:
    """Fork the worker: ``(pid, the helper's end of its socket)``."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        raise
    if pid:
        theirs.close()
        return pid, ours
    code = 1
    try:
        os.setsid()  # its own session, as a run's child: a caller's kill at its deadline ends it and what it started
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        ours.close()
        for f in (*wake, *status.values(), *_HELPER_ONLY):
            with contextlib.suppress(OSError):
                os.close(f)
        devnull = os.open(os.devnull, os.O_RDWR)
        for f in (0, 1, 2):
            os.dup2(devnull, f)
        os.close(devnull)
        code = _serve(theirs)
    finally:
        os._exit(code)
    return 0, ours  # unreachable: os._exit


#: the exit status of a worker that ended because a request left what cannot be put back
_ENDED = 70


def _serve(sock: socket.socket) -> int:
    """The worker: requests one at a time until the helper closes the socket, each answered with its exit
    status (and `` end`` when the worker ends after it: a request that did not end cleanly or left what cannot
    be put back; then it exits with :data:`_ENDED`)."""
    state = _State(keep={sock.fileno()})
    # pylint's runs (REUSABLE): what they share is taken as it was when the worker was forked
    guard = _PylintGuard() if any(v is not None for v in _PREPARED.values()) else None
    while True:
        req = _receive(sock, min_fds=2)
        if req is None:
            return _ENDED
        data, fds = req
        clean = True
        try:
            if isinstance(data.get("runs"), list):
                code = _runs(data["runs"], fds)
                clean = code == 0
            else:
                os.dup2(fds[0], 1)
                os.dup2(fds[1], 2)
                sys.stdout, sys.stderr = _streams()
                code = _child(data)
                _flush()
                if data.get("module") == "pylint":  # put back what it shares with the next run, or end
                    clean = guard is not None and guard.put_back(code)
        except BaseException:  # noqa: BLE001 - nothing of this request may reach the next one: the worker ends
            code, clean = 1, False
        finally:
            for f in fds:
                with contextlib.suppress(OSError):
                    os.close(f)
        clean = state.restore() and clean
        # the helper sends it nothing more when it says it ends; a request that reached it anyway (it died
        # between requests) gets its exit status, which is not 0
        sock.sendall(f"{code & 0xFF if code >= 0 else 1}{'' if clean else ' end'}\n".encode())
        if not clean:
            return _ENDED


def _streams() -> tuple[Any, Any]:
    """Fresh standard streams on descriptors 1 and 2, as the interpreter's own (a run may close its stdout:
    bandit's report does)."""
    return tuple(io.open(fd, "w", buffering=1 if std.line_buffering else -1, encoding=std.encoding,  # type: ignore
                         errors=std.errors, closefd=False)
                 for fd, std in ((1, sys.__stdout__), (2, sys.__stderr__)))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


class _State:
    """What a worker was like before its first request, put back after each (:meth:`restore`): the modules
    imported (those a run imported are dropped), the globals of the :data:`_WATCHED` packages' modules (each
    name bound to the same object again; names a run added removed), the loggers (handlers, level,
    propagation, filters), the warning filters, every signal's handler and the interval timers, the recursion
    limit, the module path, the working directory, the umask, the resource limits, the garbage collector's
    settings, the standard streams, the environment, the descriptors open (those a run left open closed), the
    import system's finders and the cached finders of directories (a run's directory among them). A run that
    leaves a thread running, a trace or profile function, a process of its own or a hard limit lowered is not
    put back: :meth:`restore` says so and the worker ends."""

    def __init__(self, keep: set[int]) -> None:
        import logging
        import warnings

        self.keep = keep
        self.modules = set(sys.modules)
        self.importers = set(sys.path_importer_cache)
        self.hooks = (list(sys.meta_path), list(sys.path_hooks))
        self.globals = {name: (m, dict(vars(m)), list(vars(m)), list(vars(m).values()))
                        for name, m in list(sys.modules.items())
                        if m is not None and name.partition(".")[0] in _WATCHED and hasattr(m, "__dict__")}
        self.loggers = {lg: self._logger(lg) for lg in self._all_loggers()}
        self.filters = list(warnings.filters)
        self.signals = {sig: signal.getsignal(sig) for sig in signal.valid_signals()
                        if sig not in (signal.SIGKILL, signal.SIGSTOP) and self._settable(sig)}
        self.limit = sys.getrecursionlimit()
        self.path = list(sys.path)
        self.cwd = os.getcwd()
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.gc = (gc.isenabled(), gc.get_threshold())
        import resource

        self.resource = resource
        self.rlimits = {r: resource.getrlimit(r) for r in (getattr(resource, n) for n in dir(resource)
                                                           if n.startswith("RLIMIT_"))}
        self.fds = set(os.listdir("/proc/self/fd"))
        self.environ = dict(os.environ)
        self.logging = logging
        self.warnings = warnings

    @staticmethod
    def _settable(sig: int) -> bool:
        try:
            signal.signal(sig, signal.getsignal(sig))
            return True
        except (OSError, ValueError, TypeError):
            return False

    def _all_loggers(self) -> list[Any]:
        import logging

        return [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger))]

    @staticmethod
    def _logger(lg: Any) -> tuple[Any, ...]:
        return list(lg.handlers), lg.level, lg.propagate, lg.disabled, list(lg.filters)

    def restore(self) -> bool:
        """Put the worker back as it was; False when a run left what cannot be (the worker must end)."""
        import threading

        clean = threading.active_count() == 1 and sys.gettrace() is None and sys.getprofile() is None
        try:
            os.waitpid(-1, os.WNOHANG)
            clean = False  # a process a run started (ended or still there): the worker has children
        except ChildProcessError:
            pass
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        for sig, handler in self.signals.items():
            if signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        for name in set(sys.modules) - self.modules:
            del sys.modules[name]
        for entry in set(sys.path_importer_cache) - self.importers:  # the finders of the runs' directories
            del sys.path_importer_cache[entry]
        sys.meta_path[:], sys.path_hooks[:] = self.hooks
        for name, (module, saved, keys, values) in self.globals.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
            now = vars(module)
            # the same names in the same order, each bound to the same object (compared at C speed: ~120 modules)
            if len(now) != len(keys) or not all(map(operator.is_, now.values(), values)) or list(now) != keys:
                for k in [k for k in now if k not in saved]:
                    del now[k]
                now.update(saved)
        for lg in self._all_loggers():
            saved = self.loggers.get(lg)
            if saved is None:  # a logger a run made: it never logs again, and nothing of it is passed on
                lg.handlers, lg.filters, lg.disabled = [], [], True
                continue
            lg.handlers, lg.level, lg.propagate, lg.disabled, lg.filters = \
                list(saved[0]), saved[1], saved[2], saved[3], list(saved[4])
        self.warnings.filters[:] = self.filters
        self.warnings._filters_mutated()
        sys.setrecursionlimit(self.limit)
        sys.path[:] = self.path
        os.chdir(self.cwd)
        os.umask(self.umask)
        for r, limits in self.rlimits.items():
            if self.resource.getrlimit(r) != limits:
                try:
                    self.resource.setrlimit(r, limits)
                except (OSError, ValueError):  # a hard limit a run lowered cannot be raised again
                    clean = False
        (gc.enable if self.gc[0] else gc.disable)()
        gc.set_threshold(*self.gc[1])
        sys.stdout, sys.stderr, sys.stdin = sys.__stdout__, sys.__stderr__, sys.__stdin__
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # off the last run's files
            os.dup2(devnull, fd)
        os.close(devnull)
        for k in [k for k in os.environ if k not in self.environ]:
            del os.environ[k]
        for k, v in self.environ.items():
            if os.environ.get(k) != v:
                os.environ[k] = v
        for fd in set(os.listdir("/proc/self/fd")) - self.fds:
            if int(fd) not in self.keep:
                with contextlib.suppress(OSError):
                    os.close(int(fd))
        return clean


class _Saved:
    """An object's attributes as they were, put back by :meth:`restore`: each name bound to the same object
    again, each container among them (list, dict, set and their subclasses) to a fresh copy of what it held,
    and each of ``deep`` to a fresh deep copy (pylint's ``LinterStats``, which a run adds to in place)."""

    def __init__(self, obj: Any, deep: Sequence[str] = ()) -> None:
        self.obj = obj
        self.deep = {k: copy.deepcopy(getattr(obj, k)) for k in deep if hasattr(obj, k)}
        self.attrs = {k: copy.copy(v) if isinstance(v, (list, dict, set)) else v
                      for k, v in vars(obj).items() if k not in self.deep}

    def restore(self) -> None:
        now = vars(self.obj)
        now.clear()
        now.update({k: copy.copy(v) if isinstance(v, (list, dict, set)) else v for k, v in self.attrs.items()})
        now.update({k: copy.deepcopy(v) for k, v in self.deep.items()})


class _PylintGuard:
    """What a pylint run in a reused worker shares with the runs after it, taken when the worker is forked and
    put back after each run (:meth:`put_back`), so that each run starts where a fresh fork of the helper would.

    - astroid's module cache: the modules a run added (its own files, library modules first imported by its
      code) are dropped; the trees the helper built (the warm-up's library modules) stay, as a fork inherits them;
    - astroid's and pylint's caches keyed by nodes (the inference cache and tips, every ``lru_cache`` of the two
      packages: node lookups, ``safe_infer``, path lookups, spec finders), emptied;
    - each configured linter, its reporter, its configuration and its checkers: their attributes as they were
      (:class:`_Saved`; the statistics and the messages a run adds to in place, fresh copies).

    What cannot be put back ends the worker after the run: a run that changed a tree the runs share (astroid adds
    what code assigns to an attribute of a library object to that object's tree: ``collections.Counter.x = 1``
    gives its ``Counter`` class a local ``x``, which a later run's inference would see), noticed when it happens
    (``set_local`` on a shared tree, ``delayed_assattr`` that put the run's node in a shared tree's
    ``locals``/``instance_attrs``); a linter whose message states a run changed; an inference left unfinished;
    a module the run imported for the first time; a fatal or usage status (pylint's 1 and 32 bits: an astroid
    error or a crash, where a checker's visit may not have been left)."""

    def __init__(self) -> None:
        import functools
        import importlib

        import astroid
        from astroid.builder import AstroidBuilder
        from astroid.nodes.scoped_nodes.mixin import LocalsDictNodeNG

        #: the modules imported when the worker was forked
        self.modules = set(sys.modules)
        self.manager = astroid.MANAGER
        self.keys = set(self.manager.astroid_cache)
        #: the trees every run shares (by identity: a tree a run built is never one of them)
        self.shared = {id(m) for m in self.manager.astroid_cache.values()}
        self.changed = False
        # the module (``astroid.inference_tip`` is also the name of a function astroid exports)
        self.tips = importlib.import_module("astroid.inference_tip")
        self.lru = [obj for name, mod in list(sys.modules.items()) if mod is not None
                    and name.partition(".")[0] in ("astroid", "pylint")
                    for holder in (mod, *(v for v in vars(mod).values() if isinstance(v, type)))
                    for obj in list(vars(holder).values()) if isinstance(obj, functools._lru_cache_wrapper)]
        self.saved: list[_Saved] = []
        self.states: list[tuple[Any, dict[str, bool]]] = []  # each linter's message states, which must not change
        for linter in (v for v in _PREPARED.values() if v is not None):
            self.saved += [_Saved(linter, deep=("stats",)), _Saved(linter.reporter), _Saved(linter.config),
                           *(_Saved(c) for c in linter.get_checkers() if c is not linter)]
            self.states.append((linter, dict(linter._msgs_state)))
        guard = self
        set_local, delayed_assattr = LocalsDictNodeNG.set_local, AstroidBuilder.delayed_assattr

        def guarded_set_local(scope: Any, name: str, stmt: Any) -> None:
            if not guard.changed and id(scope.root()) in guard.shared:
                guard.changed = True
            set_local(scope, name, stmt)

        def guarded_delayed_assattr(builder: Any, node: Any) -> None:
            delayed_assattr(builder, node)
            if not guard.changed:
                guard.changed = guard._assigned_in_shared(node)

        LocalsDictNodeNG.set_local = guarded_set_local
        AstroidBuilder.delayed_assattr = guarded_delayed_assattr

    def _assigned_in_shared(self, node: Any) -> bool:
        """Whether ``delayed_assattr`` put ``node`` (``x.attr = ...`` of the run's code) in a shared tree: the
        objects ``x`` infers to (cached: the inference it just did) and the classes of instances among them."""
        try:
            for inferred in node.expr.infer():
                for target in (inferred, getattr(inferred, "_proxied", None)):
                    if target is None or id(target.root()) not in self.shared:
                        continue
                    for table in (getattr(target, "instance_attrs", None), getattr(target, "locals", None)):
                        if isinstance(table, dict) and any(n is node for n in table.get(node.attrname, ())):
                            return True
        except Exception:  # noqa: BLE001 - where the inference cannot be repeated, it may have added: end
            return True
        return False

    def put_back(self, code: int) -> bool:
        """After a run that exited with ``code``: put back what it shares; False when the worker must end."""
        cache = self.manager.astroid_cache
        for name in [n for n in cache if n not in self.keys]:
            del cache[name]
        _empty_astroid_caches(self.lru)
        unfinished = bool(self.tips._CURRENTLY_INFERRING)
        self.tips._CURRENTLY_INFERRING.clear()
        states = all(linter._msgs_state == state for linter, state in self.states)
        for saved in self.saved:
            saved.restore()
        # a module first imported in the run (astroid imports some to build their trees): the worker drops it
        # (:class:`_State`), and a later import would be a second copy beside objects the first one made
        imported = any(m not in self.modules for m in sys.modules)
        return (not self.changed and not unfinished and states and not imported and code >= 0
                and not code & (1 | 32))


def _fds_of(data: dict[str, Any]) -> int:
    """The descriptors a request carries: a run's stdout and stderr files and its status pipe; a request of
    several runs (``{"runs": [...]}``), each run's stdout and stderr, the file the exit statuses go to, and the
    status pipe."""
    runs = data.get("runs")
    return 2 * len(runs) + 2 if isinstance(runs, list) else 3


def _receive(sock: socket.socket, min_fds: int = 3) -> tuple[dict[str, Any], list[int]] | None:
    """A request and its descriptors (``min_fds`` at least: 2 in a worker, which gets them without the status
    pipe); None at the socket's end or for anything malformed."""
    fds: list[int] = []
    try:
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, _MAX_FDS)
        while head and len(head) < _HEADER.size:
            more = sock.recv(_HEADER.size - len(head))
            if not more:
                return None
            head += more
        if not head:
            return None
        (n,) = _HEADER.unpack(head)
        if n > _MAX_REQUEST or len(fds) < min_fds:
            return None
        body = b""
        while len(body) < n:
            more = sock.recv(min(n - len(body), 1 << 20))
            if not more:
                return None
            body += more
        data = json.loads(body)
        if not isinstance(data, dict) or _fds_of(data) - (3 - min_fds) != len(fds):
            return None
        return data, fds
    except (OSError, ValueError):
        return None


def _write(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:  # the caller gave up on this run
        pass


def _reap(status: dict[int, int], worker: "_WorkerSlot | None" = None) -> None:
    while status or (worker is not None and worker.exited):
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if worker is not None:
            worker.reaped(pid)
        fd = status.pop(pid, None)
        if fd is not None:  # a run's child, or the worker that was running a run: how it ended is the run's status
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
        for f in _HELPER_ONLY:  # the worker's socket: a child holding it would keep a retired worker alive
            with contextlib.suppress(OSError):
                os.close(f)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        if "runs" in data:
            code = _children(data["runs"], fds)
        else:
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            for f in fds:
                os.close(f)
            # sys.stdout and sys.stderr stay the interpreter's own objects (empty: the helper never writes to
            # them), now writing to the run's files: a tool that pickles its streams (pylint --jobs) finds what
            # it expects
            code = _child(data)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF if code >= 0 else 1)
    return 0  # unreachable: os._exit


def _children(runs: list[dict[str, Any]], fds: list[int]) -> int:
    """Several runs one after the other in this one child (one fork instead of one per run: the fork and exit
    of the helper cost more than a small batch's analysis, issue 38). Run ``k`` writes to ``fds[2k]`` and
    ``fds[2k + 1]`` as a run of its own writes to its stdout and stderr; its exit status goes, one line per
    run, to ``fds[-2]``. Before each run, what a run can leave behind in the process and a later one would
    see is put back as the helper had it: the module path, the recursion limit (the in-Python analysers raise
    it), the alarm and its handler, the standard streams, the working directory (the environment each run
    sets for itself). Runs whose result could depend on such state come last (the caller puts pylint last:
    the others hold nothing of astroid's)."""
    os.close(fds[-1])  # the status pipe is the helper's to write (the exit status of this child)
    return _runs(runs, fds[:-1])


def _runs(runs: list[dict[str, Any]], fds: list[int]) -> int:
    """:func:`_children`'s runs, with ``fds`` without the status pipe (each run's stdout and stderr, then the
    file of the exit statuses): 0 when every run ended with a status written there, 1 otherwise."""
    base_path = list(sys.path)
    base_limit = sys.getrecursionlimit()
    base_alarm = (signal.getsignal(signal.SIGALRM), signal.getsignal(signal.SIGPROF))
    base_cwd = os.getcwd()
    try:
        codes = _each(runs, fds, base_path, base_limit, base_alarm, base_cwd)
    except BaseException:  # noqa: BLE001 - said where the caller reads it; no status: the runs go apart
        import traceback

        os.write(fds[1], traceback.format_exc().encode("utf-8", "replace"))
        return 1
    os.write(fds[-1], ("\n".join(map(str, codes)) + "\n").encode())
    return 0


def _each(runs: list[dict[str, Any]], fds: list[int], base_path: list[str], base_limit: int, base_alarm: Any,
          base_cwd: str) -> list[int]:
    codes = []
    for k, run in enumerate(runs):
        sys.path[:] = base_path
        sys.setrecursionlimit(base_limit)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, base_alarm[0])
        signal.signal(signal.SIGPROF, base_alarm[1])
        os.chdir(base_cwd)
        os.dup2(fds[2 * k], 1)
        os.dup2(fds[2 * k + 1], 2)
        # streams of its own, as the interpreter's on the same descriptors (a run may close its stdout:
        # bandit's report does)
        sys.stdout, sys.stderr = (io.open(fd, "w", buffering=1 if std.line_buffering else -1,
                                          encoding=std.encoding, errors=std.errors, closefd=False)
                                  for fd, std in ((1, sys.__stdout__), (2, sys.__stderr__)))
        try:
            code = _child(run)
        finally:
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                try:
                    stream.flush()
                except (OSError, ValueError, AttributeError):
                    pass
        codes.append(code & 0xFF if code >= 0 else 1)
    return codes


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
    from astroid.interpreter._import.spec import _find_spec, _is_setuptools_namespace

    _empty_astroid_caches((astroid_manager._cache_normalize_path_, astroid_manager._has_init,
                           astroid_manager.cached_os_path_isfile, _find_spec, _is_setuptools_namespace))


def _empty_astroid_caches(lru_caches: Any) -> None:
    """Empty what astroid keeps of a run beside its module cache: the file lookups, the inference cache and tips,
    the spec finders' caches and ``lru_caches`` (after the warm-up, those keyed by paths; after a worker's run,
    every one of astroid and pylint: :class:`_PylintGuard`)."""
    import astroid
    from astroid.context import _invalidate_cache
    from astroid.inference_tip import clear_inference_tip_cache
    from astroid.interpreter._import import spec as astroid_spec

    astroid.MANAGER._mod_file_cache.clear()
    clear_inference_tip_cache()
    _invalidate_cache()
    for lru in lru_caches:
        lru.cache_clear()
    for finder in astroid_spec._SPEC_FINDERS:
        finder.find_module.cache_clear()


# ------------------------------------------------------------------------------ pylint, configured once
#: the options a configured linter is kept for: those :class:`~rewardlang.runtime.tools.pylint.PylintTool`
#: passes. A run with any other option (or a configuration file that is not empty) runs ``python -m pylint``.
_PYLINT_OPTIONS = ("--output-format=", "--persistent=", "--score=", "--reports=", "--jobs=1", "--disable=",
                   "--enable=")
#: environment variables pylint reads while it is configured (colour handling of its reporters)
_PYLINT_ENV = ("NO_COLOR", "FORCE_COLOR", "TERM")
#: configured linters by their options and values of _PYLINT_ENV (as JSON); None: that option set could not be prepared
_PREPARED: dict[str, Any] = {}
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
    # a string, so that the request a worker gets (as JSON) names the same linter
    key = json.dumps([list(opts), [env.get(k) for k in _PYLINT_ENV]])
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
    # The checkers a run needs (the linter and those with a message on), found here once: pylint finds them at
    # the start of every check by sorting its ~45 checkers with their slow comparisons (~6 ms of a one-file run's
    # ~27 ms of CPU, issue 38), and for a linter configured once they are the same in every run. What they
    # depend on is what the run's `check` sets first (`initialize`: the messages this Python cannot emit turned
    # off, the same each time) and the options; `prepare_checkers` also turns the reports off (`--reports=n`),
    # which each run inherits from here. Every run gets a fresh copy of the list, as pylint's own call returns.
    linter.initialize()
    needed = linter.prepare_checkers()
    linter.prepare_checkers = lambda: list(needed)  # type: ignore[method-assign]
    _WALKERS[id(linter)] = _walker_template(linter, needed)
    return linter


#: what pylint's walker adds for each checker of a configured linter (by ``id`` of a linter in :data:`_PREPARED`,
#: which lives as long as the helper): ``(messages' state, {id(checker): (checker, visits, leaves)})``
_WalkerTables = tuple[dict[str, bool], dict[int, tuple[Any, list[Any], list[Any]]]]
_WALKERS: dict[int, _WalkerTables] = {}


def _walker_template(linter: Any, checkers: list[Any]) -> _WalkerTables:
    """What ``ASTWalker.add_checker`` adds to the walker's tables for each of ``checkers`` on ``linter``:
    ``(event, method)`` pairs of visits and of leaves, computed once. Each run of pylint computes them again at
    the start of its check (``_astroid_module_checker``: ``dir()`` of each of ~30 checkers and a message lookup
    per visit method, ~6 ms of a one-file run's ~17 ms of CPU, issue 38). What they depend on is fixed for a
    configured linter: the checker (its class: no checker of pylint 4.1 gives itself a ``visit_`` or ``leave_``
    method in ``open()``), the message store and, for each method's messages, whether they are on in the
    linter's state without a line (``_msgs_state``: a run whose state differs computes its own). Also puts
    :class:`_PreparedWalker` in pylint's place (in this helper, whose only work is its runs)."""
    from pylint.lint import pylinter
    from pylint.utils.ast_walker import ASTWalker

    adds = {}
    for checker in checkers:
        walker = ASTWalker(linter)
        walker.add_checker(checker)
        adds[id(checker)] = (checker, [(e, m) for e, ms in walker.visit_events.items() for m in ms],
                             [(e, m) for e, ms in walker.leave_events.items() for m in ms])
    pylinter.ASTWalker = _prepared_walker_class()
    return dict(linter._msgs_state), adds


def _prepared_walker_class() -> type:
    """pylint's ``ASTWalker`` whose ``add_checker`` adds what :func:`_walker_template` computed for that checker
    of its linter (the same pairs, in the same order per event, as pylint's own would add); a checker or linter
    not computed, or a linter whose messages' state changed since, goes through pylint's own."""
    global _PREPARED_WALKER
    if _PREPARED_WALKER is not None:
        return _PREPARED_WALKER
    from pylint.utils.ast_walker import ASTWalker

    class _PreparedWalker(ASTWalker):  # type: ignore[misc,valid-type]
        def __init__(self, linter: Any) -> None:
            super().__init__(linter)
            t = _WALKERS.get(id(linter))
            self._adds = t[1] if t is not None and t[0] == linter._msgs_state else None

        def add_checker(self, checker: Any) -> None:
            add = self._adds.get(id(checker)) if self._adds is not None else None
            if add is None or add[0] is not checker:
                super().add_checker(checker)
                return
            for event, method in add[1]:
                self.visit_events[event].append(method)
            for event, method in add[2]:
                self.leave_events[event].append(method)

    _PREPARED_WALKER = _PreparedWalker
    return _PreparedWalker


_PREPARED_WALKER: type | None = None


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
