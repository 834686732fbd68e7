"""Per-slot control groups: the memory budget across all of a program's processes, and a fixed CPU weight.

``RLIMIT_AS`` is per process and counts only mappings: four forked children of 100 MiB each, or a
``memfd`` that is written but never mapped, escape it. A memory cgroup counts every page the program's
processes are charged for (anonymous memory, shmem/tmpfs files in ``/tmp`` and ``/dev/shm``, memfds, page
cache they bring in or dirty, pipe buffers, page tables), whichever process holds it.

Layout (created by the trusted side, as root, directly under the trainer's own cgroup, or the nearest
cgroup-v2 ancestor that can delegate the memory controller)::

    <base>/rewardlang-sandbox-<trainer pid>-<slot>-<n>/        no processes (cgroup v2: "no internal processes")
        worker/      bubblewrap's monitor and the worker, moved in once the slot is ready
        prog/        each program's process moves itself in right after fork (fd passed to the worker):
                     memory limit = the worker's size + the program's budget, swap included (v1 memsw)
                     or none (v2 memory.swap.max 0); its OOM-kill counter tells the worker a kill happened

The memory limit is on ``prog`` alone, so the kernel's OOM killer, when the budget is hit, can only choose
among the program's processes: the worker (and bubblewrap) sit in a sibling cgroup and are never victims;
whatever a program leaves charged (tmpfs files until the worker empties ``/tmp``) cannot make the worker's
own allocations fail either.

CPU: the slot is in a cgroup of its own in the cpu controller with the default weight (v1 ``cpu.shares``
1024, v2 ``cpu.weight`` 100), a direct child of the trainer's cpu cgroup: each slot competes like one
process (under a common parent group, all slots together would get the CPU of one process: measured here,
half the programs per second with two slots on a loaded machine). Autogroup (``/proc/<pid>/autogroup``, whose nice a dumpable program can set
to 19) applies only to tasks of the root task group, so it no longer changes how much CPU a program gets,
and the "overload" decision of the worker cannot be provoked by the program.

Where neither cgroup v1 nor v2 memory can be written (not root, read-only cgroupfs, no controller), the
sandbox keeps ``RLIMIT_AS`` and the program filter also denies ``memfd_create``; :func:`support` says which
accounting is in force (``rewardlang doctor`` shows it).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
import time
from dataclasses import dataclass, field

__all__ = ["CgroupError", "CgroupSupport", "SlotCgroup", "parse_oom_kills", "support"]

log = logging.getLogger("rewardlang.sandbox")

GROUP = "rewardlang-sandbox"
ENV = "REWARDLANG_SANDBOX_CGROUPS"  # "off": never use cgroups (the documented fallback)


UNLIMITED = 1 << 62
FD_MIN = 64  # the fds handed to the worker are at least this (see SlotCgroup._high)


class CgroupError(OSError):
    """A slot's cgroup could not be created or configured (an infrastructure failure)."""


@dataclass(frozen=True)
class CgroupSupport:
    """What this machine gives: ``memory`` is ``"cgroup-v1"``, ``"cgroup-v2"`` or ``None`` (fallback:
    ``RLIMIT_AS`` per process and ``memfd_create`` denied); ``cpu`` likewise for the fixed CPU weight."""

    memory: str | None
    memory_base: str | None = None
    cpu: str | None = None
    cpu_base: str | None = None
    reasons: tuple[str, ...] = ()
    #: where a program's CPU time is read whole (its self-reaped children included, see :attr:`SlotCgroup.acct`):
    #: ``"prog"`` (the program group's own counter: v2 ``cpu.stat``, or v1 ``cpuacct`` mounted with ``memory``),
    #: ``"slot"`` (v1 ``cpuacct`` elsewhere: a group of the whole slot, from which the worker subtracts its own
    #: and the judge process's time), None (no such counter: the worker's walk of ``/proc`` alone)
    acct: str | None = None
    #: the ``cpuacct`` hierarchy's base when it is mounted apart from ``cpu`` (v1); None otherwise
    acct_base: str | None = None

    @property
    def accounting(self) -> str:
        """One line for ``rewardlang doctor``."""
        if self.memory:
            return (f"{self.memory} memory controller per slot (groups {GROUP}-* under {self.memory_base}): every process, tmpfs, "
                    "memfd and page cache of a program counts against its budget")
        return "RLIMIT_AS per process (no writable memory cgroup); memfd_create denied"

    def as_dict(self) -> dict[str, object]:
        return {"memory_accounting": self.memory or "rlimit", "memory_cgroup": self.memory_base,
                "cpu_weight_cgroup": self.cpu_base if self.cpu else None,
                "cpu_time_cgroup": {"prog": "the program group", "slot": "the slot's group, less the worker and "
                                    "the judge process"}.get(self.acct or "", None),
                "summary": self.accounting, "why_not": list(self.reasons) or None}


