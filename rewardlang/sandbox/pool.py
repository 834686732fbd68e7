"""Long-lived sandbox slots and the pool that feeds them.

A :class:`Slot` is one sandboxed worker process (see ``_worker.py``) that forks one process per program.
A :class:`SlotPool` owns one slot per core, each served by its own thread (the slot is also *spawned* from
that thread: ``--die-with-parent`` follows the spawning thread). A slot that dies, hangs past its hard
deadline or fails to clean up is killed (with every process of its uid) and respawned; the request it was
serving comes back as an infrastructure failure, never as a verdict.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import struct
import subprocess
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Sequence, TypeVar

from rewardlang.outputs import interrupts_deferred
from rewardlang.processes import kill_group
from rewardlang.sandbox import _worker, cgroups
from rewardlang.sandbox.config import LEVELS, SandboxConfig
from rewardlang.sandbox.launch import (
    LaunchSpec,
    LevelUnavailable,
    UidLease,
    build_launch,
    kill_uid,
    processes_of_uid,
)
from rewardlang.sandbox.raw import RawResult, RawRun

K = TypeVar("K")

__all__ = ["Slot", "SlotPool", "SlotFailure", "request_memory", "unpack_run"]

_PAGE = os.sysconf("SC_PAGE_SIZE")


class SlotFailure(RuntimeError):
    """The slot died, hung or misbehaved: an infrastructure failure."""


def request_memory(req: dict[str, Any] | bytes | tuple[bytes, ...]) -> int:
    """The memory budget (bytes) of a request, dict or encoded JSON (a tuple: the request's frames, the first
    being the program's). The runner appends ``limits`` last, so the encoded form is read from its tail (a
    JSON string cannot contain the unescaped bytes ``"limits": ``, so the last occurrence is the key);
    anything else is parsed whole."""
    if isinstance(req, tuple):
        req = req[0]
    if isinstance(req, dict):
        return int(req["limits"]["mem"])
    # A batch sends the same header (steps, environment, limits) with every program of a language: its
    # budget is parsed once (a bytes key: equal content, the same answer; issue 20's per-program cost)
    mem = _MEM_OF.get(req)
    if mem is None:
        mem = _parse_memory(req)
        if len(_MEM_OF) >= 256:
            _MEM_OF.clear()
        _MEM_OF[req] = mem
    return mem


_MEM_OF: dict[bytes, int] = {}


def _parse_memory(req: bytes) -> int:
    i = req.rfind(b'"limits": ')
    if i >= 0 and req.endswith(b"}"):
        try:
            lim = json.loads(req[i + 10:-1])
            if isinstance(lim, dict) and "mem" in lim and "cpu" in lim:
                return int(lim["mem"])
        except ValueError:
            pass
    return int(json.loads(req)["limits"]["mem"])


# the response heads are ASCII JSON written by the worker's own encoder: parsed by the decoder directly (the
# module's ``loads`` adds an encoding detection and a wrapper per call, three calls per Bash program)
_DECODER = json.JSONDecoder()
_RUN_TAG = bytes((_worker.RUN_TAG,))


def _loads(data: bytes) -> Any:
    return _DECODER.decode(data.decode("utf-8", "surrogatepass"))


def unpack_run(data: bytes) -> dict[str, Any]:
    """A run's binary head (``_worker.run_frame``) as the JSON head's dict, ``{"run": {...}}``. Raises
    ``ValueError`` on a frame of the wrong size or an unknown reason code."""
    try:
        (_tag, code, reason, cpu, wall, idle, flags, oom, t0, t1, t2, t3, res_len,
         out_len) = _worker.RUN_STRUCT.unpack(data)
        why = _worker.RUN_REASONS[reason]
    except (struct.error, IndexError) as e:
        raise ValueError(f"malformed binary run head: {e}") from None
    return {"run": {"exit": code, "reason": why, "cpu": cpu, "wall": wall, "idle": idle,
                    "setup_failed": bool(flags & 1), "clean": bool(flags & 2), "recycle": bool(flags & 4),
                    "oom": oom, "exec_failed": bool(flags & 8), "not_built": bool(flags & 64),
                    "spawn": "clone" if flags & 32 else "fork",
                    "t": [t0, t1, t2, t3], "res_len": res_len, "out_len": out_len, "last": bool(flags & 16)}}


def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    chunks = []
    while n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SlotFailure("slot did not answer in time (hung or frozen)")
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise SlotFailure("slot exited")
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


class _Reader:
    """Reads one response: as much as has arrived per ``read`` (the worker writes each run's frame and its
    bytes with one ``writev``, so a run usually costs one ``select`` and one ``read``, not one per field). It
    lives for one request only: the worker writes nothing past a response's last frame until the next
    request, so bytes left over at the end are a protocol violation (:meth:`done`)."""

    def __init__(self, fd: int, deadline: float) -> None:
        self.fd, self.deadline = fd, deadline
        self.buf = bytearray()

    def take(self, n: int) -> bytes:
        while len(self.buf) < n:
            before = time.monotonic()
            left = self.deadline - before
            if left <= 0:
                raise SlotFailure("slot did not answer in time (hung or frozen)")
            # waits of at most 1 s, so that time in which this thread did not run at all (its process stopped
            # from outside with the slot, then continued) is seen and moves the deadline: the worker's clocks
            # leave it out too (_worker.RunClock), and a stop must not turn into a dead slot (a masked row)
            asked = min(left, 1.0)
            r, _, _ = select.select([self.fd], [], [], asked)
            late = time.monotonic() - before - asked
            if late > _worker.STALL_S:
                self.deadline += late
            if not r:
                continue
            b = os.read(self.fd, max(n - len(self.buf), 1 << 16) if n - len(self.buf) < 1 << 20 else 1 << 20)
            if not b:
                raise SlotFailure("slot exited")
            self.buf += b
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def done(self) -> None:
        if self.buf:
            raise SlotFailure("bytes past the end of the worker's response")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _frames(req: dict[str, Any] | tuple[bytes, ...]) -> tuple[bytes, ...]:
    """A request as the frames the worker reads: the header (JSON: mode, limits, tests' calls or stdin, no
    program text), the program's text (UTF-8, its own frame: the worker reads it into a mapping it unmaps
    after the request, never into an object a later program could find in its inherited memory), then, with
    judged tests, their frame (read by the judge process alone). A dict with ``code`` is split here."""
    if isinstance(req, tuple):
        return req
    d = dict(req)
    code = d.pop("code", None)
    head = json.dumps(d).encode("utf-8", "surrogatepass")
    if d.get("op", "run") != "run":
        return (head,)
    return (head, (code or "").encode("utf-8", "surrogatepass"))


def _remaining(req: dict[str, Any] | tuple[bytes, ...], done: int) -> tuple[bytes, ...] | None:
    """The request for the stdin/stdout cases after the first ``done`` (None: not stdio, or none left)."""
    frames = _frames(req)
    if len(frames) != 2:  # a call-mode request with judged tests: one execution, nothing to resume
        return None
    d = json.loads(frames[0])
    inputs = d.get("inputs") or []
    if d.get("mode") != "stdio" or done >= len(inputs):
        return None
    d["inputs"] = inputs[done:]
    return (json.dumps(d).encode("utf-8", "surrogatepass"), frames[1])


class Slot:
    """One long-lived sandbox worker at a fixed isolation level."""

    def __init__(self, config: SandboxConfig, level: str, index: int = 0) -> None:
        self.config = config
        self.level = level
        self.index = index
        self.lease: UidLease | None = None
        self.spec: LaunchSpec | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.own_pids: list[int] = []
        self.starting = False
        self.starts = 0
        self.cgroup: cgroups.SlotCgroup | None = None
        self._statm = -1   # /proc/<worker>/statm, read before each request (the memory limit's baseline)

    @property
    def uid(self) -> int | None:
        return self.lease.uid if self.lease is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the worker (by exec) and wait for its ready report. Raises LevelUnavailable/SlotFailure."""
        self.kill()
        self.starting = True
        try:
            self._start()
        except BaseException:
            # an interrupt (Ctrl-C, SIGTERM) while the worker starts, in the thread that started it: nothing
            # it started may outlive the command (the failures above have killed it already; kill is idempotent)
            self.kill()
            raise
        finally:
            self.starting = False

    def _start(self) -> None:
        if self.lease is None and os.geteuid() == 0 and self.level != "limits":
            self.lease = UidLease.acquire(self.config.uid_base, self.config.uid_count)
        fds = None
        sup = cgroups.support() if self.config.cgroups else None
        if sup is not None and sup.memory:
            try:
                self.cgroup = cgroups.SlotCgroup.create(sup, self.index)
                fds = self.cgroup.worker_fds()
            except OSError as e:  # the machine gives cgroups but not now: an infrastructure failure
                self._drop_cgroup()
                raise SlotFailure(f"cannot set up the slot's memory cgroup: {e}") from e
        spec = build_launch(self.level, self.config, self.lease, cgroup_fds=fds,
                            acct_kind=self.cgroup.acct_kind if self.cgroup is not None else None)
        errf = tempfile.TemporaryFile()
        with interrupts_deferred():  # an interrupt inside Popen would leave a worker that kill() cannot reach
            try:
                proc = subprocess.Popen(spec.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf,
                                        start_new_session=True, close_fds=True, **spec.popen)
            except OSError as e:
                spec.cleanup()
                errf.close()
                self._drop_cgroup()
                raise LevelUnavailable(f"cannot start the {self.level} slot: {e}") from e
            self.spec, self.proc = spec, proc  # recorded at once, so that kill() reaches it from here on
        spec.close_fds()
        if self.cgroup is not None:
            self.cgroup.close_fds()
        self.starts += 1
        try:
            assert proc.stdin is not None and proc.stdout is not None
            _write_all(proc.stdin.fileno(), _worker.pack_frame(json.dumps(spec.cfg).encode()))
            deadline = time.monotonic() + self.config.start_timeout
            n = struct.unpack("<I", _read_exact(proc.stdout.fileno(), 4, deadline))[0]
            info = json.loads(_read_exact(proc.stdout.fileno(), n, deadline))
        except (SlotFailure, OSError, ValueError) as e:
            self.kill()
            errf.seek(0)
            msg = errf.read(4000).decode("utf-8", "replace").strip()
            errf.close()
            raise LevelUnavailable(f"{self.level} slot failed to start: {msg or e}") from e
        errf.close()
        if not info.get("ok"):
            self.kill()
            raise LevelUnavailable(f"{self.level} slot failed to start: {info.get('error')}")
        self.info = info
        self.own_pids = self._descendants()
        if self.cgroup is not None:
            # No program exists yet: bubblewrap and the worker go into the slot's groups (their children,
            # the programs, start there and move into the program group themselves).
            try:
                self.cgroup.attach(self.own_pids)
                self._statm = os.open(f"/proc/{self.own_pids[-1]}/statm", os.O_RDONLY | os.O_CLOEXEC)
            except OSError as e:
                self.kill()
                raise SlotFailure(f"cannot move the slot into its cgroups: {e}") from e

    def prepare_memory(self, budget: int) -> int | None:
        """Before a request: the program group's limit = the worker's size + the program's budget (the
        program starts as a copy of the worker, as RLIMIT_AS counts "current size + budget"), and a fresh
        peak measurement. Returns the limit (None without a memory cgroup)."""
        if self.cgroup is None:
            return None
        vm = int(os.pread(self._statm, 64, 0).split()[0]) * _PAGE
        limit = vm + int(budget)
        self.cgroup.set_limit(limit)
        self.cgroup.reset_peak()
        return limit

    def _drop_cgroup(self) -> None:
        if self._statm >= 0:
            os.close(self._statm)
            self._statm = -1
        if self.cgroup is not None:
            self.cgroup.destroy()
            self.cgroup = None

    def request(self, req: dict[str, Any] | tuple[bytes, ...], hard_timeout: float) -> tuple[dict[str, Any],
                                                                                         list[bytes]]:
        """Send one request (a dict, or its frames: see :func:`_frames`) and read the response: a frame per
        run (its header, then its result-channel bytes, stdout and judge records), the last run's marked
        ``last``, or a final frame (no run, or the worker's error). SlotFailure on any misbehaviour (the
        caller kills the slot)."""
        # (the pool's thread has just polled the process: `alive`, one waitpid; a worker that died since
        # fails the write below or the read, a SlotFailure all the same)
        if self.proc is None or self.proc.returncode is not None:
            raise SlotFailure("slot is not running")
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            _write_all(self.proc.stdin.fileno(), b"".join(_worker.pack_frame(f) for f in _frames(req)))
        except OSError as e:
            raise SlotFailure(f"cannot write to slot: {e}") from e
        rd = _Reader(self.proc.stdout.fileno(), time.monotonic() + hard_timeout)
        runs: list[dict[str, Any]] = []
        blobs: list[bytes] = []
        while True:
            n = struct.unpack("<I", rd.take(4))[0]
            if n > 1 << 24:
                raise SlotFailure("malformed response header")
            try:
                data = rd.take(n)
                # a run's head comes as a fixed binary frame (its first byte RUN_TAG, never JSON's) or JSON
                head = unpack_run(data) if data[:1] == _RUN_TAG else _loads(data)
            except ValueError as e:
                raise SlotFailure("malformed response") from e
            run = head.get("run") if isinstance(head, dict) else None
            if not isinstance(run, dict):
                break
            runs.append(run)
            blobs.append(rd.take(int(run["res_len"])) if run["res_len"] else b"")
            blobs.append(rd.take(int(run["out_len"])) if run["out_len"] else b"")
            if "judge_len" in run:   # the judge process's records: kept beside the run, not in `blobs`
                n_j = int(run["judge_len"])
                run["judge_bytes"] = rd.take(n_j) if n_j else b""
            if run.get("last"):
                rd.done()
                return {"ok": True, "runs": runs}, blobs
        rd.done()
        if not isinstance(head, dict) or not head.get("ok"):
            raise SlotFailure(f"worker error: {head.get('error') if isinstance(head, dict) else head}")
        head["runs"] = runs
        return head, blobs

    def _descendants(self) -> list[int]:
        if self.proc is None:
            return []
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as fh:
                    todo += [int(p) for p in fh.read().split()]
            except OSError:
                pass
        return out

    def worker_pids(self) -> list[int]:
        """The slot's own long-lived processes (bwrap's monitor, the worker), as recorded when it became
        ready: no program existed then, so anything else under the slot's uid is a stray."""
        if self.starting:  # not ready yet: everything it has is its own
            return self._descendants()
        return sorted(p for p in self.own_pids if os.path.exists(f"/proc/{p}"))

    def stop_programs(self) -> None:
        """SIGKILL the programs the slot runs now (its processes besides its own long-lived ones), the innermost
        first, as the worker's own limits kill them: the worker reaps them and ends the request, and the slot stays
        whole. For a caller that was interrupted and waits for nothing (:meth:`SlotPool.close`)."""
        if self.starting:
            return
        own = set(self.own_pids)
        for pid in reversed(self._descendants()):
            if pid not in own:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def kill(self) -> None:
        """Kill the worker, every process of the slot's uid, and release host resources (not the uid)."""
        inner = [p for p in self._descendants() if self.proc is not None and p != self.proc.pid][::-1]
        proc, self.proc = self.proc, None
        if proc is not None:
            # Kill from the inside out so that each parent reaps its child: killing the outer process
            # first would orphan the sandbox's init to the host's init (a zombie under the slot's uid).
            for pid in inner:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if inner:
                try:
                    proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
            kill_group(proc)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for f in (proc.stdin, proc.stdout):
                try:
                    if f is not None:
                        f.close()
                except OSError:
                    pass
        if self.lease is not None:
            kill_uid(self.lease.uid)
        if self.spec is not None:
            self.spec.cleanup()
            self.spec = None
        self._drop_cgroup()  # every process of the slot is gone: its groups can be removed
        self.own_pids = []  # only now: until they are gone, the dying processes are still the slot's

    def close(self) -> None:
        self.kill()
        if self.lease is not None:
            self.lease.release()
            self.lease = None


class _Direct:
    """What a slot thread completes for :meth:`SlotPool.stream` in place of a Future: the two calls the
    thread makes on one (``set_running_or_notify_cancel``, ``set_result``), the result passed straight to
    ``finish(key, raw)``; ``set_result`` is called exactly once, on every path of ``_serve``."""

    __slots__ = ("cancelled", "finish", "key")

    def __init__(self, key: Any, finish: Callable[[Any, RawResult], None], cancelled: threading.Event) -> None:
        self.key, self.finish, self.cancelled = key, finish, cancelled

    def set_running_or_notify_cancel(self) -> bool:
        # the stream's caller was interrupted (Ctrl-C, SIGTERM): a request still queued is never run, so the
        # command ends once the programs already running end, not after every queued one (issue 37, item 5)
        return not self.cancelled.is_set()

    def set_result(self, raw: RawResult) -> None:
        self.finish(self.key, raw)


class SlotPool:
    """``n`` slots at one level, each served by its own thread, pulling requests from a shared queue."""

    def __init__(self, config: SandboxConfig, level: str, first: Slot | None = None) -> None:
        if level not in LEVELS:
            raise ValueError(level)
        self.config = config
        self.level = level
        n = int(config.slots or 1)
        self.slots = [first] if first is not None else []
        self.slots += [Slot(config, level, i) for i in range(len(self.slots), n)]
        self.stats: Counter[str] = Counter()
        self._queue: queue.SimpleQueue[tuple[dict[str, Any] | tuple[bytes, ...], float,
                                             Future[RawResult] | _Direct] | None] = \
            queue.SimpleQueue()
        self._closed = False
        #: a caller was interrupted (Ctrl-C, SIGTERM): close() stops the programs running, never runs one again
        self.interrupted = False
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._serve, args=(s,), name=f"rewardlang-sandbox-{i}",
                                          daemon=True) for i, s in enumerate(self.slots)]
        for t in self._threads:
            t.start()

    def _serve(self, slot: Slot) -> None:
        backoff = 0.0
        if slot.proc is not None and slot.alive:
            # the probe started it in another thread: restart here so die-with-parent follows this thread
            slot.kill()
        while True:
            item = self._queue.get()
            if item is None:
                slot.close()
                return
            req, hard_timeout, fut = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                if not slot.alive:
                    if backoff:
                        time.sleep(backoff)
                    slot.start()
                    with self._lock:
                        self.stats["slot_starts"] += 1
                runs: list[RawRun] = []
                current = req
                limit = peak = None
                rerun_after_kill = False
                while True:
                    limit = slot.prepare_memory(request_memory(current))
                    head, blobs = slot.request(current, hard_timeout)
                    peak = slot.cgroup.peak() if slot.cgroup is not None else None
                    # the runs, and in the same pass what the checks below ask of them all (one loop, not
                    # six: a cheap program's whole judging costs about as much; issue 20)
                    part = []
                    oom_kills = 0
                    setup_failed = recycle = False
                    reasons = set()
                    for i, r in enumerate(head["runs"]):
                        run = RawRun(exit=int(r["exit"]), reason=r["reason"], cpu=float(r["cpu"]),
                                     wall=float(r["wall"]), setup_failed=bool(r["setup_failed"]),
                                     clean=bool(r["clean"]), res=blobs[2 * i], out=blobs[2 * i + 1],
                                     judge=r.get("judge_bytes"), judge_info=r.get("judge"), oom=int(r.get("oom", 0)),
                                     exec_failed=bool(r.get("exec_failed")), not_built=bool(r.get("not_built")))
                        part.append(run)
                        oom_kills += run.oom
                        setup_failed = setup_failed or run.setup_failed
                        recycle = recycle or bool(r.get("recycle")) or not r.get("clean", True)
                        reasons.add(run.reason)
                    del blobs
                    if oom_kills:
                        with self._lock:
                            self.stats["oom_kills"] += oom_kills
                    # Infrastructure outcomes come only from channels no program can write: the set-up byte
                    # the child sends and closes before the program's first instruction (never the exit
                    # status), the worker's own protocol, and the machine's load (our clock, not the
                    # program's).
                    if setup_failed:
                        raise SlotFailure("the program's process could not be set up")
                    if "overload" in reasons:
                        break
                    if "killed" in reasons:
                        # A SIGKILL that neither the sandbox sent nor the program's limits explain (see
                        # _worker.run_once): first taken for an outside event (the host's OOM killer, an
                        # operator), so the whole request runs again, once, on a fresh slot, and that run's
                        # verdict stands. A second one is the program's own doing (kill -9 of itself): its
                        # failure, never a mask, and never a third run.
                        with self._lock:
                            self.stats["outside_kills" if not rerun_after_kill else "kills_again_on_rerun"] += 1
                        if not rerun_after_kill and not self.interrupted:  # (interrupted: stopped by us)
                            rerun_after_kill = True
                            slot.kill()
                            slot.start()
                            with self._lock:
                                self.stats["slot_starts"] += 1
                                self.stats["kill_reruns"] += 1
                            runs, current = [], req
                            continue
                    runs += part
                    if not recycle:
                        break
                    # the verdict stands; the program left too much to delete (or a process we could not
                    # reap in time): replace the slot, so the next program starts on a fresh one
                    with self._lock:
                        self.stats["slot_recycles"] += 1
                    slot.kill()
                    # Stdin/stdout cases the worker did not get to (it stops on a slot it cannot make
                    # fresh) run on a fresh slot: a case that did not run is never counted as passed, and
                    # the program cannot end its own tests early by breaking the clean-up.
                    rest = None if runs[-1].reason in ("cpu", "wall") else _remaining(req, len(runs))
                    if rest is None or self.interrupted:
                        break
                    with self._lock:
                        self.stats["stdio_resumed"] += 1
                    slot.start()
                    with self._lock:
                        self.stats["slot_starts"] += 1
                    current = rest
                backoff = 0.0
                if "overload" in reasons:
                    with self._lock:
                        self.stats["infra_failures"] += 1
                        self.stats["overload"] += 1
                    fut.set_result(RawResult(None, infra="machine overloaded: the program got too little CPU "
                                                         "to reach either limit within the hard wall time"))
                    continue
                fut.set_result(RawResult(runs, memory_peak=peak, memory_limit=limit))
            except (SlotFailure, LevelUnavailable, OSError, ValueError, KeyError) as e:
                with self._lock:
                    self.stats["infra_failures"] += 1
                slot.kill()
                backoff = min(2.0, backoff * 2 or 0.05)
                fut.set_result(RawResult(None, infra=f"{type(e).__name__}: {e}"))
            except BaseException as e:  # never leave a caller waiting
                slot.kill()
                fut.set_result(RawResult(None, infra=f"{type(e).__name__}: {e}"))

    def submit(self, req: dict[str, Any] | tuple[bytes, ...], hard_timeout: float) -> Future[RawResult]:
        fut: Future[RawResult] = Future()
        if self._closed:
            fut.set_result(RawResult(None, infra="sandbox closed"))
            return fut
        self._queue.put((req, hard_timeout, fut))
        return fut

    def run(self, reqs: Sequence[tuple[dict[str, Any], float]]) -> list[RawResult]:
        futs = [self.submit(r, t) for r, t in reqs]
        return [f.result() for f in futs]

    def stream(self, requests: Iterable[tuple[K, Any, float]], settle: Callable[[K, RawResult], None]) -> None:
        """Run ``(key, request, hard_timeout)`` items and call ``settle(key, raw)`` for each as it completes.

        ``settle`` runs on the slot thread that completed the request, as soon as it completes, one call at a
        time (under a lock): a caller that judges and drops each raw result in ``settle`` holds no program
        output past its judging, whatever the number of requests (``pool.run`` keeps them all). The calling
        thread only feeds the queue, at most ``max(64, 4 * slots)`` requests ahead (a lazy ``requests`` is
        never read whole), and sleeps until every request is settled: it wakes about once per half window,
        not once per program (a thread hand-off costs a cheap program's judging as much again: issue 20).
        The first exception ``settle`` raises is raised here once every request has ended.
        """
        window = max(64, 4 * max(1, len(self.slots)))
        low = window // 2
        lock = threading.Lock()
        room = threading.Condition(lock)
        state = {"left": 0, "fed": False}
        errors: list[BaseException] = []

        def finish(key: K, raw: RawResult) -> None:
            with lock:
                try:
                    if not errors:
                        settle(key, raw)
                except BaseException as e:  # noqa: BLE001 (raised in the caller's thread, below)
                    errors.append(e)
                state["left"] -= 1
                # the caller waits for room while feeding (woken at the low mark), then for the end
                if state["left"] == 0 or (not state["fed"] and state["left"] == low):
                    room.notify()

        cancelled = threading.Event()
        try:
            for key, req, hard in requests:
                with lock:
                    while state["left"] >= window:
                        room.wait()
                    state["left"] += 1
                # no Future: the slot thread hands the result straight to finish (a Future's condition, locks
                # and callback list cost a cheap program's judging about as much again; issue 20)
                if self._closed:
                    finish(key, RawResult(None, infra="sandbox closed"))
                else:
                    self._queue.put((req, hard, _Direct(key, finish, cancelled)))
            with lock:
                state["fed"] = True
                while state["left"] > 0:
                    room.wait()
        except BaseException as exc:  # the caller is gone (an interrupt): the requests still queued never run
            cancelled.set()
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, SIGTERM: close() stops the programs running too
                self.interrupted = True
            raise
        if errors:
            raise errors[0]

    def uids(self) -> list[int]:
        return [s.uid for s in self.slots if s.uid is not None]

    def stray_processes(self) -> list[int]:
        """Processes under the slots' uids that are not the slots' own long-lived processes.

        Zombies whose parent is outside the slots are left out: after a slot is killed from outside, its
        processes can be orphaned to the host's init, which reaps them in its own time; they run nothing
        and hold nothing but a pid."""
        own = {p for s in self.slots for p in s.worker_pids()}
        out = []
        for uid in self.uids():
            for pid in processes_of_uid(uid):
                if pid in own:
                    continue
                try:
                    with open(f"/proc/{pid}/stat", "rb") as fh:
                        data = fh.read()
                    fields = data[data.rfind(b")") + 2:].split()
                    if fields[0] == b"Z" and int(fields[1]) not in own:
                        continue
                except (OSError, IndexError, ValueError):
                    continue
                out.append(pid)
        return sorted(out)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        if self.interrupted:  # nobody waits for the programs running: they end now, not at their limits
            deadline = time.monotonic() + 5.0  # (a slot thread may start one more it had taken: stopped too)
            while any(t.is_alive() for t in self._threads) and time.monotonic() < deadline:
                for slot in self.slots:
                    slot.stop_programs()
                for t in self._threads:
                    t.join(timeout=0.02)
        for t in self._threads:
            t.join(timeout=15)