# ----------------------------------------------------------------------------------------------------------
# detection
# ----------------------------------------------------------------------------------------------------------


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root inside the fs, mount point, fstype, super options) of every cgroup mount."""
    out = []
    try:
        lines = _read("/proc/self/mountinfo").splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) < 5 or len(r) < 3 or r[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((f[3], f[4].replace("\\040", " "), r[0], set(r[2].split(","))))
    return out


def _own_paths() -> tuple[dict[str, str], str | None]:
    """This process's cgroup path per v1 controller, and its v2 path."""
    v1: dict[str, str] = {}
    v2 = None
    try:
        lines = _read("/proc/self/cgroup").splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        for c in parts[1].split(","):
            if c:
                v1[c] = parts[2]
    return v1, v2


def _join(mount: str, root: str, path: str) -> str:
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    return os.path.normpath(mount + "/" + path.lstrip("/"))


def _oom_file(kind: str) -> str:
    return "memory.oom_control" if kind == "cgroup-v1" else "memory.events"


def _probe_memory(base: str, kind: str) -> str | None:
    """Create and remove a child of ``base``; None when it works and has what we need, else why not."""
    d = os.path.join(base, f"{GROUP}-probe-{os.getpid()}-{threading.get_ident() & 0xFFFF}")
    try:
        os.mkdir(d, 0o755)
    except OSError as e:
        return f"cannot create a cgroup under {base}: {e.strerror}"
    try:
        limit = "memory.limit_in_bytes" if kind == "cgroup-v1" else "memory.max"
        if not os.path.exists(os.path.join(d, limit)):
            return f"{base} has no {limit}"
        if "oom_kill " not in _read(os.path.join(d, _oom_file(kind))):
            return f"the kernel does not count OOM kills in {_oom_file(kind)}"
        _write(os.path.join(d, limit), str(1 << 40))
        return None
    except OSError as e:
        return f"cannot configure a cgroup under {base}: {e.strerror}"
    finally:
        try:
            os.rmdir(d)
        except OSError:
            pass


def _v2_base(mounts: list, v2path: str) -> tuple[str | None, bool, str]:
    """The directory under which cgroup-v2 slot groups go: the nearest of this process's own cgroup and
    its ancestors that has (or can be given) the memory (and cpu, when available) controllers for its
    children (a cgroup with processes cannot delegate controllers, except the root)."""
    mount = next(((r, m) for r, m, t, _ in mounts if t == "cgroup2"), None)
    if mount is None:
        return None, False, "no cgroup2 mount"
    own = _join(mount[1], mount[0], v2path)
    cand = own
    why = "no cgroup-v2 ancestor can delegate the memory controller"
    while True:
        try:
            ctrls = _read(os.path.join(cand, "cgroup.controllers")).split()
        except OSError as e:
            return None, False, f"{cand}: {e.strerror}"
        if "memory" in ctrls:
            try:
                sub = _read(os.path.join(cand, "cgroup.subtree_control")).split()
                want = [c for c in ("memory", "cpu") if c in ctrls and c not in sub]
                if want:
                    _write(os.path.join(cand, "cgroup.subtree_control"), " ".join("+" + c for c in want))
                sub = _read(os.path.join(cand, "cgroup.subtree_control")).split()
                return cand, "cpu" in sub, ""
            except OSError as e:
                why = f"{cand}: {e.strerror}"
        else:
            why = f"the memory controller is not available in {cand}"
        if cand == mount[1] or os.path.dirname(cand) == cand:
            return None, False, why
        cand = os.path.dirname(cand)


_support: CgroupSupport | None = None
_support_lock = threading.Lock()


def support(refresh: bool = False) -> CgroupSupport:
    """What cgroup accounting a slot gets on this machine (detected once per process; ``refresh`` again).

    Needs root (or a delegated, writable cgroup); ``REWARDLANG_SANDBOX_CGROUPS=off`` forces the fallback.
    Leftover slot groups of trainers that are no longer running are removed on the way."""
    global _support
    with _support_lock:
        if _support is None or refresh:
            _support = _detect()
            for base in (_support.memory_base, _support.cpu_base, _support.acct_base):
                if base:
                    _sweep(base)
        return _support


def _detect() -> CgroupSupport:
    if os.environ.get(ENV, "").lower() in ("off", "0", "no", "false"):
        return CgroupSupport(None, reasons=(f"disabled by {ENV}",))
    mounts = _mounts()
    v1paths, v2path = _own_paths()
    reasons: list[str] = []
    mem = mem_base = cpu = cpu_base = acct = acct_base = None
    v1mem = next(((r, m) for r, m, t, o in mounts if t == "cgroup" and "memory" in o), None)
    if v1mem is not None and "memory" in v1paths:
        base = _join(v1mem[1], v1mem[0], v1paths["memory"])
        why = _probe_memory(base, "cgroup-v1")
        if why is None:
            mem, mem_base = "cgroup-v1", base
        else:
            reasons.append(why)
        v1cpu = next(((r, m) for r, m, t, o in mounts if t == "cgroup" and "cpu" in o), None)
        if v1cpu is not None and "cpu" in v1paths:
            cb = _join(v1cpu[1], v1cpu[0], v1paths["cpu"])
            if os.path.exists(os.path.join(cb, "cpu.shares")) and os.access(cb, os.W_OK):
                cpu, cpu_base = "cgroup-v1", cb
        if mem is not None:
            acct, acct_base = _v1_acct(mounts, v1paths, cpu is not None)
    if mem is None and v2path is not None:
        base2, has_cpu, why2 = _v2_base(mounts, v2path)
        if base2 is not None:
            why = _probe_memory(base2, "cgroup-v2")
            if why is None:
                mem, mem_base = "cgroup-v2", base2
                acct = "prog"  # every v2 group has cpu.stat's usage_usec, controller or not
                if has_cpu and cpu is None:
                    cpu, cpu_base = "cgroup-v2", base2
            else:
                reasons.append(why)
        else:
            reasons.append(why2)
    elif mem is None:
        reasons.append("no memory cgroup hierarchy")
    return CgroupSupport(mem, mem_base, cpu, cpu_base, tuple(reasons), acct, acct_base)


def _v1_acct(mounts: list, v1paths: dict[str, str], cpu_group: bool) -> tuple[str | None, str | None]:
    """Where a v1 machine counts a program's CPU time whole: ``("prog", None)`` when ``cpuacct`` shares the
    memory hierarchy (the program group counts it), ``("slot", None)`` when it shares the ``cpu`` one and the
    slot has a cpu group there, ``("slot", base)`` when it is mounted alone and ``base`` (this process's group
    in it) can be written; ``(None, None)`` otherwise."""
    acct = next(((r, m, o) for r, m, t, o in mounts if t == "cgroup" and "cpuacct" in o), None)
    if acct is None or "cpuacct" not in v1paths:
        return None, None
    if "memory" in acct[2]:
        return "prog", None
    if "cpu" in acct[2]:
        return ("slot", None) if cpu_group else (None, None)
    base = _join(acct[1], acct[0], v1paths["cpuacct"])
    if os.path.exists(os.path.join(base, "cpuacct.usage")) and os.access(base, os.W_OK):
        return "slot", base
    return None, None


def _sweep(base: str) -> None:
    """Remove slot groups whose trainer (the pid in the name) is gone: processes of a crashed trainer were
    killed with their uid, so the groups are empty; a group that is not is left alone (rmdir fails)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(GROUP + "-"):
            continue
        owner = name[len(GROUP) + 1:].split("-", 1)[0]
        if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
            continue
        _remove_tree(os.path.join(base, name))


def _remove_tree(d: str) -> bool:
    ok = True
    for sub in ("prog", "worker"):
        p = os.path.join(d, sub)
        if os.path.isdir(p):
            try:
                os.rmdir(p)
            except OSError:
                ok = False
    try:
        os.rmdir(d)
    except FileNotFoundError:
        pass
    except OSError:
        ok = False
    return ok


# ----------------------------------------------------------------------------------------------------------
# one slot's groups
# ----------------------------------------------------------------------------------------------------------

_serial = 0
_serial_lock = threading.Lock()
_leftover: list[str] = []  # groups whose removal failed (a process not yet reaped): retried later


@dataclass
class SlotCgroup:
    """The cgroups of one slot (see the module docstring). Created before the slot is started: the worker
    receives :meth:`worker_fds` (``prog``'s ``cgroup.procs`` to write its children into, and the OOM-kill
    counter to read around each program)."""

    sup: CgroupSupport
    mem_dir: str
    cpu_dir: str | None
    #: the slot's group in a ``cpuacct`` hierarchy mounted alone (v1, :attr:`CgroupSupport.acct_base`)
    acct_dir: str | None = None
    _fds: list[int] = field(default_factory=list)
    _limit: int = -1
    _open: dict[str, int] = field(default_factory=dict)
    _peak: str | None = None

    @classmethod
    def create(cls, sup: CgroupSupport, index: int) -> SlotCgroup:
        """Create the groups of a new slot. Raises :class:`CgroupError`."""
        global _serial
        assert sup.memory and sup.memory_base
        with _serial_lock:
            _serial += 1
            name = f"{GROUP}-{os.getpid()}-{index}-{_serial}"
            for d in _leftover[:]:
                if _remove_tree(d):
                    _leftover.remove(d)
        mem_dir = os.path.join(sup.memory_base, name)
        cpu_dir = os.path.join(sup.cpu_base, name) if sup.cpu and sup.cpu_base else None
        acct_dir = os.path.join(sup.acct_base, name) if sup.acct == "slot" and sup.acct_base else None
        cg = cls(sup, mem_dir, cpu_dir if cpu_dir != mem_dir else None, acct_dir)
        try:
            os.mkdir(mem_dir, 0o755)
            if sup.memory == "cgroup-v2":
                _write(os.path.join(mem_dir, "cgroup.subtree_control"), "+memory")
                if sup.cpu == "cgroup-v2":
                    _write(os.path.join(mem_dir, "cpu.weight"), "100")
            os.mkdir(os.path.join(mem_dir, "worker"), 0o755)
            os.mkdir(os.path.join(mem_dir, "prog"), 0o755)
            if sup.memory == "cgroup-v1":
                try:  # the program's page cache and tmpfs pages are not swapped out ahead of others'
                    _write(os.path.join(mem_dir, "prog", "memory.swappiness"), "0")
                except OSError:
                    pass
            else:
                swap = os.path.join(mem_dir, "prog", "memory.swap.max")
                if os.path.exists(swap):  # no swap for programs: the budget is real memory
                    _write(swap, "0")
            if cg.cpu_dir is not None:
                os.mkdir(cg.cpu_dir, 0o755)
                _write(os.path.join(cg.cpu_dir, "cpu.shares"), "1024")  # v1: the default, fixed weight
            if cg.acct_dir is not None:
                os.mkdir(cg.acct_dir, 0o755)
        except OSError as e:
            cg.destroy()
            raise CgroupError(e.errno or errno.EIO, f"cannot create the slot's cgroup {mem_dir}: {e.strerror}") \
                from e
        return cg

    @property
    def prog_dir(self) -> str:
        return os.path.join(self.mem_dir, "prog")

    def worker_fds(self) -> dict[str, int]:
        """Open the two files the worker uses; the fds are passed to the slot at start (and closed here by
        :meth:`close_fds` once it runs). Writing to ``cgroup.procs`` through an fd checks the opener's
        (root's) credentials, so the unprivileged worker's children can move themselves in."""
        procs = self._high(os.open(os.path.join(self.prog_dir, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC))
        oom = self._high(os.open(os.path.join(self.prog_dir, _oom_file(self.sup.memory or "")),
                                 os.O_RDONLY | os.O_CLOEXEC))
        out = {"procs": procs, "oom": oom}
        acct = self.acct_file
        if acct is not None:
            out["acct"] = self._high(os.open(acct, os.O_RDONLY | os.O_CLOEXEC))
        return out

    @property
    def acct_kind(self) -> str | None:
        """How the worker reads :attr:`acct_file`: ``"cpu.stat:prog"`` (v2, ``usage_usec``), ``"cpuacct.usage:prog"``
        or ``"cpuacct.usage:slot"`` (v1, nanoseconds; of the program group or of the whole slot)."""
        acct = self.acct_file
        if acct is None:
            return None
        return ("cpu.stat" if acct.endswith("cpu.stat") else "cpuacct.usage") + ":" + str(self.sup.acct)

    @property
    def acct_file(self) -> str | None:
        """The file that counts a program's CPU time whole, its self-reaped children's included (a program that
        ignores SIGCHLD has its exited children's time added to no parent's counters, and a walk of ``/proc``
        no longer sees them): the program group's ``cpu.stat`` (v2) or ``cpuacct.usage`` (v1 with memory), or the
        slot's ``cpuacct.usage`` (the worker subtracts its own and the judge process's time); None without."""
        if self.sup.acct == "prog":
            return os.path.join(self.prog_dir, "cpu.stat" if self.sup.memory == "cgroup-v2" else "cpuacct.usage")
        if self.sup.acct == "slot":
            d = self.acct_dir or self.cpu_dir
            return os.path.join(d, "cpuacct.usage") if d else None
        return None

    def _high(self, fd: int) -> int:
        # The worker moves its protocol pipes onto fds 0-2, 10 and 11 at start: an inherited fd must keep
        # clear of them (a trainer with few open files would hand over fd 10)
        try:
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, FD_MIN)
        finally:
            os.close(fd)
        self._fds.append(high)
        return high

    def close_fds(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    def attach(self, pids: list[int]) -> None:
        """Move the slot's own processes (bubblewrap, the worker) into ``worker`` and the slot's cpu group."""
        for pid in pids:
            _write(os.path.join(self.mem_dir, "worker", "cgroup.procs"), str(pid))
            if self.cpu_dir is not None:
                _write(os.path.join(self.cpu_dir, "cgroup.procs"), str(pid))
            if self.acct_dir is not None:
                _write(os.path.join(self.acct_dir, "cgroup.procs"), str(pid))

    def _fd(self, name: str, flags: int) -> int:
        """A kept-open fd on a file of ``prog`` (the per-request calls are one pread/pwrite each)."""
        fd = self._open.get(name)
        if fd is None:
            fd = os.open(os.path.join(self.prog_dir, name), flags | os.O_CLOEXEC)
            self._open[name] = fd
        return fd

    def set_limit(self, nbytes: int) -> None:
        """The memory limit of ``prog`` (swap included); written only when it changes."""
        nbytes = (int(nbytes) + 0xFFFFF) & ~0xFFFFF
        if nbytes == self._limit:
            return
        # past what a page counter holds: no limit (RLIMIT_AS, set by the worker, refuses such a budget)
        value = (str(nbytes) if nbytes < UNLIMITED else ("max" if self.sup.memory == "cgroup-v2" else "-1")).encode()
        if self.sup.memory == "cgroup-v2":
            files = ["memory.max"]
        else:
            # memory.limit_in_bytes <= memory.memsw.limit_in_bytes must hold after each write
            files = ["memory.limit_in_bytes"]
            if os.path.exists(os.path.join(self.prog_dir, "memory.memsw.limit_in_bytes")):
                files.append("memory.memsw.limit_in_bytes")
                if 0 <= self._limit < nbytes:   # raising (a new group starts unlimited: lowering)
                    files.reverse()
        for name in files:
            fd = self._fd(name, os.O_WRONLY)
            try:
                os.pwrite(fd, value, 0)
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                # usage above the new limit (page cache a program left): reclaim it, then retry
                self._reclaim()
                os.pwrite(fd, value, 0)
        self._limit = nbytes

    @property
    def limit(self) -> int | None:
        """The program group's limit in bytes as last written (None: not set yet)."""
        return self._limit if self._limit >= 0 else None

    def _reclaim(self) -> None:
        try:
            if self.sup.memory == "cgroup-v1":
                _write(os.path.join(self.prog_dir, "memory.force_empty"), "0")
            else:
                _write(os.path.join(self.prog_dir, "memory.reclaim"), str(1 << 40))
        except OSError:
            pass

    def _peak_name(self) -> str:
        if self.sup.memory == "cgroup-v2":
            return "memory.peak"
        memsw = "memory.memsw.max_usage_in_bytes"   # the limit is on memory + swap where swap is counted
        return memsw if os.path.exists(os.path.join(self.prog_dir, memsw)) else "memory.max_usage_in_bytes"

    def reset_peak(self) -> None:
        """Start a new peak measurement (v1: write 0 to ``max_usage_in_bytes``; v2: write to the same fd of
        ``memory.peak`` that is read afterwards, Linux 6.12+; before that the peak is since creation)."""
        try:
            if self._peak is None:
                self._peak = self._peak_name()
            os.pwrite(self._fd(self._peak, os.O_RDWR), b"0" if self.sup.memory == "cgroup-v1" else b"reset", 0)
        except OSError:
            pass

    def peak(self) -> int | None:
        """Bytes: the largest charge of the program's group since :meth:`reset_peak`."""
        try:
            if self._peak is None:
                self._peak = self._peak_name()
            return int(os.pread(self._fd(self._peak, os.O_RDWR), 64, 0))
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        """How many processes the kernel killed in ``prog`` for exceeding the limit, so far."""
        return parse_oom_kills(_read(os.path.join(self.prog_dir, _oom_file(self.sup.memory or ""))).encode())

    def destroy(self) -> None:
        """Remove the groups (after every process of the slot is gone); retried later when that fails."""
        self.close_fds()
        for fd in self._open.values():
            os.close(fd)
        self._open = {}
        for d in (self.mem_dir, self.cpu_dir, self.acct_dir):
            if d is None:
                continue
            for _ in range(20):
                if _remove_tree(d):
                    break
                time.sleep(0.01)  # a killed process not reaped yet still counts as a member
            else:
                with _serial_lock:
                    _leftover.append(d)


def parse_oom_kills(data: bytes) -> int:
    """The ``oom_kill`` counter of ``memory.oom_control`` (v1) or ``memory.events`` (v2).

        >>> parse_oom_kills(b"oom_kill_disable 0\\nunder_oom 0\\noom_kill 3\\n")
        3
    """
    for line in data.split(b"\n"):
        if line.startswith(b"oom_kill "):
            return int(line[9:])
    return 0
