"""The sandbox slot worker: runs INSIDE a sandbox and forks one process per untrusted program.

This file is self-contained (standard library only, no rewardlang imports): at the ``bwrap`` level it is the
only rewardlang file visible inside the sandbox (bound read-only at ``/sandbox/worker.py``). The trusted
process also imports it, to build the seccomp filters it hands to bubblewrap and to share the frame format.

Protocol (little-endian length-prefixed frames on fds moved to 10/11 at start-up):
the first frame is the slot configuration. A request is a JSON header (mode, limits, the tests' calls or stdin:
no program text), then the program's text as a frame of its own (UTF-8), then, with judged tests, their frame.
Each run is answered as soon as it ends: a ``{"run": head}`` frame followed by raw blobs (the result-channel
bytes, the captured stdout, the judge process's records); the last run's head says ``last``; a request
without runs, or a worker error, is answered by one final JSON frame. The worker never holds a program's bytes
in memory a later fork inherits (see "Program bytes in the worker" below).

The program's process sends *observations* on fd 3 (frames of JSON lists); the worker does not interpret
them, the trusted process does. Expected values never reach the worker or the program's process: tests that
cannot be split into probes come as a second request frame that only the *judge process* (forked by the
worker, holding no program code) reads; it runs them with the program's functions behind a proxy (see
``_judge_main``) and reports per test on a pipe only it holds (a third blob of the run's response).
"""

from __future__ import annotations

import _json
import _signal as signal
import builtins
import ctypes
import errno
import io
import mmap as _mmap
import os
import resource
import select
import stat as _stat
import struct
import sys
import time

# The worker keeps its memory small: every page it maps makes each fork (one per program) dearer. So no
# `json` (it pulls in `re`), `shutil` or `signal` (enum): the C parts underneath are enough.


def _no_default(o: object) -> object:
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


_encoder = _json.make_encoder(None, _no_default, _json.encode_basestring_ascii, None, ":", ",", False, False, True)


def dumps(obj: object) -> str:
    """Compact ASCII JSON (the C encoder of the standard library, without importing ``json``)."""
    return "".join(_encoder(obj, 0))


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__

    def __init__(self) -> None:
        self.memo: dict = {}


_scan_ctx = _ScanContext()
_scan = _json.make_scanner(_scan_ctx)


def loads(data: bytes | str) -> object:
    """Parse one JSON document (trusted input: the slot configuration and requests)."""
    text = data.decode("utf-8", "surrogatepass") if isinstance(data, (bytes, bytearray)) else data
    try:
        obj, end = _scan(text, 0)
    except StopIteration as e:
        raise ValueError("malformed JSON") from e
    finally:
        _scan_ctx.memo.clear()
    if text[end:].strip():
        raise ValueError("trailing data after JSON")
    return obj


class _Budget:
    """What a clean-up may still spend before the slot gives up and asks to be replaced (a fresh tmpfs is
    cheaper than deleting a million files a program left behind): directory entries visited and a
    deadline on the monotonic clock. Running out never changes a verdict, it only recycles the slot."""

    def __init__(self, n: int, seconds: float = 2.0) -> None:
        self.n = n
        self.deadline = time.monotonic() + seconds


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


_DENTS_SIZE = 1 << 16      # one getdents64 buffer, reused and zeroed: names never become Python objects
_dents_buf = None
_AT_REMOVEDIR = 0x200
_DT_DIR = 4


def _dents() -> "ctypes.Array[ctypes.c_char]":
    global _dents_buf
    if _dents_buf is None:
        lib = _lib()
        lib.getdents64.restype = ctypes.c_ssize_t
        lib.getdents64.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
        lib.unlinkat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
        lib.openat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint)
        lib.fchmodat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int)
        _dents_buf = ctypes.create_string_buffer(_DENTS_SIZE)
    return _dents_buf


def _empty_dir(top: str, budget: _Budget) -> bool:
    """Delete everything inside the directory ``top`` (not ``top`` itself); False when the budget ran out
    or something could not be deleted (the caller then replaces the slot).

    The names a program gave its files never become Python strings here (a later program forked from this
    worker could find freed strings in the memory it inherits: issue 19, nothing carried between programs):
    entries are read with ``getdents64`` into one fixed buffer and removed with ``unlinkat`` straight from it,
    and the buffer is zeroed before returning. Safe against what a program can leave behind: every step is
    relative to a directory fd and never follows a symlink (``openat`` with ``O_NOFOLLOW | O_DIRECTORY``; a
    symlink, even one that replaced a run directory, is unlinked, never entered). Iterative with a stack of
    directory fds (any depth, no path ever built); a directory is removed by its parent's next pass once it is
    empty. Unreadable directories are the slot uid's own and are made readable first. Every process of the
    program is dead before the clean-up starts, so nothing moves under it."""
    try:
        fd = os.open(top, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    lib = _lib()
    buf = _dents()
    base = ctypes.addressof(buf)
    stack = [fd]
    try:
        while stack:
            cur = stack[-1]
            if budget.n < 0 or time.monotonic() > budget.deadline:
                return False
            os.lseek(cur, 0, os.SEEK_SET)       # re-read from the start: an emptied child is removed now
            descend = -1
            removed_or_entered = False
            while descend < 0:
                n = lib.getdents64(cur, base, _DENTS_SIZE)
                if n < 0:
                    return False
                if n == 0:
                    break
                pos = 0
                while pos < n:
                    reclen = int.from_bytes(ctypes.string_at(base + pos + 16, 2), "little")
                    dtype = ctypes.string_at(base + pos + 18, 1)[0]
                    name = base + pos + 19
                    pos += reclen
                    c0 = ctypes.string_at(name, 1)[0]
                    if c0 == 0x2E:  # "." and ".." (only their first bytes are looked at, never the name)
                        c1 = ctypes.string_at(name + 1, 1)[0]
                        if c1 == 0 or (c1 == 0x2E and ctypes.string_at(name + 2, 1)[0] == 0):
                            continue
                    budget.n -= 1
                    if budget.n < 0:
                        return False
                    flags = _AT_REMOVEDIR if dtype == _DT_DIR else 0
                    if lib.unlinkat(cur, name, flags) == 0:
                        removed_or_entered = True
                        continue
                    err = ctypes.get_errno()
                    if err == errno.ENOENT:
                        continue
                    if flags == 0 and err == errno.EISDIR:        # d_type unknown: a directory after all
                        if lib.unlinkat(cur, name, _AT_REMOVEDIR) == 0:
                            removed_or_entered = True
                            continue
                        err = ctypes.get_errno()
                    if err not in (errno.ENOTEMPTY, errno.EEXIST, errno.EACCES, errno.EPERM, errno.EISDIR):
                        return False                                # cannot make progress here
                    lib.fchmodat(cur, name, 0o700, 0)               # a directory: make it readable, enter it
                    nfd = lib.openat(cur, name, _DIR_FLAGS, 0)
                    if nfd < 0:
                        return False
                    descend = nfd
                    removed_or_entered = True
                    break
            if descend >= 0:
                stack.append(descend)
                continue
            if cur is fd and len(stack) == 1 and not removed_or_entered:
                return True                                          # top is empty
            if len(stack) > 1 and not removed_or_entered:
                os.close(stack.pop())                                # empty: the parent removes it next pass
            # else: something was removed; read this directory again (it may hold more than one buffer)
        return True
    finally:
        for d in stack:
            try:
                os.close(d)
            except OSError:
                pass
        ctypes.memset(base, 0, _DENTS_SIZE)


WIPE_BUDGET = 20_000


__all__ = ["build_filter", "SLOT_DENY", "PROGRAM_DENY", "encode_value", "pack_frame", "landlock_abi"]

# ----------------------------------------------------------------------------------------------------------
# seccomp: a tiny classic-BPF assembler (no libseccomp needed)
# ----------------------------------------------------------------------------------------------------------

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SYSCALLS = {
    "x86_64": {
        "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43, "accept4": 288,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kill": 62, "tkill": 200,
        "tgkill": 234, "clone": 56, "clone3": 435, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "unshare": 272, "setns": 308, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
        "request_key": 249, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "personality": 135,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "iopl": 172, "ioperm": 173, "lookup_dcookie": 212,
        "quotactl": 179, "setsid": 112, "setpgid": 109, "prlimit64": 302, "syslog": 103, "vhangup": 153,
        "mknod": 133, "mknodat": 259, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "move_mount": 429, "open_tree": 428, "mount_setattr": 442, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "sethostname": 170,
        "setdomainname": 171, "uselib": 134, "nfsservctl": 180,
        "shmget": 29, "msgget": 68, "semget": 64, "mq_open": 240, "setpriority": 141,
        "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314, "sched_setaffinity": 203,
        "io_setup": 206, "io_destroy": 207, "io_getevents": 208, "io_submit": 209, "io_cancel": 210,
        "io_pgetevents": 333, "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254,
        "fanotify_init": 300, "fanotify_mark": 301, "memfd_create": 319, "memfd_secret": 447, "prctl": 157,
        "quotactl_fd": 443, "open_tree_attr": 467, "sync": 162, "syncfs": 306,
    },
    "aarch64": {  # asm-generic numbers
        "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201, "accept": 202,
        "accept4": 242, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kill": 129,
        "tkill": 130, "tgkill": 131, "clone": 220, "clone3": 435, "mount": 40, "umount2": 39,
        "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "keyctl": 219, "add_key": 217, "request_key": 218, "kexec_load": 104, "kexec_file_load": 294,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224,
        "swapoff": 225, "acct": 89, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266,
        "adjtimex": 171, "personality": 92, "open_by_handle_at": 265, "name_to_handle_at": 264,
        "lookup_dcookie": 18, "quotactl": 60, "setsid": 157, "setpgid": 154, "prlimit64": 261,
        "syslog": 116, "vhangup": 58, "mknodat": 33, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "move_mount": 429, "open_tree": 428, "mount_setattr": 442, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "sethostname": 161,
        "setdomainname": 162,
        "shmget": 194, "msgget": 186, "semget": 190, "mq_open": 180, "setpriority": 140,
        "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274, "sched_setaffinity": 122,
        "io_setup": 0, "io_destroy": 1, "io_submit": 2, "io_cancel": 3, "io_getevents": 4, "io_pgetevents": 292,
        "inotify_init1": 26, "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263,
        "memfd_create": 279, "memfd_secret": 447, "prctl": 167, "quotactl_fd": 443, "open_tree_attr": 467,
        "sync": 81, "syncfs": 267,
    },
}

# Denied for the whole slot (the worker never needs these); they fail with EPERM.
SLOT_DENY = (
    "socket", "connect", "bind", "listen", "accept", "accept4", "ptrace", "process_vm_readv",
    "process_vm_writev", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "bpf",
    "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl",
    "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "personality", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "lookup_dcookie", "quotactl",
    "syslog", "vhangup", "mknod", "mknodat", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr", "pidfd_getfd", "sethostname", "setdomainname", "uselib", "nfsservctl",
) + (
    # Calls that charge a host-global (or root-owned) kernel quota or act host-wide; see the table "Host-wide
    # kernel quotas" in docs/sandbox.md. fs.aio-max-nr is one counter for the whole machine: a program
    # looping on io_setup made the host's own io_setup fail with EAGAIN. inotify/fanotify instances and
    # watches are per-user quotas (the trainer's user at the `limits` level); memfd_secret pins unmovable
    # memory; quotactl_fd and open_tree_attr belong with the mount calls; sync/syncfs flush every file
    # system of the host.
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents", "inotify_init",
    "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark", "memfd_secret", "quotactl_fd",
    "open_tree_attr", "sync", "syncfs",
)
# Additionally denied for a program: leaving its session (so the whole tree stays one group), signalling
# anything but itself (kill/tgkill/prlimit64 are argument-checked against its pid), queued signals;
# creating System V IPC objects or POSIX message queues (they would outlive the program in the slot's IPC
# namespace, and their memory counts against no limit of the program); changing its own scheduling
# (priority, policy, CPU affinity: it could then make itself starve on a loaded machine); ``prctl`` is
# argument-checked (see build_filter): no PR_SET_DUMPABLE other than 0, no PR_SCHED_CORE.
PROGRAM_DENY = SLOT_DENY + ("setsid", "setpgid", "tkill", "pidfd_send_signal", "rt_sigqueueinfo",
                            "rt_tgsigqueueinfo", "shmget", "msgget", "semget", "mq_open", "setpriority",
                            "sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity")
#: added to the program filter where no memory cgroup bounds a program (the RLIMIT_AS fallback): a memfd
#: that is written but never mapped counts against no rlimit at all
FALLBACK_DENY = ("memfd_create",)
PR_SCHED_CORE = 62
CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80

_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_KILL_PROCESS, _RET_ALLOW = 0x80000000, 0x7FFF0000
_RET_ERRNO = 0x00050000


def _machine() -> str:
    m = os.uname().machine
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def build_filter(deny: tuple[str, ...], pid: int | None = None, arch: str | None = None) -> bytes:
    """A classic-BPF seccomp program (raw ``struct sock_filter`` array) that fails ``deny`` with EPERM.

    With ``pid`` (a program's filter), ``kill``/``tgkill``/``prlimit64`` are allowed only on that pid (or
    its own process group), ``clone`` with namespace flags is denied and ``clone3`` answers ENOSYS (its
    flags live in memory a filter cannot read; the C library falls back to ``clone``). Other
    architectures than the one the filter was built for are killed.

        >>> len(build_filter(("ptrace",), arch="x86_64")) % 8
        0
    """
    arch = arch or _machine()
    table = SYSCALLS[arch]
    prog: list[tuple] = []  # (code, jt_label_or_int, jf_label_or_int, k) ; labels resolved below
    labels: dict[str, int] = {}

    def emit(code: int, k: int = 0, jt: object = 0, jf: object = 0) -> None:
        prog.append((code, jt, jf, k & 0xFFFFFFFF))

    def label(name: str) -> None:
        labels[name] = len(prog)

    emit(_LD_ABS_W, 4)                                   # seccomp_data.arch
    emit(_JEQ, AUDIT_ARCH[arch], jt=1, jf=0)
    emit(_RET, _RET_KILL_PROCESS)
    emit(_LD_ABS_W, 0)                                   # seccomp_data.nr
    if arch == "x86_64":
        emit(_JGE, 0x40000000, jt="eperm", jf=0)         # the x32 ABI alias table
    special = {}
    if pid is not None:
        special = {"kill": "kill", "tgkill": "tgkill", "prlimit64": "prlimit", "clone": "clone",
                   "clone3": "enosys", "prctl": "prctl"}
    target_of: dict[int, str] = {}
    for name, target in special.items():
        target_of.setdefault(table[name], target)
    for name in deny:
        if name in table and name not in special:
            target_of.setdefault(table[name], "eperm")
    # A binary search over the number line, not a chain of ~100 compares: every system call a program makes
    # walks the filter, and so does the kernel when it installs it (it runs the filter once per system call
    # number to find the ones it may allow without running it). The line is cut into segments of one
    # decision each (a run of consecutive denied numbers is one segment: x86_64's 91 denied numbers make 46
    # runs), and the tree compares only at segment boundaries, jumping straight to the decision: one JGE per
    # boundary and no leaf instructions. Its size matters as much as its depth: the kernel converts and
    # JIT-compiles the filter at every installation, once per step (perf: ~75 us of a Bash step's set-up
    # with the tree of leaves of 4 numbers, 186 instructions; issue 20).
    segs: list[list] = []     # [first number, decision label], ascending; past the last one: allowed
    for nr in sorted(target_of):
        t = target_of[nr]
        if segs and segs[-1][1] == t and segs[-1][2] == nr:
            segs[-1][2] = nr + 1            # extends the run
            continue
        if (segs[-1][2] if segs else 0) < nr:
            segs.append([segs[-1][2] if segs else 0, "allow2", nr])     # the allowed gap before it
        segs.append([nr, t, nr + 1])
    segs.append([segs[-1][2] if segs else 0, "allow2", None])
    if segs[0][0] != 0:
        segs.insert(0, [0, "allow2", segs[0][0]])

    def node(lo: int, hi: int) -> object:
        """Emit the subtree deciding segments ``lo:hi`` here; its entry (a label, or 0: right here)."""
        if hi - lo == 1:
            return segs[lo][1]              # one decision: the parent jumps to it
        mid = (lo + hi) // 2
        at = len(prog)
        emit(_JGE, segs[mid][0])            # patched below: the subtrees' entries
        left = node(lo, mid)
        if isinstance(left, int):
            left = 0                         # emitted right after this compare
        rname = f"seg{mid}_{hi}"
        label(rname)
        right = node(mid, hi)
        if isinstance(right, int):
            right = rname
        prog[at] = (_JGE, right, left, segs[mid][0])
        return 0

    if node(0, len(segs)) != 0:             # nothing denied at all: every number is allowed
        emit(_RET, _RET_ALLOW)
    if pid is not None:
        label("kill")
        emit(_LD_ABS_W, 16)                              # args[0], low 32 bits
        emit(_JEQ, pid, jt="allow2", jf=0)
        emit(_JEQ, 0, jt="allow2", jf=0)
        emit(_JEQ, -pid, jt="allow2", jf="eperm")
        label("tgkill")
        emit(_LD_ABS_W, 16)
        emit(_JEQ, pid, jt="allow2", jf="eperm")
        label("prlimit")
        emit(_LD_ABS_W, 16)
        emit(_JEQ, 0, jt="allow2", jf=0)
        emit(_JEQ, pid, jt="allow2", jf="eperm")
        label("clone")
        emit(_LD_ABS_W, 16)
        emit(_JSET, CLONE_NS_FLAGS, jt="eperm", jf="allow2")
        label("enosys")
        emit(_RET, _RET_ERRNO | errno.ENOSYS)
        # prctl: a program stays non-dumpable (a dumpable one owns its /proc files: /proc/self/autogroup,
        # whose nice 19 would starve it into a masked "overload" where no cpu cgroup is in force) and
        # cannot give itself a core-scheduling cookie. The option is an int (low word); arg2 is checked
        # whole (both words zero), as the kernel reads an unsigned long.
        label("prctl")
        emit(_LD_ABS_W, 16)                              # args[0], low 32 bits: the option
        emit(_JEQ, PR_SET_DUMPABLE, jt="dumpable", jf=0)
        emit(_JEQ, PR_SCHED_CORE, jt="eperm", jf="allow2")
        label("dumpable")
        emit(_LD_ABS_W, 24)                              # args[1], low 32 bits
        emit(_JEQ, 0, jt=0, jf="eperm")
        emit(_LD_ABS_W, 28)                              # args[1], high 32 bits
        emit(_JEQ, 0, jt="allow2", jf="eperm")
    label("eperm")
    emit(_RET, _RET_ERRNO | errno.EPERM)

    label("allow2")
    emit(_RET, _RET_ALLOW)

    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        offs = []
        for j in (jt, jf):
            if isinstance(j, str):
                j = labels[j] - i - 1
            if not 0 <= j <= 255:
                raise ValueError("seccomp jump out of range")
            offs.append(j)
        out += struct.pack("=HBBI", code, offs[0], offs[1], k)
    return bytes(out)


_PID_MARK = 0x7FFFFF3


class FilterTemplate:
    """A program filter built once with a marker pid; :meth:`for_pid` patches the real pid in (cheap
    enough to do after every fork)."""

    def __init__(self, deny: tuple[str, ...]) -> None:
        raw = build_filter(deny, pid=_PID_MARK)
        self.raw = bytearray(raw)
        self.sites = []
        for i in range(0, len(raw), 8):
            k = struct.unpack_from("=I", raw, i + 4)[0]
            if k == _PID_MARK:
                self.sites.append((i + 4, 1))
            elif k == (-_PID_MARK) & 0xFFFFFFFF:
                self.sites.append((i + 4, -1))

    def for_pid(self, pid: int) -> bytes:
        for off, sign in self.sites:
            struct.pack_into("=I", self.raw, off, (sign * pid) & 0xFFFFFFFF)
        return bytes(self.raw)


_libc = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.llistxattr.restype = ctypes.c_ssize_t
        _libc.strlen.restype = ctypes.c_size_t
    return _libc


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36


def _prctl(option: int, arg2: int | ctypes.c_void_p = 0) -> None:
    libc = _lib()
    if libc.prctl(option, arg2, 0, 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"prctl({option}): {os.strerror(e)}")


def install_filter(raw: bytes) -> None:
    """no_new_privs, then load ``raw`` (from :func:`build_filter`) on the calling thread."""
    libc = _lib()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    buf = ctypes.create_string_buffer(raw, len(raw))
    prog = _SockFprog(len(raw) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"seccomp: {os.strerror(e)}")


# ----------------------------------------------------------------------------------------------------------
# Landlock (used at the levels without a mount namespace)
# ----------------------------------------------------------------------------------------------------------

_LL_CREATE, _LL_ADD, _LL_RESTRICT = 444, 445, 446


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when unavailable."""
    try:
        r = _lib().syscall(_LL_CREATE, None, 0, 1)
    except Exception:
        return 0
    return int(r) if r > 0 else 0


class _LLPathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_restrict(read_paths: list[str], write_paths: list[str]) -> int:
    """Confine the calling process: read/execute ``read_paths``, full access under ``write_paths``, no TCP,
    no signals or abstract sockets outside the domain (from ABI 6). Returns the ABI used (0: unavailable)."""
    abi = landlock_abi()
    if abi <= 0:
        return 0
    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= 1 << 13
    if abi >= 3:
        fs_all |= 1 << 14
    if abi >= 5:
        fs_all |= 1 << 15
    file_bits = (1 << 0) | (1 << 1) | (1 << 2) | ((1 << 14) if abi >= 3 else 0) | ((1 << 15) if abi >= 5 else 0)
    read_bits = (1 << 0) | (1 << 2) | (1 << 3)
    fields = [fs_all]
    if abi >= 4:
        fields.append(0b11)          # bind and connect TCP
    if abi >= 6:
        fields.append(0b11)          # scoped: abstract unix sockets, signals
    attr = struct.pack("=" + "Q" * len(fields), *fields)
    libc = _lib()
    buf = ctypes.create_string_buffer(attr, len(attr))
    rfd = libc.syscall(_LL_CREATE, buf, len(attr), 0)
    if rfd < 0:
        return 0
    try:
        for paths, bits in ((read_paths, read_bits), (write_paths, fs_all)):
            for p in paths:
                try:
                    fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    allowed = bits if _stat.S_ISDIR(os.fstat(fd).st_mode) else bits & file_bits
                    if p == "/dev/null":
                        allowed |= 1 << 1
                    rule = _LLPathBeneath(allowed, fd)
                    if libc.syscall(_LL_ADD, rfd, 1, ctypes.byref(rule), 0) != 0:
                        raise OSError(ctypes.get_errno(), f"landlock_add_rule({p})")
                finally:
                    os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
        if libc.syscall(_LL_RESTRICT, rfd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(rfd)
    return abi


# ----------------------------------------------------------------------------------------------------------
# Framing and the type-exact encoder
# ----------------------------------------------------------------------------------------------------------


def pack_frame(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload


#: A run's head as a fixed binary frame, the common case (no judge process): the byte RUN_TAG (never the
#: first byte of a JSON head), then exit, reason (an index into RUN_REASONS), cpu, wall, idle, flags
#: (RUN_FLAGS, bit i set when the head's key is true, bit 5 (32): spawned by the clone, bit 6 (64): not_built), oom,
#: the four phase times,
#: res_len, out_len. Decoded by pool.unpack_run into the same dict as the JSON head; a head this cannot carry
#: (a judge process's, an unknown reason) goes as JSON. Packing and parsing it costs a few microseconds per
#: run where the JSON head cost ~12 on both sides (issue 20's per-program overhead).
RUN_TAG = 0
RUN_REASONS = (None, "cpu", "wall", "overload", "output", "obs", "memory", "killed")
RUN_FLAGS = ("setup_failed", "clean", "recycle", "exec_failed", "last")
RUN_STRUCT = struct.Struct("<BiBdddBI4dII")
_REASON_CODE = {r: i for i, r in enumerate(RUN_REASONS)}


def run_frame(head: dict) -> bytes:
    """One run's head as a response frame (length prefix included): binary where it can, else JSON.

        >>> from rewardlang.sandbox.pool import unpack_run
        >>> h = {"exit": 1, "reason": "cpu", "cpu": 0.5, "wall": 0.75, "idle": 0.0, "setup_failed": False,
        ...      "clean": True, "recycle": False, "oom": 0, "exec_failed": False, "not_built": False, "spawn": "clone",
        ...      "t": [0.001, 0.5, 0.0, 0.25], "res_len": 3, "out_len": 0, "last": True}
        >>> f = run_frame(h)
        >>> f[4] == RUN_TAG, unpack_run(f[4:]) == {"run": h}
        (True, True)
    """
    code = _REASON_CODE.get(head["reason"], -1)
    if code < 0 or "judge" in head or "judge_len" in head or len(head) != 16 or head["spawn"] not in ("clone",
                                                                                                         "fork"):
        return pack_frame(dumps({"run": head}).encode())
    flags = (head["setup_failed"] and 1) | (head["clean"] and 2) | (head["recycle"] and 4) \
        | (head["exec_failed"] and 8) | (head["last"] and 16) | (32 if head["spawn"] == "clone" else 0) \
        | (head["not_built"] and 64)
    t = head["t"]
    try:
        return _pack_len(RUN_STRUCT.size) + RUN_STRUCT.pack(
            RUN_TAG, head["exit"], code, head["cpu"], head["wall"], head["idle"], flags, head["oom"], t[0], t[1],
            t[2], t[3], head["res_len"], head["out_len"])
    except struct.error:    # a value out of the frame's range: the JSON head carries it
        return pack_frame(dumps({"run": head}).encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise EOFError
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


# ----------------------------------------------------------------------------------------------------------
# Program bytes in the worker: never in memory a later fork inherits
# ----------------------------------------------------------------------------------------------------------
#
# Every program's process and every judge process is a fork of the worker: it inherits the worker's whole
# address space, freed-but-not-zeroed heap included. So the worker never holds a program's bytes (its source
# text, its stdout, its result channel, its judge process's records) in Python objects, whose memory the
# allocator reuses without clearing: the bytes go only into anonymous mappings the kernel empties. The
# program's text is read into a mapping of its own that is unmapped when the request ends (its pages go back
# to the kernel, which zeroes a page before any process sees it again); output goes into `_Wiped` buffers,
# which a fork inherits empty (MADV_WIPEONFORK) and which are emptied (MADV_DONTNEED) once relayed.

MADV_WIPEONFORK = 18     # Linux 4.14 (not in every Python's mmap module)
#: private: a shared anonymous mapping (the mmap module's default) is shmem, which neither
#: MADV_WIPEONFORK nor MADV_DONTNEED empties
_PRIVATE = _mmap.MAP_PRIVATE | _mmap.MAP_ANONYMOUS


def _read_into(fd: int, view: memoryview) -> None:
    """Fill ``view`` from ``fd`` (no intermediate bytes object: the data goes straight into the buffer)."""
    got, n = 0, len(view)
    while got < n:
        k = os.readv(fd, [view[got:]])
        if not k:
            raise EOFError
        got += k


def _read_code(fd: int) -> tuple[object, int]:
    """Read the program-text frame of a request into a fresh anonymous mapping (unmapped after the request)."""
    n = struct.unpack("<I", _read_exact(fd, 4))[0]
    mm = _mmap.mmap(-1, max(n, 1), flags=_PRIVATE)
    with memoryview(mm) as v:
        _read_into(fd, v[:n])
    return mm, n


class _Wiped:
    """A buffer for a program's bytes (output, result channel, judge records): an anonymous mapping a fork
    inherits zeroed (``MADV_WIPEONFORK``; the program's processes never see what it held) and that
    :meth:`clear` empties (``MADV_DONTNEED``: the kernel drops the pages) once the bytes are relayed. Pages
    are touched only as far as data arrives; a fork copies no page table of it."""

    def __init__(self, size: int) -> None:
        self.mm: _mmap.mmap | None = None
        self.view: memoryview | None = None
        self.size = 0
        self.used = 0        # high-water mark of written bytes since the last clear
        self.ensure(size)

    def ensure(self, size: int) -> None:
        if size <= self.size:
            return
        if self.mm is not None:
            self.clear()
            assert self.view is not None
            self.view.release()
            self.mm.close()
        size = (size + _PAGE - 1) // _PAGE * _PAGE
        self.mm = _mmap.mmap(-1, size, flags=_PRIVATE)
        try:
            self.mm.madvise(MADV_WIPEONFORK)
        except (OSError, ValueError):
            pass   # an old kernel: the buffer is emptied after every run all the same
        self.view = memoryview(self.mm)
        self.size = size
        # the mapping's address, for rl_wait_short (spawn.c) to read into; the ctypes view is dropped at once
        # (it would pin the mapping), the address stays valid as long as this mapping does
        c = ctypes.c_char.from_buffer(self.mm)
        self.addr = ctypes.addressof(c)
        del c

    def clear(self) -> None:
        if self.used and self.mm is not None:
            self.mm.madvise(_mmap.MADV_DONTNEED, 0, min(self.size, self.used))
        self.used = 0


_XATTR_BUF = ctypes.create_string_buffer(1 << 16)     # XATTR_LIST_MAX: 64 KiB of names


def _remove_xattrs(path: str) -> bool:
    """Remove every extended attribute of ``path`` (not following a symlink); True when none is left. The
    names are a program's bytes (a ``user.*`` name can be 255 of them): they are listed into a fixed buffer
    and removed through pointers into it, never made into objects, and the buffer is zeroed afterwards."""
    libc = _lib()
    p = path.encode()
    buf = _XATTR_BUF
    n = libc.llistxattr(p, buf, len(buf))
    if n < 0:
        return False
    base = ctypes.addressof(buf)
    off = 0
    ok = True
    while off < n:
        k = libc.strlen(ctypes.c_void_p(base + off))
        if k and libc.lremovexattr(p, ctypes.c_void_p(base + off)) != 0:
            ok = False
        off += k + 1
    ctypes.memset(buf, 0, n)
    return ok and libc.llistxattr(p, None, 0) == 0


_TMPFS_MAGIC = 0x01021994


def _on_tmpfs(path: str) -> bool:
    """Whether ``path`` is on a tmpfs (``statfs``'s ``f_type``, the first field of ``struct statfs``)."""
    buf = ctypes.create_string_buffer(256)
    if _lib().statfs(path.encode(), buf) != 0:
        return False
    return struct.unpack_from("@l", buf.raw, 0)[0] == _TMPFS_MAGIC


_STATBUF = bytearray(4096)
_STATVIEW = memoryview(_STATBUF)
_ZEROS = bytes(4096)


def _proc_stat(path: str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or None. The name (``comm``, 15 bytes a
    program sets with ``prctl(PR_SET_NAME)``) never becomes an object of the worker, and the buffer it was
    read into is zeroed at once: it is a program's bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        n = os.readv(fd, [_STATVIEW])
    except OSError:
        return None
    finally:
        os.close(fd)
    i = _STATBUF.rfind(b")", 0, n)
    fields = bytes(_STATVIEW[i + 2:n]).split() if i >= 0 else None
    _STATVIEW[:n] = _ZEROS[:n]
    return fields


class Unencodable(Exception):
    pass


def encode_value(x: object, depth: int = 0) -> object:
    """Encode a plain value, checking exact types (``type(x) is int``): subclasses and objects with their
    own ``__eq__`` are refused, so a tricked value cannot reach the judge.

        >>> encode_value([1, (2.5, "a"), {None: True}])
        ['l', [['i', '0x1'], ['t', [['f', '2.5'], ['s', 'a']]], ['d', [[['n'], ['b', True]]]]]]
    """
    if depth > 100:
        raise Unencodable("nested too deeply")
    t = _type(x)
    if x is None:
        return ["n"]
    if t is bool:
        return ["b", x]
    if t is int:
        return ["i", _hex(x)]
    if t is float:
        return ["f", _repr(x)]
    if t is str:
        return ["s", x]
    if t is list:
        return ["l", [encode_value(v, depth + 1) for v in x]]
    if t is tuple:
        return ["t", [encode_value(v, depth + 1) for v in x]]
    if t is dict:
        return ["d", [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in x.items()]]
    if t is set:
        return ["S", [encode_value(v, depth + 1) for v in x]]
    if t is frozenset:
        return ["F", [encode_value(v, depth + 1) for v in x]]
    if t is bytes:
        return ["y", x.hex()]
    if t is complex:
        return ["c", _repr(x.real), _repr(x.imag)]
    raise Unencodable(f"result of type {t.__module__}.{t.__qualname__} is not a plain value")


# ----------------------------------------------------------------------------------------------------------
# The program's process (after fork)
# ----------------------------------------------------------------------------------------------------------

RES_FD = 3
#: the set-up channel: the child writes one byte here and closes it just before the program's first
#: instruction. The byte is the only "set-up succeeded" signal (the exit status is not: a program can exit
#: with any status), and once the fd is closed no program code can reach the pipe any more.
READY_FD = 4
SETUP_FAILED = 121  # the child's exit status when its set-up fails (informational only, never trusted)
#: observation bytes of a stdin/stdout or script run (its runner writes a few records of at most ~300 bytes)
PROCESS_OBS_CAP = 1 << 16
#: rl_spawn_version() of the spawn.c this file calls. The trusted side names the library by a digest of the
#: spawn.c it carries (spawnlib.py), so a library from another source is never even found; this is a second
#: check of the interface
SPAWN_VERSION = 4


_WAIT_SHORT: dict[str, ctypes._CFuncPtr] = {}
_STEP: dict[str, ctypes._CFuncPtr] = {}
_PROGRAM: dict[str, ctypes._CFuncPtr] = {}


#: rl_step's result array (14 long longs, see spawn.c)
_STEP_R = struct.Struct("=14q")
#: rl_program's: a head of 8, then 16 per step (rl_step's 14, its return value, the OOM counter after it)
_PROG_STEPS = 4
_PROG_R = struct.Struct(f"={8 + 16 * _PROG_STEPS}q")


class _Root(ctypes.Structure):
    """``struct rl_root``: a writable root as the slot made it (see Worker._root_untouched)."""

    _fields_ = [("path", ctypes.c_char_p)] + [(n, ctypes.c_longlong) for n in
                                              ("mode", "uid", "gid", "nlink", "size", "atime_ns", "mtime_ns")]


class _Prog(ctypes.Structure):
    """``struct rl_prog``: what ``rl_program`` needs of one argv program (see Worker._program_c)."""

    _fields_ = [("rundir", ctypes.c_char_p), ("srcpath", ctypes.c_char_p), ("src", ctypes.c_void_p),
                ("src_len", ctypes.c_long), ("n_steps", ctypes.c_int), ("cfg", ctypes.c_void_p * _PROG_STEPS),
                ("out_room", ctypes.c_long * _PROG_STEPS), ("res_room", ctypes.c_long * _PROG_STEPS),
                ("out_buf", ctypes.c_void_p), ("res_buf", ctypes.c_void_p), ("devnull", ctypes.c_int),
                ("cg_fd", ctypes.c_int), ("oom_fd", ctypes.c_int), ("timeout_ms", ctypes.c_int),
                ("oom_before", ctypes.c_longlong), ("n_roots", ctypes.c_int), ("roots", _Root * 4)]


class _StepCfg(ctypes.Structure):
    """``struct rl_step_cfg`` of spawn.c: what ``rl_step`` needs of a step that does not change between
    programs (built once per distinct step, see Worker._step_cfg)."""

    _fields_ = [("exe", ctypes.c_char_p), ("argv", ctypes.c_void_p), ("envp", ctypes.c_void_p),
                ("stdin_path", ctypes.c_char_p), ("rundir", ctypes.c_char_p), ("rl", ctypes.c_void_p),
                ("n_rl", ctypes.c_int), ("stderr_out", ctypes.c_int), ("filter", ctypes.c_void_p),
                ("filter_len", ctypes.c_int), ("sites", ctypes.c_void_p), ("n_sites", ctypes.c_int)]


def _spawner(path: str | None) -> ctypes._CFuncPtr | None:
    """``rl_spawn`` of the library at ``path`` (the cfg's ``spawn_lib``, see spawnlib.py) with its argument
    types, or None where there is none (or it was built for another interface): the steps then fork."""
    if not path or not os.path.exists(path):
        return None
    try:
        lib = ctypes.CDLL(path)
        if lib.rl_spawn_version() != SPAWN_VERSION:
            return None
    except (OSError, AttributeError):
        return None
    fn = lib.rl_spawn
    # the short-step wait (rl_wait_short), same library: kept on the spawner (see Worker.run_once)
    w = lib.rl_wait_short
    w.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_long, ctypes.c_int,
                  ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_longlong)]
    w.restype = ctypes.c_int
    _WAIT_SHORT[path] = w
    # a whole short step in one call (rl_step: pipes, spawn, short wait, reads, children's CPU, whether any
    # process is left), same library (see Worker._step)
    st = lib.rl_step
    st.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_long,
                   ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
    st.restype = ctypes.c_int
    _STEP[path] = st
    # a whole argv program's common case in one call (rl_program: its directory and source, the steps while
    # they go well, the clean-up), same library (see Worker._program_c)
    pr = lib.rl_program
    pr.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    pr.restype = ctypes.c_int
    _PROGRAM[path] = pr
    p, i = ctypes.c_char_p, ctypes.c_int
    fn.argtypes = [p, ctypes.POINTER(p), ctypes.POINTER(p), p, i, i, i, i, i, p, ctypes.POINTER(ctypes.c_longlong),
                   i, p, i, ctypes.POINTER(i), i]
    fn.restype = i
    return fn


# The program shares this process: bind what the runner needs now, so patching builtins or modules
# (``builtins.len = ...``, ``json.dumps = ...``) cannot garble the result channel by accident.
_dumps = dumps
_pack_len = struct.Struct("<I").pack
_os_write = os.write
_len = len
_getpid = os.getpid
_exit_now = os._exit
#: the pid of the program's own process, the one the worker started (set in ``_child``): see _owner_only
_owner = [0]


def _owner_only() -> None:
    """Control came back into the runner. In a process the program forked (its function returned or raised
    there, its module or script ended there), end that process here, silently: only the program's own
    process writes records, answers the judge process's calls or flushes the runner's stdout. A daemon
    whose ``setsid`` failed would otherwise report an error for a test its parent passed, first or second
    as the scheduler had it (issue 32: one program, ``runtime_error`` alone and ``pass`` in a batch)."""
    if _getpid() != _owner[0]:
        _exit_now(0)
_type = type
_hex = hex
_repr = repr


def _emit(rec: list) -> None:
    _owner_only()
    data = _dumps(rec).encode("ascii")
    data = _pack_len(_len(data)) + data
    view = memoryview(data)
    while view:
        n = _os_write(RES_FD, view)
        view = view[n:]


def _msg(e: BaseException) -> str:
    try:
        s = f"{type(e).__name__}: {e}"
    except BaseException:
        s = type(e).__name__
    return s[:300]


def _strict_eq(a: object, b: object) -> bool:
    """Equality for the tests the judge process runs: both sides must be plain values (see encode_value)."""
    try:
        encode_value(a)
        encode_value(b)
    except Unencodable:
        return False
    return bool(a == b)


def _run_program(req: dict) -> None:
    mode = req["mode"]
    g: dict = {"__name__": "__main__" if mode != "call" else "__solution__", "__builtins__": builtins}
    try:
        mm, n = req["_src"]
        code = compile(mm[:n].decode("utf-8", "surrogatepass"), "solution.py", "exec")
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as e:
        _emit(["c", _msg(e)])
        _emit(["d"])
        return
    try:
        exec(code, g)
        if mode == "call" and req.get("setup"):
            exec(req.get("_setup") or compile(req["setup"], "tests.py", "exec"), g)
    except SystemExit as e:
        if mode == "call":
            _emit(["L", "runtime_error", "SystemExit while loading: " + repr(e.code)[:100]])
            _emit(["d"])
            return
        _flush()
        code_ = e.code
        _emit(["x", 0 if code_ is None else (code_ if type(code_) is int else 1)])
        _emit(["d"])
        return
    except MemoryError as e:
        _emit(["L", "memory", _msg(e)])
        _emit(["d"])
        return
    except BaseException as e:
        _emit(["L", "runtime_error", _msg(e)])
        _emit(["d"])
        return
    _owner_only()    # a process the module forked goes no further (it would run the tests too)
    if mode != "call":
        _flush()
        _emit(["x", 0])
        _emit(["d"])
        return

    entry = req.get("entry")
    cand = None
    if entry:
        cand = g.get(entry)
        if cand is None and isinstance(g.get("Solution"), type):
            try:
                cand = getattr(g["Solution"](), entry)
            except BaseException:
                cand = None
        if not callable(cand):
            _emit(["c", f"entry point {entry!r} is not defined"])
            _emit(["d"])
            return
    loc = {req.get("param") or "candidate": cand}
    i = 0
    for p in req.get("probes", ()):
        try:
            if "e" in p:
                v = eval(p.get("_c") or compile(p["e"], "tests.py", "eval"), g, loc)
            else:
                v = cand(*p["a"])
        except MemoryError as e:
            _emit(["t", i, "memory", _msg(e)])
        except BaseException as e:
            _emit(["t", i, "error", _msg(e)])
        else:
            try:
                _emit(["t", i, "ok", encode_value(v)])
            except (Unencodable, RecursionError) as e:
                _emit(["t", i, "unenc", _msg(e)])
            except MemoryError as e:
                _emit(["t", i, "memory", _msg(e)])
        i += 1
    calls = req.get("_calls")
    if calls is not None:
        # Tests that could not be split run in the judge process, never here: this process only answers
        # its calls, one at a time, until the judge process closes the channel.
        _serve_calls(calls[0], calls[1], g, entry, cand)
    _emit(["d"])


def _flush() -> None:
    _owner_only()
    try:
        sys.stdout.flush()
    except BaseException:
        pass


# ----------------------------------------------------------------------------------------------------------
# The judge process: tests that cannot be split into probes run here, with the program behind a proxy
# ----------------------------------------------------------------------------------------------------------
#
# A test with loops, locals or helpers (HumanEval/32's `poly`, /38's `encode_cyclic`) cannot be split into a
# probe and a judge expression. It runs in a second process of the slot, forked from the worker (which never
# runs program code) and holding no program code: the *judge process*. There ``candidate`` (and every name of
# the program the tests call) is a proxy; each call crosses to the program's process as plain data (the
# type-exact encoding above), the program's process calls its function and sends the type-exactly encoded
# result back, and the judge process decodes it (bounded) and goes on with the test. Pass/fail per test
# leaves the judge process on a pipe only it holds. The program's process never sees the test code, the
# expected values or the judging: reading its frames, its globals or fd 3 finds nothing that decides a verdict.

MAX_INT_HEX = 100_000      # hex digits of one decoded int (linear-time conversion)
MAX_SAME_HASH = 8          # elements of one decoded set/dict that may share a hash value (see safe_eval)
JUDGE_OUT_CAP = 1 << 20    # bytes the worker accepts from the judge process (a few hundred per test)
_JUDGE_SPILL = 1 << 16     # past the cap, further records are read (counted, then overwritten) here
_unpack_len = struct.Struct("<I").unpack
_os_read = os.read
_MIRRORED = {name: getattr(builtins, name) for name in (
    "Exception", "ArithmeticError", "LookupError", "ValueError", "TypeError", "KeyError", "IndexError",
    "ZeroDivisionError", "OverflowError", "AttributeError", "NameError", "UnboundLocalError", "RuntimeError",
    "RecursionError", "NotImplementedError", "UnicodeError", "UnicodeDecodeError", "UnicodeEncodeError")}


class Malformed(ValueError):
    """An encoded value that is not one (or one the judge refuses to build, e.g. a hash flood)."""


def _check_hashes(items: list) -> None:
    """Refuse more than :data:`MAX_SAME_HASH` items of one hash value (the judge's copy of
    ``safe_eval.check_hashes``: this file imports nothing of rewardlang). O(n log n), no table built."""
    n = len(items)
    if n <= MAX_SAME_HASH:
        for x in items:
            hash(x)
        return
    hs = sorted(map(hash, items))
    run = best = 1
    for i in range(1, n):
        if hs[i] == hs[i - 1]:
            run += 1
            if run > best:
                best = run
        else:
            run = 1
    if best > MAX_SAME_HASH:
        raise Malformed(f"{best} elements of a set or dict share one hash value")


def decode_plain(enc: object, depth: int = 0) -> object:
    """Inverse of :func:`encode_value`, safe on untrusted input: bounded depth, int size and float text,
    sets and dicts built only after :func:`_check_hashes`. Raises :class:`Malformed` (or ValueError).

        >>> decode_plain(encode_value([1, (2.5, "a"), {None: True}, frozenset({3})]))
        [1, (2.5, 'a'), {None: True}, frozenset({3})]
    """
    if depth > 120 or type(enc) is not list or not enc or type(enc[0]) is not str:
        raise Malformed("malformed value")
    tag = enc[0]
    if tag == "n":
        return None
    if len(enc) < 2:
        raise Malformed("malformed value")
    v = enc[1]
    tv = type(v)
    if tag == "b" and tv is bool:
        return v
    if tag == "i" and tv is str and len(v) <= MAX_INT_HEX:
        return int(v, 16)
    if tag == "f" and tv is str and len(v) < 40:
        return float(v)
    if tag == "s" and tv is str:
        return v
    if tag == "y" and tv is str:
        return bytes.fromhex(v)
    if tag == "c" and len(enc) == 3 and tv is str and type(enc[2]) is str and len(v) < 40 and len(enc[2]) < 40:
        return complex(float(v), float(enc[2]))
    if tv is list:
        if tag == "l":
            return [decode_plain(x, depth + 1) for x in v]
        if tag == "t":
            return tuple([decode_plain(x, depth + 1) for x in v])
        if tag == "S" or tag == "F":
            items = [decode_plain(x, depth + 1) for x in v]
            _check_hashes(items)
            return set(items) if tag == "S" else frozenset(items)
        if tag == "d":
            keys, vals = [], []
            for kv in v:
                if type(kv) is not list or len(kv) != 2:
                    raise Malformed("malformed dict")
                keys.append(decode_plain(kv[0], depth + 1))
                vals.append(decode_plain(kv[1], depth + 1))
            _check_hashes(keys)
            return dict(zip(keys, vals))
    raise Malformed(f"malformed value (tag {tag[:10]!r})")


def _no_json(*_a: object) -> object:
    raise ValueError("not part of the value format")


class _StrictScanContext:
    """JSON scanner settings for the program's answers: lists, strings, booleans and null only (the format
    has no JSON objects or numbers; an int of a million digits or a dict of chosen keys is never built)."""

    strict = True
    object_hook = None

    def __init__(self) -> None:
        self.object_pairs_hook = _no_json
        self.parse_float = self.parse_int = self.parse_constant = _no_json
        self.memo: dict = {}


_strict_scan = _json.make_scanner(_StrictScanContext())


def _strict_loads(data: bytes) -> object:
    text = data.decode("ascii")     # the program's encoder writes ASCII JSON; anything else is malformed
    obj, end = _strict_scan(text, 0)
    if end != len(text):
        raise ValueError("trailing data")
    return obj


def _recv(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        b = _os_read(fd, n if n < 1 << 20 else 1 << 20)
        if not b:
            raise EOFError
        chunks.append(b)
        n -= _len(b)
    return b"".join(chunks)


def _send(fd: int, data: bytes) -> None:
    view = memoryview(_pack_len(_len(data)) + data)
    while view:
        view = view[_os_write(fd, view):]


def _serve_calls(rfd: int, wfd: int, g: dict, entry: str | None, cand: object) -> None:
    """In the program's process: answer the judge process's calls until it closes the channel. A call is
    ``[name, [args], [[keyword, value], ...]]`` (encoded plain values); the answer is ``["r", value]``,
    ``["e", exception type, message]``, ``["m", message]`` (MemoryError) or ``["u", message]`` (the result
    is not a plain value)."""
    while True:
        try:
            name, args, kw = loads(_recv(rfd, _unpack_len(_recv(rfd, 4))[0]))
        except BaseException:     # EOF: the judge process is done (or gone)
            return
        try:
            fn = cand if name is None or name == entry else g.get(name)
            if not callable(fn):
                raise NameError(f"name {name!r} is not defined by the program")
            a = [decode_plain(x) for x in args]
            k = {key: decode_plain(x) for key, x in kw}
            v = fn(*a, **k)
        except MemoryError as e:
            out = ["m", _msg(e)]
        except BaseException as e:
            out = ["e", _type(e).__name__, _msg(e)]
        else:
            try:
                out = ["r", encode_value(v)]
            except (Unencodable, RecursionError) as e:
                out = ["u", _msg(e)]
            except MemoryError as e:
                out = ["m", _msg(e)]
        _owner_only()
        try:
            _send(wfd, _dumps(out).encode("ascii"))
        except MemoryError:
            try:
                _send(wfd, b'["m","MemoryError"]')
            except BaseException:
                return
        except BaseException:
            return


class _CallRefused(BaseException):
    """A call whose answer decides the test whatever the test code does with the exception (a
    ``BaseException``, so ``except Exception`` in a test does not swallow it, and remembered by the channel
    in case a bare ``except:`` does): the program's process is gone, its result is no plain value, too large,
    malformed, or it ran out of memory. ``permanent``: no later call can be answered either."""

    def __init__(self, status: str, detail: str, permanent: bool = False) -> None:
        super().__init__(detail)
        self.status, self.detail, self.permanent = status, detail[:300], permanent


class ProgramError(Exception):
    """An exception the program raised during a call, of a type the judge process does not re-create
    (re-created: ``ValueError``, ``KeyError``, ... so a test expecting one still catches it)."""


class _Channel:
    """The judge process's end of the call channel (one call at a time: write the call, read the answer)."""

    def __init__(self, wfd: int, rfd: int, budget: int) -> None:
        self.wfd, self.rfd = wfd, rfd
        self.budget = budget        # bytes of answers still accepted (the program's observation limit)
        self.sticky: _CallRefused | None = None
        self.calls = 0

    def refuse(self, status: str, detail: str, permanent: bool = False) -> _CallRefused:
        self.sticky = _CallRefused(status, detail, permanent)
        return self.sticky

    def call(self, name: str | None, args: tuple, kwargs: dict) -> object:
        if self.sticky is not None:
            raise self.sticky
        try:
            msg = dumps([name, [encode_value(a) for a in args], [[k, encode_value(v)] for k, v in kwargs.items()]])
        except (Unencodable, RecursionError) as e:
            raise self.refuse("fail", f"an argument cannot be sent to the program ({_msg(e)})") from None
        self.calls += 1
        try:
            _write_all(self.wfd, pack_frame(msg.encode("ascii")))
            n = struct.unpack("<I", _read_exact(self.rfd, 4))[0]
            if n > self.budget:
                raise self.refuse("limit", "the program's results exceed the observation limit", True)
            self.budget -= n
            data = _read_exact(self.rfd, n)
        except (OSError, EOFError):
            raise self.refuse("gone", "the program's process ended during a call", True) from None
        try:
            rec = _strict_loads(data)
            if type(rec) is not list or not rec or type(rec[0]) is not str:
                raise ValueError("not a record")
            tag = rec[0]
            if tag == "r" and len(rec) == 2:
                return decode_plain(rec[1])
        except (ValueError, TypeError, RecursionError, OverflowError, UnicodeError, IndexError) as e:
            raise self.refuse("fail", f"malformed result from the program: {_msg(e)}") from None
        if tag == "e" and len(rec) == 3 and type(rec[1]) is str and type(rec[2]) is str:
            exc = _MIRRORED.get(rec[1], ProgramError)(f"raised by the program: {rec[2][:300]}")
            exc._rl_program = True          # type: ignore[attr-defined]
            raise exc
        if tag == "m":
            raise self.refuse("memory", "MemoryError in the program")
        if tag == "u" and len(rec) == 2 and type(rec[1]) is str:
            raise self.refuse("fail", f"result could not be encoded (not a plain value): {rec[1][:200]}")
        raise self.refuse("fail", "malformed answer from the program")


class _Proxy:
    """``candidate`` in the judge process: calling it calls the program's function in the program's process."""

    __slots__ = ("_ch", "_name")

    def __init__(self, ch: _Channel, name: str | None) -> None:
        self._ch, self._name = ch, name

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._ch.call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self._name} of the program (called in its own process)>"


def _run_judged_test(code: object, g: dict, param: _Proxy, ch: _Channel) -> tuple[str, str]:
    ns: dict = {}
    try:
        exec(code, g, ns)
        ns["__rl_test"](param, _strict_eq)
    except _CallRefused:
        res = ("fail", "")          # replaced below by the refusal itself
    except AssertionError:
        # no message: records pass through the worker, whose memory later programs inherit (a test's
        # message may hold expected values)
        res = ("fail", "AssertionError")
    except MemoryError:
        res = ("fail", "the test code ran out of memory in the judge process")
    except NameError as e:
        if getattr(e, "_rl_program", False):
            res = ("error", _msg(e))
        else:   # a name only the program's module could have resolved: never looked up there (see docs)
            res = ("fail", (f"{_msg(e)} (the tests run in the judge process: names of the program's module "
                            "other than the functions under test are not visible to them)"))
    except BaseException as e:
        if getattr(e, "_rl_program", False):
            res = ("error", _msg(e))     # the program's own exception, with its own message
        else:
            res = ("error", f"{type(e).__name__} in the test code")
    else:
        res = ("pass", "")
    if ch.sticky is not None:
        return ch.sticky.status, ch.sticky.detail
    return res


def _judge_main(job: dict, ch: _Channel, vfd: int) -> None:
    """Run the judged tests; one record per test on ``vfd``: ``["t", index, status, detail]`` with status
    ``pass``, ``fail``, ``error`` (an exception), ``memory``/``limit`` (the program's MemoryError, results
    over the observation limit) or ``gone`` (the program's process ended: its own termination decides),
    then ``["end"]``."""
    def emit(rec: list) -> None:
        _write_all(vfd, pack_frame(dumps(rec).encode("ascii")))

    g: dict = {"__name__": "__tests__", "__builtins__": builtins}
    for name in job["proxy"]:
        g[name] = _Proxy(ch, name)
    param = _Proxy(ch, job["entry"])
    setup_error = None
    try:
        for src, code in job["setup"]:
            exec(code if code is not None else compile(src, "tests.py", "exec"), g)
    except BaseException as e:
        setup_error = _msg(e)
    for j, src in enumerate(job["tests"]):
        i = job["base"] + j
        if setup_error is not None:
            emit(["t", i, "fail", "the tests' set-up failed in the judge process: " + setup_error])
            continue
        if ch.sticky is not None and not ch.sticky.permanent:
            ch.sticky = None
        try:
            code = compile(src, "tests.py", "exec")
        except BaseException as e:
            emit(["t", i, "error", _msg(e)])
            continue
        status, detail = _run_judged_test(code, g, param, ch)
        emit(["t", i, status, detail])
        if ch.sticky is not None and ch.sticky.permanent:
            break      # the program is gone or over its limit: the remaining tests cannot run
    try:
        os.close(ch.wfd)      # the program's process sees EOF and finishes
    except OSError:
        pass
    emit(["end"])


def _close_all_but(keep: tuple[int, ...] | list[int], start: int = 3) -> None:
    lo = start
    for fd in sorted(keep):
        if fd >= lo:
            os.closerange(lo, fd)
            lo = fd + 1
    os.closerange(lo, 1 << 16)


def _judge_child(state: "Worker", req: dict, job: dict, limits: list[tuple[int, int]], call_w: int,
                 ans_r: int, verdict_w: int) -> None:
    """Turn the forked process into the judge process; never returns. It holds no program code: it is a
    fork of the worker (which never runs any), and the request's program text is dropped first."""
    try:
        src = req.get("_src")
        req.clear()            # the only reference to the program's text in this process
        if src is not None:
            src[0].close()     # and its only copy: the mapping the worker read it into, unmapped here
        # The judged tests come as the last frame of the request, read here from the protocol pipe: they
        # never pass through the worker, so no program (a fork of the worker) can find them in its memory.
        part = loads(_read_exact(state.rfd, struct.unpack("<I", _read_exact(state.rfd, 4))[0]))
        tests = part["inside"]
        if type(tests) is not list or len(tests) != job["n"] or not all(type(t) is str for t in tests):
            raise ValueError("malformed judged tests")
        job["tests"] = tests
        job["setup"] = [x for x in ((part.get("jsetup") or "", None), job["setup"]) if x[0]]
        os.setsid()            # its own session and group: not the program's (the program may kill its own)
        fd0 = os.open("/dev/null", os.O_RDONLY)
        os.dup2(fd0, 0)
        os.dup2(state.devnull, 1)
        os.dup2(state.devnull, 2)
        _close_all_but((call_w, ans_r, verdict_w))
        os.chdir("/")
        setr = resource.setrlimit
        for res, val in limits:
            setr(res, (val, val))
        _prctl(PR_SET_DUMPABLE, 0)  # inherited from the worker already; the program cannot open our /proc files
        # Imports only from the interpreter's own directories: never from the worker's directory or a place
        # the slot can write (a program could leave a `random.py` there).
        here = os.path.dirname(os.path.abspath(__file__))
        writable = [here] + [d for d in [state.tmp, "/tmp", "/dev/shm"] + list(state.wipe) if d]
        sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and not any(
            p == w or p.startswith(w.rstrip("/") + "/") for w in writable)]
        sys.path_importer_cache.clear()
        if state.landlock_paths is not None:
            if not landlock_restrict(state.landlock_paths, []) and state.require_landlock:
                os._exit(SETUP_FAILED)
        if state.program_filter is not None:
            state.program_filter.install(os.getpid())
        _write_all(verdict_w, pack_frame(b'["R"]'))
    except BaseException:
        os._exit(SETUP_FAILED)
    try:
        _judge_main(job, _Channel(call_w, ans_r, job["budget"]), verdict_w)
    except BaseException:
        pass
    os._exit(0)


_JUDGE_READY = pack_frame(b'["R"]')


def _read_capped(fd: int, ent: list) -> int:
    """Read from a program's pipe into its buffer (``ent``: buffer, bytes so far, cap, reason), at most one
    byte past the cap. Returns the bytes read, 0 at EOF (or with the buffer full past the cap)."""
    buf, n, cap = ent[0], ent[1], ent[2]
    if n > cap:
        return 0
    k = os.readv(fd, [buf.view[n:cap + 1]])
    ent[1] = n + k
    if ent[1] > buf.used:
        buf.used = ent[1]
    return k


def _built(rundir: str, name: object) -> bool:
    """Whether ``name`` (a file an argv step needs from the steps before it) is a regular file in the run
    directory (a symlink is not)."""
    if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
        return False
    try:
        return _stat.S_ISREG(os.lstat(os.path.join(rundir, name)).st_mode)
    except OSError:
        return False


def _step_env(step: dict, rundir: str) -> dict[str, str]:
    """An argv step's environment, ``{run}`` replaced by its run directory."""
    return {str(k): str(v).replace("{run}", rundir) for k, v in step.get("env", {}).items()}


def _vm_size() -> int:
    """The worker's address space now, bytes (``/proc/self/statm``)."""
    return int(os.pread(_statm_fd(), 64, 0).split()[0]) * _PAGE


def _limit_plan(lim: dict, vm: int | None = None) -> list[tuple[int, int]]:
    """The rlimits of the next program, computed in the worker before fork (the child's address space is
    the worker's at that moment, so "current size + budget" is known here; ``vm``: that size, when read)."""
    if vm is None:
        vm = _vm_size()
    plan = [
        (resource.RLIMIT_CPU, int(lim["cpu"]) + 1),
        (resource.RLIMIT_AS, vm + int(lim["mem"])),
        (resource.RLIMIT_FSIZE, int(lim["fsize"])),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MEMLOCK, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
    ]
    if int(lim["nproc"]) > 0:
        plan.append((resource.RLIMIT_NPROC, int(lim["nproc"])))
    return plan


_PAGE = os.sysconf("SC_PAGE_SIZE")
_STATM: list[int] = []


def _statm_fd() -> int:
    """``/proc/self/statm`` opened once (one ``pread`` per program instead of open, stat, read, close).
    Opened on first use, in the worker: a fork's child closes it with every other descriptor."""
    if not _STATM:
        _STATM.append(os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
    return _STATM[0]


class PreparedFilter:
    """The program filter as a ready ``sock_fprog``: after fork the child only writes its pid into the
    buffer and calls prctl. Everything is allocated in the worker, so the child touches few pages (each
    page a forked child writes is a copy-on-write fault, the main cost of a fork per program)."""

    def __init__(self, deny: tuple[str, ...]) -> None:
        self.template = FilterTemplate(deny)
        raw = bytes(self.template.raw)
        self.buf = ctypes.create_string_buffer(raw, len(raw))
        self.prog = _SockFprog(len(raw) // 8, ctypes.cast(self.buf, ctypes.c_void_p))
        self.prog_ref = ctypes.byref(self.prog)
        self.view = memoryview(self.buf).cast("B")
        self.prctl = _lib().prctl

    def install(self, pid: int) -> None:
        for off, sign in self.template.sites:
            struct.pack_into("=I", self.view, off, (sign * pid) & 0xFFFFFFFF)
        if self.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self.prog_ref, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "seccomp")


def _prefer_as_oom_victim(state: Worker) -> None:
    """oom_score_adj 1000: when memory runs out (in the program's group, or on the host), the kernel kills
    a program first. Raising one's own score needs no privilege, but the file of a non-dumpable process
    is root's: the child is dumpable for the few microseconds of the write (no program code exists yet,
    and no other process of this uid but the worker, which is not affected). Best effort: the memory
    group's limit does not depend on it."""
    prctl = state.prctl
    try:
        if prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0:
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            try:
                os.write(fd, b"1000")
            finally:
                os.close(fd)
    except OSError:
        pass
    finally:
        if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_DUMPABLE")


def _child(state: "Worker", req: dict, limits: list[tuple[int, int]], stdin_path: str, out_w: int,
           res_w: int, ready_w: int, rundir: str, step: dict | None = None) -> None:
    """Turn the forked process into the program's process; never returns. Keep this lean: signals,
    stdio objects, the environment and the filter were prepared in the worker. With ``step`` (an argv
    program's compile or run step, see :meth:`Worker.run_steps`) the process execs the step's argv after
    the same set-up instead of running Python source."""
    try:
        if state.cg_procs is not None:
            # into the program's memory group before anything is allocated: every page this process and
            # its children are charged for from now on counts against the program's budget
            os.write(state.cg_procs, b"0")
        os.setsid()
        fd0 = os.open(stdin_path, os.O_RDONLY)
        os.dup2(fd0, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w if step is not None and step.get("stderr") else state.devnull, 2)
        os.dup2(res_w, RES_FD)
        os.dup2(ready_w, READY_FD)
        _close_all_but(req.get("_calls") or (), READY_FD + 1)  # the call channel's ends, when tests are judged
        os.chdir(rundir)
        pid = os.getpid()
        _owner[0] = pid
        setr = resource.setrlimit
        for res, val in limits:
            setr(res, (val, val))
        if state.landlock_paths is not None:
            if not landlock_restrict(state.landlock_paths, [rundir]) and state.require_landlock:
                os._exit(SETUP_FAILED)
        _prefer_as_oom_victim(state)
        if state.program_filter is not None:
            state.program_filter.install(pid)
        if step is not None:
            # The set-up byte, then exec: the fd closes on exec (no program code can ever write it), and
            # stays open only when the exec failed, to say so with a second byte (an absent toolchain or
            # binary: never the program's doing, see languages.py).
            os.set_inheritable(READY_FD, False)
            os.write(READY_FD, b"R")
            try:
                os.execve(step["argv"][0], step["argv"], _step_env(step, rundir))
            except OSError:
                os.write(READY_FD, b"E")
            os._exit(SETUP_FAILED)
        os.write(READY_FD, b"R")
        os.close(READY_FD)
    except BaseException:
        os._exit(SETUP_FAILED)
    try:
        _run_program(req)
    except BaseException:
        pass
    os._exit(0)


# ----------------------------------------------------------------------------------------------------------
# The worker (supervisor) loop
# ----------------------------------------------------------------------------------------------------------

_CLK = os.sysconf("SC_CLK_TCK")

#: a pass of the monitor's loop that ends this many seconds later than its poll's timeout allowed: the monitor
#: itself did not run meanwhile (stopped from outside with its slot, or given no CPU at all), and that time is
#: counted on neither of a program's wall clocks (RunClock)
STALL_S = 1.0


class RunClock:
    """The two wall clocks of one run, as the monitor's loop sees them: the idle wall (time in which the program
    was neither running nor waiting for a CPU, which the program alone fills: sleeping, blocked, stopped while
    the monitor watched) against ``wall_limit`` (the ``wall`` reason, the program's own timeout), and the time
    elapsed against ``hard_wall`` (the ``overload`` reason: the machine gave the program too little CPU to
    decide, an infrastructure outcome). Neither counts the time in which the monitor itself did not run (a pass
    of its loop that came over :data:`STALL_S` late): a job stopped with SIGSTOP and continued, its programs with
    it, goes on as if it had not been stopped, and a machine that starves the monitor can at worst make a run an
    infrastructure outcome, never a timeout. A program that is runnable now is not idle, whatever its credited
    busy time says (a wait for a CPU is credited once the thread runs).

        >>> c = RunClock(0.0, wall_limit=3.0, hard_wall=13.0)
        >>> c.woke(0.02, 0.02); c.reason(0.02, 0.02, runnable=True)      # running
        >>> c.woke(100.0, 0.05)      # the next pass came 100 s late: the whole job was stopped
        >>> round(c.lost, 2), c.reason(100.0, 0.0, runnable=False)        # not the program's idle time
        (99.93, None)
        >>> t = 100.0
        >>> while c.reason(t, 0.0, runnable=False) is None:    # then watched, asleep: passes every 50 ms
        ...     t += 0.05
        ...     c.woke(t, 0.05)
        >>> c.reason(t, 0.0, runnable=False), 3.0 <= c.idle(t) < 3.1, round(c.lost, 2)
        ('wall', True, 99.93)
    """

    __slots__ = ("t0", "wall_limit", "hard_wall", "lost", "busy", "last")

    def __init__(self, t0: float, wall_limit: float, hard_wall: float) -> None:
        self.t0, self.wall_limit, self.hard_wall = t0, wall_limit, hard_wall
        self.lost = 0.0     # seconds in which the monitor did not run
        self.busy = 0.0     # the program's busy seconds (largest per thread, summed over the passes)
        self.last = t0      # the end of the previous pass's poll

    def woke(self, now: float, asked: float) -> None:
        """A pass's poll, asked to wait at most ``asked`` seconds, returned at ``now``."""
        late = now - self.last - asked
        if late > STALL_S:
            self.lost += late
        self.last = now

    def observed(self, now: float) -> float:
        """Seconds since the start in which the monitor ran."""
        return now - self.t0 - self.lost

    def idle(self, now: float) -> float:
        return max(0.0, self.observed(now) - self.busy)

    def deadline(self) -> float:
        """The monotonic time at which ``hard_wall`` will have been observed, if the monitor runs until then."""
        return self.t0 + self.lost + self.hard_wall

    def reason(self, now: float, dbusy: float, runnable: bool) -> str | None:
        """After a pass that found ``dbusy`` more busy seconds: ``wall``, ``overload`` or None (go on)."""
        self.busy += dbusy
        if not runnable and self.idle(now) >= self.wall_limit:
            return "wall"
        if self.observed(now) >= self.hard_wall:
            return "overload"
        return None
IPC_RMID = 0
_SYSVIPC = (("/proc/sysvipc/shm", "shmctl"), ("/proc/sysvipc/msg", "msgctl"), ("/proc/sysvipc/sem", "semctl"))


_IPC_INFO_BUF = ctypes.create_string_buffer(256)  # the kernel overwrites the fields read below


def _ipc_in_use() -> bool:
    """Whether any System V IPC object exists (three ``*_INFO`` calls, a few microseconds: the common
    case, none, costs no ``/proc`` reads). ``shm_info.used_ids``, ``msginfo.msgpool``, ``seminfo.semusz``."""
    libc = _lib()
    buf = _IPC_INFO_BUF
    if libc.shmctl(0, 14, buf) < 0 or _int_at(buf.raw, 0)[0]:
        return True
    if libc.msgctl(0, 12, buf) < 0 or _int_at(buf.raw, 0)[0]:
        return True
    return libc.semctl(0, 0, 19, buf) < 0 or bool(_int_at(buf.raw, 28)[0])


_int_at = struct.Struct("=i").unpack_from


def _remove_ipc() -> bool:
    """Remove every System V IPC object (shared memory, message queues, semaphore sets) of this IPC
    namespace, or of this dedicated uid at the ``uid`` level: programs cannot create them (seccomp), this is
    the second wall. Cheap when there are none. False if one could not be removed."""
    if not _ipc_in_use():
        return True
    ok = True
    uid = os.getuid()
    for path, fn in _SYSVIPC:
        try:
            with open(path, "rb") as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            try:
                ident = int(f[1])
                owner = int(f[7]) if fn != "semctl" else int(f[4])
            except (IndexError, ValueError):
                ok = False
                continue
            if owner != uid:
                continue
            ctl = getattr(_lib(), fn)
            r = ctl(ident, 0, IPC_RMID, None) if fn == "semctl" else ctl(ident, IPC_RMID, None)
            if r != 0:
                ok = False
    return ok


class Worker:
    def __init__(self, cfg: dict, rfd: int, wfd: int) -> None:
        self.cfg = cfg
        self.rfd, self.wfd = rfd, wfd
        self.level = cfg["level"]
        self.tmp = cfg["tmp"]                       # directory of program run dirs
        self.wipe = list(cfg.get("wipe", ()))       # directories emptied after each program
        self.kill_all = bool(cfg["kill_all"])       # kill(-1) is safe: a dedicated uid or a pid namespace
        self.ipc_clean = bool(cfg.get("ipc_clean", self.kill_all))  # IPC objects of our uid are programs'
        # Memory cgroup (set up by the trusted side, see cgroups.py): each program's process writes itself
        # into the program group through `cg_procs` right after fork, and `cg_oom` (the group's OOM-kill
        # counter) is read before and after each program. Without one, memfd_create is denied as well.
        self.memcg = bool(cfg.get("memcg"))
        self.cg_procs = cfg.get("cg_procs_fd") if self.memcg else None
        self.cg_oom = cfg.get("cg_oom_fd") if self.memcg else None
        # A counter of the program's whole CPU time (cgroups.SlotCgroup.acct_file): a program that ignores SIGCHLD
        # has its exited children reaped by the kernel, whose time then reaches no parent's counters and no walk
        # of /proc; the cgroup counted it as it was spent. "prog": the program group's own counter; "slot": the
        # slot's, less this worker's own time and the judge process's.
        self.cg_acct = cfg.get("cg_acct_fd") if self.memcg else None
        kind = str(cfg.get("cg_acct") or "cpuacct.usage:prog")
        self.acct_stat = kind.startswith("cpu.stat")
        self.acct_slot = kind.endswith(":slot")
        self.oom_seen = self._oom_kills()
        deny = PROGRAM_DENY if self.memcg else PROGRAM_DENY + FALLBACK_DENY
        self.program_filter = PreparedFilter(deny) if cfg.get("seccomp", True) else None
        self.devnull = os.open("/dev/null", os.O_WRONLY)
        self.prctl = _lib().prctl
        self.landlock_paths = cfg.get("landlock_read")
        self.require_landlock = bool(cfg.get("require_landlock", False))
        # argv steps are started by rl_spawn (spawn.c: a vfork-style clone running the set-up of _child in C,
        # then exec) where its library is installed under /usr and /usr is the host's, read-only (bwrap,
        # namespaces: a program cannot replace it) and no Landlock rule is needed: a fork of this Python
        # process costs more than a cheap toolchain's whole step (page tables copied, copy-on-write faults on
        # both sides while the child lives, the child's Python set-up, its exec's tear-down). Else: the fork.
        self.spawner = (_spawner(cfg.get("spawn_lib")) if self.level in ("bwrap", "namespaces")
                        and self.landlock_paths is None else None)
        self.wait_short = _WAIT_SHORT.get(cfg.get("spawn_lib") or "") if self.spawner is not None else None
        self._wait_r = (ctypes.c_longlong * 5)()
        if self.spawner is not None:
            tpl = self.program_filter.template if self.program_filter is not None else None
            self.spawn_filter = bytes(tpl.raw) if tpl is not None else None   # the marker pid at the sites
            sites = [x for site in (tpl.sites if tpl is not None else ()) for x in site]
            self.spawn_sites = (ctypes.c_int * max(1, len(sites)))(*sites)
            self.n_sites = len(sites) // 2
            self._spawn_args: dict[tuple, tuple] = {}
        # a whole short argv step in one call (rl_step, same library): its step configurations, result array
        self.step_fn = _STEP.get(cfg.get("spawn_lib") or "") if self.spawner is not None else None
        self._step_cfgs: dict[tuple, tuple] = {}
        self._step_r = (ctypes.c_longlong * 14)()
        self._step_r_addr = ctypes.addressof(self._step_r)
        self._step_r_view = memoryview(self._step_r).cast("B")   # read back in one unpack (see _step)
        self.cg_fd = -1 if self.cg_procs is None else int(self.cg_procs)
        self.prog_fn = _PROGRAM.get(cfg.get("spawn_lib") or "") if self.spawner is not None else None
        self._codes: dict = {}
        self._headers: dict[bytes, dict] = {}   # argv request headers as parsed (see serve)
        self.me = os.getpid()
        self.runs = 0
        # The roots of the writable places as the slot made them: a program owns them (same uid) and could
        # change their mode, times or extended attributes (an answer table in a `user.*` xattr, a default
        # ACL, `chmod 0555 /tmp` to break the next program), so each is put back after every program.
        self.fresh = {d: os.stat(d, follow_symlinks=False) for d in self.wipe}
        # Roots whose emptiness one stat can prove (see _root_untouched): a tmpfs, empty now.
        self.countable = {d for d in self.wipe if _on_tmpfs(d) and not os.listdir(d)}
        self._root_paths = {d: d.encode() for d in self.wipe}
        self._llistxattr = _lib()["llistxattr"]   # its own function object: argtypes of its own
        self._llistxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        self._llistxattr.restype = ctypes.c_ssize_t
        # rl_program's structure, its fixed fields set once (see _program_c); only where every root can be
        # proven untouched with one stat (the tmpfs roots a slot makes)
        self.rundir = os.path.join(self.tmp, "run")
        self._prog = None
        if self.prog_fn is not None and self.countable == set(self.wipe) and 0 < len(self.wipe) <= 4:
            pg = self._prog = _Prog()
            self._prog_bufs = [self.rundir.encode()]
            pg.rundir = self._prog_bufs[0]
            pg.devnull, pg.cg_fd, pg.timeout_ms = self.devnull, self.cg_fd, 20
            pg.oom_fd = -1 if self.cg_oom is None else int(self.cg_oom)
            pg.n_roots = len(self.wipe)
            for j, d in enumerate(self.wipe):
                f = self.fresh[d]
                pg.roots[j] = _Root(self._root_paths[d], f.st_mode, f.st_uid, f.st_gid, f.st_nlink, f.st_size,
                                    f.st_atime_ns, f.st_mtime_ns)
            self._prog_ref = ctypes.addressof(pg)
            self._prog_r = (ctypes.c_longlong * (8 + 16 * _PROG_STEPS))()
            self._prog_r_addr = ctypes.addressof(self._prog_r)
            self._prog_r_view = memoryview(self._prog_r).cast("B")
            self._srcpaths: dict[str, bytes] = {}
            self._prog_for: tuple = ()      # (steps, file name, worker size) the structure was last set for
        # What a program sends (stdout, result channel) and its judge process's records: relayed from these
        # buffers and emptied after every run, never kept in objects a later fork would inherit.
        self.out_buf = _Wiped(1 << 20)
        self.res_buf = _Wiped(1 << 20)
        self.judge_buf = _Wiped(JUDGE_OUT_CAP + _JUDGE_SPILL)

    # -- processes ------------------------------------------------------------------------------------------
    def _tree_cpu(self, sid: int, waits: dict) -> tuple[float, float, bool]:
        """CPU seconds of the session ``sid`` (the program's processes), the largest busy time (running
        or waiting in the run queue, seconds) any of its threads accumulated since the previous call
        (``waits`` keeps the totals), and whether one of its processes is running or runnable now (its wait
        for a CPU is credited to schedstat only once it runs: such a program is busy, not idle)."""
        total = 0
        dwait = 0
        runnable = False
        try:
            names = os.listdir("/proc")
        except OSError:
            return 0.0, 0.0, False
        for name in names:
            if not name.isdigit():
                continue
            f = _proc_stat(f"/proc/{name}/stat")
            if f is None:
                continue
            if int(f[3]) != sid:          # session id (programs cannot leave their session)
                continue
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
            runnable = runnable or f[0] == b"R"
            if f[17] == b"1":             # one thread: its id is the pid (no directory listing)
                tids = [name]
            else:
                try:
                    tids = os.listdir(f"/proc/{name}/task")
                except OSError:
                    continue
            for tid in tids:
                try:
                    with open(f"/proc/{name}/task/{tid}/schedstat", "rb") as fh:
                        run_ns, wait_ns = fh.read().split()[:2]
                    w = int(run_ns) + int(wait_ns)   # on a CPU or waiting for one: busy, not idle
                except (OSError, ValueError, IndexError):
                    continue
                d = w - waits.get(tid, 0)
                waits[tid] = w
                if d > dwait:
                    dwait = d
        return total / _CLK, dwait / 1e9, runnable

    def _oom_kills(self) -> int:
        """The program group's OOM-kill counter (0 without a memory cgroup)."""
        if self.cg_oom is None:
            return 0
        data = os.pread(self.cg_oom, 4096, 0)
        i = data.find(b"oom_kill ")
        return int(data[i + 9:data.index(b"\n", i)]) if i >= 0 else 0

    def _acct_seconds(self) -> float | None:
        """The CPU counter of :attr:`cg_acct` in seconds (None without one, or when it cannot be read)."""
        if self.cg_acct is None:
            return None
        try:
            data = os.pread(self.cg_acct, 4096, 0)
            if self.acct_stat:  # v2 cpu.stat: "usage_usec N" first
                i = data.index(b"usage_usec ")
                return int(data[i + 11:data.index(b"\n", i)]) / 1e6
            return int(data) / 1e9
        except (OSError, ValueError):
            return None

    def _acct_start(self) -> tuple[float, float] | None:
        """The counter and this process's own CPU time now, before a program (and its judge process) starts."""
        a = self._acct_seconds()
        return None if a is None else (a, time.process_time())

    def _acct_cpu(self, start: tuple[float, float] | None, judge: dict | None) -> float:
        """The program's CPU seconds since ``start`` by the cgroup's counter (0.0 without one): in a slot-wide
        group, less what this worker (every thread of it) and the judge process spent meanwhile. What the
        worker spends between reading the counter and its own clock is subtracted too: never more than the
        program's."""
        if start is None:
            return 0.0
        a = self._acct_seconds()
        if a is None:
            return 0.0
        used = a - start[0]
        if self.acct_slot:
            used -= time.process_time() - start[1]
            if judge is not None:
                f = _proc_stat(f"/proc/{judge['pid']}/stat")
                if f is not None:
                    used -= (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / _CLK
        return max(0.0, used)

    def _children_cpu(self) -> float:
        # getrusage, not os.times(): microseconds, not clock ticks (a 3 ms step would read 0 or 10 ms)
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def _kill_everything(self, pid: int) -> bool:
        """SIGKILL every process the program created and reap them all (we are a subreaper)."""
        # The program's process is reaped, so every process it left is a child of ours by now (we are a
        # subreaper: an orphan is reparented before its parent can be reaped). No child at all, then, means
        # nothing is left to kill: the common case costs one wait instead of a kill(-1), which walks every
        # process of the machine.
        try:
            os.waitpid(-1, os.WNOHANG)     # a zombie reaped or one still running: the kill below
        except ChildProcessError:
            return True
        deadline = time.monotonic() + 3.0
        while True:
            try:
                if self.kill_all:
                    os.kill(-1, signal.SIGKILL)
                else:
                    os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if not self.kill_all:
                self._kill_descendants()
            while True:
                try:
                    p, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    return True
                if p == 0:
                    break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    def _kill_descendants(self) -> None:
        # Without kill(-1) (same uid as others): our children are every process left (we are a subreaper).
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                f = _proc_stat(f"/proc/{name}/stat")
                if f is not None and int(f[1]) == self.me:
                    os.kill(int(name), signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                continue

    def _restore_root(self, d: str, stage: str) -> bool:
        """Put the root ``d`` back as the slot made it: mode and owner (``stage == "mode"``, before emptying:
        a root made read-only would stop the clean-up), then no extended attribute (user xattrs, ACLs) and
        the original times. False when it is not exactly fresh afterwards (the slot is then replaced).
        Path-based calls are safe: a mount point cannot be renamed or replaced by a symlink."""
        f = self.fresh[d]
        try:
            st = os.stat(d, follow_symlinks=False)
            if (st.st_uid, st.st_gid) != (f.st_uid, f.st_gid):
                os.chown(d, f.st_uid, f.st_gid, follow_symlinks=False)
            if st.st_mode != f.st_mode or (st.st_uid, st.st_gid) != (f.st_uid, f.st_gid):
                os.chmod(d, _stat.S_IMODE(f.st_mode))  # chown clears set-id bits: mode after owner
            if stage == "mode":
                return True
            no_xattr = _remove_xattrs(d)
            os.utime(d, ns=(f.st_atime_ns, f.st_mtime_ns), follow_symlinks=False)
            st = os.stat(d, follow_symlinks=False)
            return (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns) == \
                (f.st_mode, f.st_uid, f.st_gid, f.st_mtime_ns) and no_xattr
        except OSError:
            return False

    def _root_untouched(self, d: str) -> bool:
        """Whether the root ``d`` is exactly as the slot made it but for its times, proven with two system
        calls (the common case: the program wrote nothing there, or only inside the run directory, already
        removed); its times are then put back. False means "not proven": the full restore runs.

        Nothing here trusts what a program could forge. On a tmpfs a directory's size counts its entries
        (every link, mknod, mkdir, symlink, rename and whiteout adds 20 bytes, every removal takes them
        away), so the size of the empty root means no entry at all, at any depth; mode, owner and link
        count are compared exactly; ``llistxattr`` returning 0 means no extended attribute (ACLs are ones);
        the times are set back to the recorded nanoseconds. Only after every process of the program is
        gone (nothing can change the root between the check and the next program)."""
        if d not in self.countable:
            return False
        f = self.fresh[d]
        try:
            st = os.stat(d, follow_symlinks=False)
        except OSError:
            return False
        if (st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_size) != \
                (f.st_mode, f.st_uid, f.st_gid, f.st_nlink, f.st_size):
            return False
        if self._llistxattr(self._root_paths[d], None, 0) != 0:
            return False
        if (st.st_atime_ns, st.st_mtime_ns) != (f.st_atime_ns, f.st_mtime_ns):
            try:
                os.utime(d, ns=(f.st_atime_ns, f.st_mtime_ns), follow_symlinks=False)
            except OSError:
                return False
        return True

    def _wipe(self, budget: _Budget) -> bool:
        """Empty every place a program can write (the run directories' parent, ``/dev/shm``), put their roots
        back as they were, and remove the System V IPC objects it left; False when that could not be
        finished (the slot is then replaced)."""
        for d in self.wipe:
            if self._root_untouched(d):
                continue
            if not self._restore_root(d, "mode") or not _empty_dir(d, budget) or not self._restore_root(d, "all"):
                return False
        if self.ipc_clean and self.program_filter is None:
            # (with the program filter no IPC object can be created at all: shmget/msgget/semget are
            # denied, the x32 and i386 entry points too)
            return _remove_ipc()
        return True

    # -- the judge process ------------------------------------------------------------------------------------
    def _start_judge(self, req: dict, limits: list[tuple[int, int]]) -> dict:
        """Fork the judge process of this execution (before the program's, so it never inherits anything
        of it) and leave the program's ends of the call channel in ``req["_calls"]``."""
        call_r, call_w = os.pipe2(os.O_CLOEXEC)      # judge -> program: calls
        ans_r, ans_w = os.pipe2(os.O_CLOEXEC)        # program -> judge: answers
        v_r, v_w = os.pipe2(os.O_CLOEXEC)            # judge -> worker: verdicts (the program never holds it)
        job = {"entry": req.get("entry"), "proxy": list(req.get("proxy") or ()), "n": int(req["judged"]),
               "base": len(req.get("probes", ())), "setup": (req.get("setup") or "", req.get("_setup")),
               "budget": int(req["limits"]["obs"])}
        jpid = os.fork()
        if jpid == 0:
            _judge_child(self, req, job, limits, call_w, ans_r, v_w)
            os._exit(SETUP_FAILED)
        for fd in (call_w, ans_r, v_w):
            os.close(fd)
        os.set_blocking(v_r, False)
        req["_calls"] = (call_r, ans_w)
        return {"pid": jpid, "pidfd": os.pidfd_open(jpid), "v": v_r, "n": 0, "busy": 0,
                "cpu_limit": int(req["limits"]["cpu"]) + 1, "info": {}}

    def _judge_read(self, fd: int, judge: dict) -> int:
        """Read what the judge process wrote into the judge buffer: the first ``JUDGE_OUT_CAP`` bytes are
        kept, the rest is counted (``overflow``) and overwritten. Returns the bytes read (0: EOF)."""
        b = self.judge_buf
        pos = judge["n"] if judge["n"] < JUDGE_OUT_CAP else JUDGE_OUT_CAP
        assert b.view is not None
        k = os.readv(fd, [b.view[pos:JUDGE_OUT_CAP + _JUDGE_SPILL]])
        judge["n"] += k
        b.used = max(b.used, pos + k)
        return k

    def _judge_busy(self, judge: dict) -> float:
        """Seconds the judge process was running or runnable since the last call (``/proc/<pid>/schedstat``)."""
        try:
            with open(f"/proc/{judge['pid']}/schedstat", "rb") as fh:
                run_ns, wait_ns = fh.read().split()[:2]
            w = int(run_ns) + int(wait_ns)
        except (OSError, ValueError):
            return 0.0
        d, judge["busy"] = w - judge["busy"], w
        return max(0, d) / 1e9

    def _finish_judge(self, judge: dict, pid: int, overload: bool, deadline: float) -> float:
        """After the program's process ended: end the program's other processes (so the judge process reads
        EOF if it still waits for an answer), collect the judge process's records until it exits (within the
        execution's real-time budget, at least 1 s more; at once after an overload), reap it. Returns its
        CPU seconds. ``judge["info"]``: its exit, CPU, whether it met its CPU limit, whether we killed it."""
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        v, pidfd, jpid = judge["v"], judge["pidfd"], judge["pid"]
        deadline = time.monotonic() if overload else max(deadline, time.monotonic() + 1.0)
        poller = select.poll()
        poller.register(v, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        open_v, exited = True, False
        while open_v or not exited:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, _ev in poller.poll(int(left * 1000) + 1):
                if fd == pidfd:
                    exited = True
                    poller.unregister(pidfd)
                    continue
                try:
                    k = self._judge_read(v, judge)
                except BlockingIOError:
                    continue
                if not k:
                    open_v = False
                    poller.unregister(v)
        killed = not exited
        if killed:
            try:
                os.kill(jpid, signal.SIGKILL)
            except OSError:
                pass
        try:
            _, status, ru = os.wait4(jpid, 0)
            jcpu = ru.ru_utime + ru.ru_stime
        except ChildProcessError:
            status, jcpu = 0, 0.0
        while True:     # what it wrote before it ended
            try:
                if not self._judge_read(v, judge):
                    break
            except OSError:
                break
        os.close(v)
        os.close(pidfd)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        judge["info"] = {
            "exit": os.waitstatus_to_exitcode(status) if status else 0,
            "cpu": round(jcpu, 4),
            # RLIMIT_CPU ended it: the test code's own work exceeded the budget (see judge.py). Its rlimit is
            # the program's CPU limit + 1 s; the kernel's accounting fires somewhat early (1.88 s of 2 s measured
            # under load), so the program's own limit is the threshold.
            "cpu_limit": (not killed and sig in (signal.SIGKILL, signal.SIGXCPU)
                          and jcpu >= max(0.5, judge["cpu_limit"] - 1.0)),
            "killed": killed,
            "overflow": judge["n"] > JUDGE_OUT_CAP,
        }
        return jcpu

    # -- one execution --------------------------------------------------------------------------------------
    def run_once(self, req: dict, stdin_data: str | None, step: dict | None = None, first: bool = True,
                 keep: bool = False, adopt: tuple | None = None) -> dict:
        """Run the program once; its stdout, result channel and judge records are left in the worker's
        buffers (``out_len``, ``res_len``, ``judge_len`` of the returned head) for :meth:`_relay`.

        ``step``: one step of an argv program (its own argv, environment and limits); ``first`` makes the run
        directory (and writes the program's source file there), ``keep`` leaves the run directory for the
        next step (every process of this step is still killed; the clean-up runs after the last step);
        ``adopt``: a step ``rl_step`` or ``rl_program`` started that still runs at the first tick (see
        :meth:`_step`), taken over by the loop below."""
        t_start = time.monotonic()
        lim = step["limits"] if step is not None else req["limits"]
        self.runs += 1
        rundir = os.path.join(self.tmp, "run")
        if first:
            os.mkdir(rundir, 0o700)
            if step is not None:
                self._write_source(req, rundir)
        stdin_path = "/dev/null"
        if stdin_data is not None:
            stdin_path = os.path.join(self.tmp, "stdin")
            fd = os.open(stdin_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with open(fd, "w", encoding="utf-8", errors="surrogatepass") as fh:
                fh.write(stdin_data)
        if adopt is None and step is not None and self.step_fn is not None and stdin_data is None \
                and req["mode"] == "argv":
            # the common argv step, a short one, in one C call (rl_step; see _step)
            adopt = self._step(req, step, lim, rundir, keep, t_start)
            if isinstance(adopt, dict):
                return adopt
        if adopt is not None:
            # the step outlived rl_step's first tick (or its wait could not be made): the loop below takes
            # it over, running, with rl_step's pipes and starting figures
            pid, out_r, res_r, ready_r, t0, c0, oom0 = adopt
            judge = None
            spawned = True
            # the cgroup's count from here: what the step spent before its first tick (at most that tick of CPU
            # per core) is the walk's and the children's times' alone
            acct0 = self._acct_start()
        else:
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            res_r, res_w = os.pipe2(os.O_CLOEXEC)
            ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
            t0 = time.monotonic()
            c0 = self._children_cpu()
            acct0 = self._acct_start()   # before the judge process: a slot-wide counter subtracts it whole
            limits = _limit_plan(lim)
            # the counter as the previous program left it: between two programs no process is in the program
            # group (the worker and the judge process's parent never are), so it cannot have moved
            oom0 = self.oom_seen
            judge = self._start_judge(req, limits) if req.get("mode") == "call" and req.get("judged") else None
            if judge is not None and lim.get("nproc"):
                limits = _limit_plan(dict(lim, nproc=int(lim["nproc"]) + 1))  # the judge process is one of the uid's
            pid = None
            if step is not None and self.spawner is not None and judge is None:
                pid = self._spawn(step, limits, stdin_path, out_w, res_w, ready_w, rundir)
            spawned = pid is not None
            if pid is None:
                pid = os.fork()
                if pid == 0:
                    _child(self, req, limits, stdin_path, out_w, res_w, ready_w, rundir, step)
                    os._exit(SETUP_FAILED)
            os.close(out_w)
            os.close(res_w)
            os.close(ready_w)
            if judge is not None:
                for fd in req.pop("_calls"):
                    os.close(fd)
        cap_out, cap_res = int(lim["out"]), int(lim["obs"])
        if req["mode"] not in ("call", "argv"):
            # a whole-program run's channel carries three short records at most (compile error, exit, done):
            # more is the program writing there, and the trusted side would pay to read it
            cap_res = min(cap_res, PROCESS_OBS_CAP)
        # per pipe: [buffer, bytes read, cap, reason past the cap]; one byte more than the cap is read, so a
        # program that writes exactly the cap is within it and one more byte is over
        self.out_buf.ensure(cap_out + 1)
        self.res_buf.ensure(cap_res + 1)
        into = {out_r: [self.out_buf, 0, cap_out, "output"], res_r: [self.res_buf, 0, cap_res, "obs"]}
        cpu_limit, wall_limit = float(lim["cpu"]), float(lim["wall"])
        hard_wall = float(lim.get("hard_wall", 3 * wall_limit))
        reason = None
        exited = False
        got: bytes | None = None   # the set-up channel's bytes, once the short-step path has read them
        pidfd = -1
        cpu = idle_wall = 0.0
        clock = RunClock(t0, wall_limit, hard_wall)
        if adopt is None and spawned and judge is None and self.wait_short is not None:
            # The short-step path (rl_wait_short in spawn.c): wait up to the first tick for the step's exit;
            # if it came, the step is reaped and its pipes and set-up channel read there (up to each cap + 1,
            # as below), and none of the loop below runs. Else nothing was reaped or read: the loop below
            # takes over, its first tick due.
            r = self._wait_r
            k = self.wait_short(pid, 20, out_r, self.out_buf.addr, cap_out + 1, res_r, self.res_buf.addr,
                                cap_res + 1, ready_r, r)
            if k == 1:
                status, exited = int(r[0]), True
                for fd, n in ((out_r, int(r[1])), (res_r, int(r[2]))):
                    ent = into[fd]
                    ent[1] = n
                    ent[0].used = max(ent[0].used, n)
                    if n > ent[2]:
                        reason = reason or ent[3]
                got = bytes((int(r[4]) & 0xFF, int(r[4]) >> 8))[:int(r[3])]
        if got is None:
            os.set_blocking(ready_r, False)  # read after the child is reaped: the byte is there or never comes
            for fd in (out_r, res_r):
                os.set_blocking(fd, False)
            pidfd = os.pidfd_open(pid)
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            # An argv step's pipes are first left to fill (a pipe holds 64 KiB) and read when it exits or from
            # the first tick on: a short step (a syntax check, a small program) then wakes this process once,
            # at its exit, instead of once per write. A step that fills a pipe sleeps until that tick (20 ms),
            # where the pipes join the poll and the caps are checked as before.
            quiet = step is not None and judge is None
            if not quiet:
                poller.register(out_r, select.POLLIN)
                poller.register(res_r, select.POLLIN)
            if judge is not None:
                poller.register(judge["v"], select.POLLIN)
            open_fds = {out_r, res_r}
            next_tick = t0 + 0.02
            cpu = 0.0
            # The wall-clock backstop counts only time in which the program was neither running nor waiting
            # for a CPU (sleeping, stopped, blocked): each tick subtracts the largest busy time (run +
            # run-queue wait, /proc/<tid>/schedstat) of its threads. A CPU-bound program, on a quiet or a
            # saturated machine, thus meets its CPU limit, never the backstop, and a verdict does not depend
            # on load. Past `hard_wall` of real time without either limit met, the machine is too loaded to
            # decide: an infrastructure outcome.
            # (Busy time is credited when the kernel updates it, e.g. a run-queue wait when the thread next
            # runs: so the total is compared with the elapsed time, never clamped per tick.)
            # Both clocks leave out the time in which this monitor itself did not run (RunClock): stopped from
            # outside with its slot, the program was not idle by its own doing, and it is continued as if the
            # stop had not been (issue 38: a stop of the scoring job had turned a passing program into a
            # timeout, a 0 trained on).
            idle_wall = 0.0
            waits: dict = {}
            while True:
                now = time.monotonic()
                timeout_ms = max(0, int((min(next_tick, clock.deadline()) - now) * 1000) + 1)
                for fd, _ev in poller.poll(timeout_ms):
                    if fd == pidfd:
                        exited = True
                        continue
                    ent = into.get(fd)
                    try:
                        if ent is None:     # the judge process's verdict pipe
                            if not self._judge_read(fd, judge):   # type: ignore[arg-type]
                                poller.unregister(fd)
                            continue
                        k = _read_capped(fd, ent)
                    except BlockingIOError:
                        continue
                    if not k:
                        poller.unregister(fd)
                        open_fds.discard(fd)
                        continue
                    if ent[1] > ent[2]:
                        reason = ent[3]
                if exited or reason:
                    break
                now = time.monotonic()
                clock.woke(now, timeout_ms / 1000)
                if now >= next_tick or now >= clock.deadline():
                    if quiet:
                        quiet = False
                        poller.register(out_r, select.POLLIN)
                        poller.register(res_r, select.POLLIN)
                    tree, dbusy, runnable = self._tree_cpu(pid, waits)
                    if judge is not None:   # the program waits for the judge process: neither is idle then
                        dbusy += self._judge_busy(judge)
                    cpu = max(tree + (self._children_cpu() - c0), self._acct_cpu(acct0, judge))
                    if cpu >= cpu_limit:
                        reason = "cpu"
                        break
                    reason = clock.reason(now, dbusy, runnable)
                    idle_wall = clock.idle(now)
                    if reason is not None:
                        break
                    next_tick = now + (0.02 if now - t0 < 0.5 else 0.05)
            if reason is not None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = 0
            # drain what the program wrote before it ended (not waiting for EOF: a grandchild may hold the pipe)
            for fd in (out_r, res_r):
                ent = into[fd]
                while fd in open_fds and ent[1] <= ent[2]:
                    try:
                        if not _read_capped(fd, ent):
                            break
                    except (BlockingIOError, OSError):
                        break
                    if ent[1] > ent[2]:
                        reason = reason or ent[3]
        wall = time.monotonic() - t0
        # the counter's figure while the judge process is still there to be subtracted
        cpu = max(cpu, self._acct_cpu(acct0, judge))
        jcpu = 0.0   # the judge process's CPU (reaped: in the children's times, never the program's)
        if judge is not None:
            jcpu = self._finish_judge(judge, pid, reason == "overload", clock.deadline())
        cpu = max(cpu, self._children_cpu() - c0 - jcpu)
        t_end = time.monotonic()
        clean = self._kill_everything(pid)
        t_kill = time.monotonic()
        cpu = max(cpu, self._children_cpu() - c0 - jcpu)
        if reason is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGKILL, signal.SIGXCPU) \
                and cpu >= cpu_limit:
            reason = "cpu"  # the kernel's RLIMIT_CPU backstop ended it between two of our samples
        if got is None:
            try:
                got = os.read(ready_r, 2)   # written by the child before any program code ran
            except OSError:
                got = b""
        ready = got[:1] == b"R"
        exec_failed = got == b"RE"
        for fd in (out_r, res_r, pidfd, ready_r):
            if fd >= 0:
                os.close(fd)
        return self._conclude(req, step, keep, rundir, status, reason, cpu, cpu_limit, wall, idle_wall, clean, ready,
                              exec_failed, oom0, spawned, judge,
                              (t0 - t_start, t_end - t0, t_kill - t_end, t_kill),
                              min(into[out_r][1], cap_out), min(into[res_r][1], cap_res))

    def _conclude(self, req: dict, step: dict | None, keep: bool, rundir: str, status: int, reason: str | None,
                  cpu: float, cpu_limit: float, wall: float, idle_wall: float, clean: bool, ready: bool,
                  exec_failed: bool, oom0: int, spawned: bool, judge: dict | None, t: tuple, out_len: int,
                  res_len: int, oom_now: int = -1, cleaned: int = 0) -> dict:
        """The end of a run, every process of it gone: the clean-up, the OOM counter, the reasons that depend
        on them, and the head (see :meth:`run_once`; ``t``: the phases' durations and when the kill ended).
        ``oom_now`` (>= 0): the OOM counter read after the run by ``rl_program``; ``cleaned``: the clean-up
        it did (bit 1: the source and run directory removed, bit 2: every root proven untouched)."""
        # Clean-up only when every process is gone (nothing can then move files under us); what cannot be
        # finished leaves the verdict as it is and replaces the slot.
        if keep:
            wiped = clean      # the next step runs in the same directory; nothing of this step runs on
        else:
            budget = _Budget(WIPE_BUDGET)
            if clean and not cleaned & 1:
                # An argv program's files are there (its source, what it compiled): emptied first (the same
                # safe walk, which enters no symlink), so that the roots are then proven untouched with a
                # stat (_root_untouched) instead of a walk of /tmp; anything else is left to _wipe. An
                # interpreted language's program leaves only the source this worker wrote (a name of ours,
                # never the program's): that one unlink and rmdir come first (no failed rmdir before them),
                # the walk only when more is there. (Path-based: a program that replaced the directory by a
                # symlink can only point it at places of its own uid, and the roots are checked below all
                # the same.) A Python program's directory is usually empty: one rmdir.
                try:
                    if step is not None:
                        os.unlink(os.path.join(rundir, req["file"]))
                    os.rmdir(rundir)  # rmdir never follows a symlink
                except OSError:
                    if step is not None and _empty_dir(rundir, budget):
                        try:
                            os.rmdir(rundir)
                        except OSError:
                            pass
            if cleaned & 2:     # the roots proven untouched by rl_program: what _wipe would do past them
                wiped = clean and (not (self.ipc_clean and self.program_filter is None) or _remove_ipc())
            else:
                wiped = clean and self._wipe(budget)
        if reason == "wall" and cpu >= cpu_limit:
            reason = "cpu"
        # Read after every process of the program is gone (the counter moves when the kill is decided):
        # a kill by the memory cgroup means the program went over its budget, whichever of its processes
        # the kernel chose; only a CPU timeout (more severe) keeps its class.
        self.oom_seen = oom_now if oom_now >= 0 else self._oom_kills()
        oom = self.oom_seen - oom0
        if oom > 0 and reason != "cpu":
            reason = "memory"
        if reason is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            # SIGKILL that none of the program's limits explains: the sandbox sends its kills only with a
            # reason (cpu, wall, overload, output), RLIMIT_CPU's is `cpu` above and the memory cgroup's
            # `memory` (its OOM-kill counter moved). Left: the host's OOM killer, an operator, or the
            # program itself (kill -9 of its own pid or group). The trusted side runs the program again
            # once on a fresh slot; a second such kill is the program's own doing (see pool.py).
            reason = "killed"
        head = {
            "exit": os.waitstatus_to_exitcode(status) if status else 0,
            "reason": reason,
            "cpu": round(cpu, 4),
            "wall": round(wall, 4),
            "idle": round(idle_wall, 4),
            "setup_failed": not ready,
            "clean": clean,
            "recycle": not wiped,
            "oom": oom,
            "exec_failed": exec_failed,
            "not_built": False,
            "spawn": "clone" if spawned else "fork",
            "t": [round(t[0], 5), round(t[1], 5), round(t[2], 5), round(time.monotonic() - t[3], 5)],
        }
        # what to relay: the bytes within the cap (past it the class is decided, the rest is not needed)
        head["res_len"] = res_len
        head["out_len"] = out_len
        if judge is not None:
            head["judge"] = judge["info"]
            head["judge_len"] = min(judge["n"], JUDGE_OUT_CAP)
            assert self.judge_buf.view is not None
            if self.judge_buf.view[:len(_JUDGE_READY)] != _JUDGE_READY:
                head["setup_failed"] = True     # the judge process could not be set up: masked, slot replaced
        return head

    def _step(self, req: dict, step: dict, lim: dict, rundir: str, keep: bool, t_start: float) -> dict | tuple | None:
        """One argv step through ``rl_step`` (spawn.c): the pipes, the spawn, the wait up to the first tick, the
        reads, the children's CPU and the check that no process is left, in one C call; the verdict's
        reasons, the kill of what is left, the clean-up and the head as :meth:`run_once` has them. Returns
        the head when the step was reaped; ``(pid, out_r, res_r, ready_r, t0, c0, oom0)`` when it still runs
        at the first tick (``run_once``'s loop takes it over); None when no child could be made that way
        (``run_once`` starts it as before). A step that ends within the first tick, the usual syntax check
        or small program, costs this process one call and the lines below, not a pass of ``run_once``."""
        cfg = self._step_cfg(step, lim, rundir)
        cap_out, cap_res = int(lim["out"]), int(lim["obs"])
        self.out_buf.ensure(cap_out + 1)
        self.res_buf.ensure(cap_res + 1)
        # the counter as the previous program left it (see run_once)
        oom0 = self.oom_seen
        k = self.step_fn(cfg, self.devnull, self.cg_fd, 20, self.out_buf.addr, cap_out + 1, self.res_buf.addr,
                         cap_res + 1, self._step_r_addr)
        if k < 0:
            return None
        r = _STEP_R.unpack(self._step_r_view)
        pid, t0, c0 = r[0], r[4] / 1e9, r[5] / 1e6
        if k == 0:
            return pid, r[1], r[2], r[3], t0, c0, oom0
        return self._after_step(req, step, lim, rundir, keep, t_start, r, oom0)

    def _after_step(self, req: dict, step: dict, lim: dict, rundir: str, keep: bool, t_start: float, r: tuple,
                    oom0: int, oom_now: int = -1, cleaned: int = 0) -> dict:
        """The head of an argv step ``rl_step`` reaped (``r``: its 14 results): the caps, the kill of what is
        left, the CPU reason, then :meth:`_conclude` (``oom_now``, ``cleaned``: what ``rl_program`` already
        read and did, see :meth:`_program_c`)."""
        pid, t0, c0 = r[0], r[4] / 1e9, r[5] / 1e6
        cap_out, cap_res = int(lim["out"]), int(lim["obs"])
        status, n_out, n_res = r[6], r[7], r[8]
        # one byte more than the cap was read at most: past it, the class (stdout first, as in run_once)
        reason = "output" if n_out > cap_out else "obs" if n_res > cap_res else None
        self.out_buf.used = max(self.out_buf.used, n_out)
        self.res_buf.used = max(self.res_buf.used, n_res)
        got = bytes((r[10] & 0xFF, r[10] >> 8))[:r[9]]
        wall = (r[11] - r[4]) / 1e9
        cpu = (r[12] - r[5]) / 1e6
        t_end = time.monotonic()
        clean = bool(r[13])
        if not clean:
            # a process of the step is left (or a zombie was just reaped): killed and reaped as run_once does;
            # the OOM counter is read again once they are gone
            clean = self._kill_everything(pid)
            cpu = max(cpu, self._children_cpu() - c0)
            oom_now, cleaned = -1, 0
        t_kill = time.monotonic()
        cpu_limit = float(lim["cpu"])
        if reason is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGKILL, signal.SIGXCPU) \
                and cpu >= cpu_limit:
            reason = "cpu"  # the kernel's RLIMIT_CPU backstop ended it
        return self._conclude(req, step, keep, rundir, status, reason, cpu, cpu_limit, wall, 0.0, clean,
                              got[:1] == b"R", got == b"RE", oom0, True, None,
                              (t0 - t_start, t_end - t0, t_kill - t_end, t_kill), min(n_out, cap_out),
                              min(n_res, cap_res), oom_now, cleaned)

    def _step_cfg(self, step: dict, lim: dict, rundir: str, vm: int | None = None) -> int:
        """The address of the ``struct rl_step_cfg`` of a step, built once per distinct (argv, environment,
        rlimits, run directory, stderr) and kept with the arrays it points to (see :meth:`_spawn`).

        A step of a cached request header (see :meth:`serve`) is the same object from one program to the
        next: its configuration is kept on it (``"_cfg"``, with the worker's size it was built for, the one
        input of the rlimits that can change), so the common step costs one ``pread`` and a compare here."""
        if vm is None:
            vm = _vm_size()
        mine = step.get("_cfg")
        if mine is not None and mine[0] == vm and mine[1] == rundir:
            return mine[2]
        limits = _limit_plan(lim, vm)
        key = (tuple(step["argv"]), tuple(step.get("env", {}).items()), tuple(limits), rundir,
               bool(step.get("stderr")))
        got = self._step_cfgs.get(key)
        if got is None:
            exe, c_argv, c_env, rl, n_rl = self._spawn_arrays(step, limits, rundir)
            filt = self.spawn_filter
            fbuf = ctypes.create_string_buffer(filt, len(filt)) if filt is not None else None
            stdin_b = ctypes.create_string_buffer(b"/dev/null")
            run_b = ctypes.create_string_buffer(rundir.encode())
            exe_b = ctypes.create_string_buffer(exe)
            cfg = _StepCfg(ctypes.cast(exe_b, ctypes.c_char_p), ctypes.cast(c_argv, ctypes.c_void_p),
                           ctypes.cast(c_env, ctypes.c_void_p), ctypes.cast(stdin_b, ctypes.c_char_p),
                           ctypes.cast(run_b, ctypes.c_char_p), ctypes.cast(rl, ctypes.c_void_p), n_rl,
                           int(bool(step.get("stderr"))),
                           ctypes.cast(fbuf, ctypes.c_void_p) if fbuf is not None else None,
                           len(filt) if filt is not None else 0, ctypes.cast(self.spawn_sites, ctypes.c_void_p),
                           self.n_sites)
            # the structure and every buffer it points to live as long as the entry
            got = (ctypes.addressof(cfg), cfg, exe_b, c_argv, c_env, rl, fbuf, stdin_b, run_b)
            if len(self._step_cfgs) >= 64:
                self._step_cfgs.clear()
            self._step_cfgs[key] = got
        step["_cfg"] = (vm, rundir, got[0], got)   # the entry's buffers live as long as the step, too
        return got[0]

    def _spawn(self, step: dict, limits: list[tuple[int, int]], stdin_path: str, out_w: int, res_w: int,
               ready_w: int, rundir: str) -> int | None:
        """Start one argv step through ``rl_spawn`` (spawn.c); its pid, or None when no child could be made
        that way (the caller forks instead: the same set-up, in Python)."""
        argv, stderr = step["argv"], bool(step.get("stderr"))
        # The ctypes arrays of a step are built once per distinct (argv, environment, rlimits, run directory)
        # and kept: the steps of a batch repeat the same few (one profile per language; the run directory is
        # fixed), and building them (the environment's "{run}", encodes, three arrays, ~20 us) was a visible
        # part of a cheap step's bookkeeping. The key is the request's own environment, as sent.
        key = (tuple(argv), tuple(step.get("env", {}).items()), tuple(limits), rundir)
        args = self._spawn_args.get(key)
        if args is None:
            args = self._spawn_arrays(step, limits, rundir)
            if len(self._spawn_args) >= 64:
                self._spawn_args.clear()
            self._spawn_args[key] = args
        exe, c_argv, c_env, rl, n_rl = args
        filt = self.spawn_filter
        pid = self.spawner(exe, c_argv, c_env, stdin_path.encode(), out_w, out_w if stderr else self.devnull, res_w,
                           ready_w, -1 if self.cg_procs is None else int(self.cg_procs), rundir.encode(), rl,
                           n_rl, filt, len(filt) if filt is not None else 0, self.spawn_sites, self.n_sites)
        return pid if pid > 0 else None

    @staticmethod
    def _spawn_arrays(step: dict, limits: list[tuple[int, int]], rundir: str) -> tuple:
        """A step's executable, argv, environment (``{run}`` replaced) and rlimits as the C arrays rl_spawn
        takes: ``(exe, argv, envp, rlimits, number of rlimits)``."""
        env = _step_env(step, rundir)

        def strings(xs: list[str]) -> ctypes.Array:
            return (ctypes.c_char_p * (len(xs) + 1))(*[x.encode("utf-8", "surrogateescape") for x in xs], None)

        argv_s = [str(x) for x in step["argv"]]
        rl = (ctypes.c_longlong * (2 * len(limits)))(*[x for pair in limits for x in pair])
        return (argv_s[0].encode("utf-8", "surrogateescape"), strings(argv_s),
                strings([f"{k}={v}" for k, v in env.items()]), rl, len(limits))

    def _compiled(self, src: str, mode: str) -> object:
        """Trusted test code (probes, set-up) compiled here once and cached: a GRPO group
        sends the same tests with many programs, and the child then compiles only the program."""
        key = (src, mode)
        code = self._codes.get(key)
        if code is None:
            try:
                code = compile(src, "tests.py", mode)
            except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
                return None  # the child compiles it again and reports the error per test
            if len(self._codes) >= 4096:
                self._codes.clear()
            self._codes[key] = code
        return code

    def _precompile(self, req: dict) -> None:
        if req.get("mode") != "call":
            return
        if req.get("setup"):
            req["_setup"] = self._compiled(req["setup"], "exec")
        for p in req.get("probes", ()):
            if "e" in p:
                p["_c"] = self._compiled(p["e"], "eval")

    def handle(self, req: dict) -> dict | None:
        """Serve one request. Each run is relayed as soon as it ends (a ``{"run": head}`` frame, then its
        result-channel bytes, stdout and judge records straight from the worker's buffers, which are emptied
        right after); ``head["last"]`` marks the last run. Returns the final frame's header when one is still
        needed (no run, or a request that is not a run), else None."""
        op = req.get("op", "run")
        self._precompile(req)
        if op == "ping":
            return {"ok": True, "pid": self.me, "executions": self.runs}
        if op == "exit":
            raise SystemExit(0)
        if req.get("mode") == "argv":
            self.run_steps(req)
            return None
        inputs = req.get("inputs")
        feed = inputs if req["mode"] == "stdio" else [None]
        if not feed:
            return {"ok": True}
        for i, inp in enumerate(feed):
            try:
                head = self.run_once(req, inp)
                stop = (head["setup_failed"] or head["recycle"] or head["reason"] in ("overload", "killed")
                        or (head["reason"] in ("cpu", "wall") and req.get("stop_on_timeout", True)))
                head["last"] = bool(stop or i == len(feed) - 1)
                self._relay(head)
            finally:
                self.out_buf.clear()
                self.res_buf.clear()
                self.judge_buf.clear()
            if head["last"]:
                if head["setup_failed"] or head["recycle"]:
                    raise _Recycle
                return None
        return None

    def run_steps(self, req: dict) -> None:
        """An argv program: its steps (compile, run) in one run directory, each relayed as it ends. A step
        that does not end cleanly (exit status 0, no limit met) ends the program: a failed compile is
        never followed by a run. The clean-up of the slot runs after the last step that ran."""
        steps = req["steps"]
        # the frame of a step that went well, is not the last and wrote nothing (the usual compile step or
        # syntax check): sent with the next one, so that a program costs the trusted side one wake-up and
        # one read, not one per step. A step that wrote anything is relayed at once, straight from the
        # buffers: no byte of a program's output is ever copied into this process's heap (which later forks
        # inherit; issue 19, nothing carried between programs)
        held: list[bytes] = []
        # the common case in one C call where it can (rl_program: the directory, the source, the steps while
        # they go well, the clean-up); the loop below goes on from wherever it stopped
        # (not for a program with a step that needs a file of an earlier step: Java's Main.class, checked
        # between its steps below; a JVM start costs far more than this path saves)
        got = (self._program_c(req, steps) if self._prog is not None and not any("needs" in st for st in steps)
               else None)
        recs, cleaned = got if got is not None else ((), 0)
        for i, step in enumerate(steps):
            last = i == len(steps) - 1
            try:
                if i < len(recs):
                    k, r, oom_now = recs[i]
                    if k == 1:
                        self.runs += 1
                        head = self._after_step(req, step, step["limits"], self.rundir, not last, r[4] / 1e9, r,
                                                self.oom_seen, oom_now, cleaned if last else 0)
                    else:   # still running at the first tick: run_once's loop takes it over
                        head = self.run_once(req, None, step, first=False, keep=not last,
                                             adopt=(r[0], r[1], r[2], r[3], r[4] / 1e9, r[5] / 1e6, self.oom_seen))
                elif i > 0 and "needs" in step and not _built(self.rundir, step["needs"]):
                    head = self._not_built(req, step)
                else:
                    head = self.run_once(req, None, step, first=(i == 0 and got is None), keep=not last)
                ok = (head["reason"] is None and head["exit"] == 0 and not head["setup_failed"]
                      and not head["exec_failed"] and not head["not_built"] and not head["recycle"])
                if not last and not ok:
                    # the program ends here: clean up as after a last step (the directory, /tmp, /dev/shm)
                    head["recycle"] = not (head["clean"] and self._wipe(_Budget(WIPE_BUDGET)))
                    last = True
                head["last"] = last
                if not last and not (head["res_len"] or head["out_len"] or head.get("judge_len")):
                    held.append(run_frame(head))
                else:
                    self._relay(head, held)
                    held = []
            finally:
                self.out_buf.clear()
                self.res_buf.clear()
                self.judge_buf.clear()
            if last:
                if head["setup_failed"] or head["recycle"]:
                    raise _Recycle
                return

    def _not_built(self, req: dict, step: dict) -> dict:
        """The head of a step that is not started because the file it needs from the steps before it is not
        in the run directory (Java's ``Main.class``: a unit declaring a package compiles into a
        subdirectory): the program built nothing this step can run, its own outcome (``compile_error``,
        decided by the trusted side), never a mask. The program ends here, cleaned up as after a last step."""
        self.runs += 1
        now = time.monotonic()
        head = self._conclude(req, step, False, self.rundir, 0, None, 0.0, float(step["limits"]["cpu"]), 0.0, 0.0,
                              True, True, False, self.oom_seen, False, None, (0.0, 0.0, 0.0, now), 0, 0)
        head["not_built"] = True
        return head

    def _program_c(self, req: dict, steps: list) -> tuple[list, int] | None:
        """An argv program through ``rl_program`` (spawn.c): the run directory and the source, then its steps
        through ``rl_step`` while each goes well and leaves nothing to relay or kill, then the clean-up of
        the common case (the source and directory removed, the roots proven untouched). Returns the records
        of the steps it started, ``(rl_step's return value, its 14 results, the OOM counter after it)``, and
        the clean-up bits; :meth:`run_steps` makes each record a head as :meth:`_step` would and goes on from
        there. None when the program does not fit (a bad file name, more steps than the structure holds):
        the usual path then raises or runs it. Raises ``OSError`` when the directory or the source cannot be
        made, as ``run_once`` does. Per Bash program this replaces two passes of ``run_once``'s Python and
        the clean-up's, where most of the worker's own CPU went (issue 20)."""
        name = req["file"]
        if not isinstance(name, str) or "/" in name or name in ("", ".", "..") or not 0 < len(steps) <= _PROG_STEPS:
            return None
        pg = self._prog
        mm, n = req["_src"]
        c = ctypes.c_char.from_buffer(mm)      # the mapping's address; the view is dropped at once (see _Wiped)
        pg.src = ctypes.addressof(c)
        del c
        pg.src_len = n
        pg.oom_before = self.oom_seen
        # The rest depends on the steps (the same objects from one program to the next: a cached header, see
        # serve), the file name and the worker's size (the rlimits' one input that can change): set again
        # only when one of them is not what the previous program had (the steps are kept, so their id is not
        # reused meanwhile).
        vm = _vm_size()
        pf = self._prog_for
        if not pf or pf[0] is not steps or pf[1] != name or pf[2] != vm:
            src = self._srcpaths.get(name)
            if src is None:
                if len(self._srcpaths) >= 64:
                    self._srcpaths.clear()
                src = self._srcpaths[name] = os.path.join(self.rundir, name).encode("utf-8", "surrogateescape")
            pg.srcpath = src
            pg.n_steps = len(steps)
            for i, step in enumerate(steps):
                lim = step["limits"]
                pg.cfg[i] = self._step_cfg(step, lim, self.rundir, vm)
                cap_out, cap_res = int(lim["out"]), int(lim["obs"])
                self.out_buf.ensure(cap_out + 1)
                self.res_buf.ensure(cap_res + 1)
                pg.out_room[i], pg.res_room[i] = cap_out + 1, cap_res + 1
            self._prog_for = (steps, name, vm)
        # (the buffers only grow, so they stay large enough; another request may have mapped them anew)
        pg.out_buf, pg.res_buf = self.out_buf.addr, self.res_buf.addr
        self.prog_fn(self._prog_ref, self._prog_r_addr)
        r = _PROG_R.unpack(self._prog_r_view)
        if r[2] < 0:
            raise OSError(-r[2], "cannot make the run directory" if r[3] == 1 else "cannot write the program's source")
        return [(r[22 + 16 * i], r[8 + 16 * i:22 + 16 * i], r[23 + 16 * i]) for i in range(r[0])], r[1]

    def _write_source(self, req: dict, rundir: str) -> None:
        """Write the program's text into its run directory, straight from the mapping it was read into (no
        copy of it enters the worker's heap, which later forks inherit)."""
        name = req["file"]
        if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
            raise ValueError("bad source file name")
        mm, n = req["_src"]
        fd = os.open(os.path.join(rundir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
        try:
            with memoryview(mm) as whole:
                off = 0
                while off < n:
                    with whole[off:n] as part:
                        off += os.write(fd, part)
        finally:
            os.close(fd)

    def _relay(self, head: dict, before: list[bytes] | None = None) -> None:
        """Write one run's frame and its bytes from the buffers in one ``writev`` (no joined copy), after
        ``before`` (frames of earlier runs that had no bytes, held back: see :meth:`run_steps`)."""
        parts: list = [*(before or ()), run_frame(head)]
        for buf, n in ((self.res_buf, head["res_len"]), (self.out_buf, head["out_len"]),
                       (self.judge_buf, head.get("judge_len", 0))):
            if n:
                assert buf.view is not None
                parts.append(buf.view[:n])
        while parts:
            k = os.writev(self.wfd, parts)
            while parts and k >= len(parts[0]):
                k -= len(parts[0])
                parts.pop(0)
            if parts and k:
                parts[0] = memoryview(parts[0])[k:]

    def serve(self) -> None:
        import gc

        # Children are forks of this process: keep the objects they inherit out of the collector's reach,
        # or every collection in a child copies the pages of the whole heap.
        gc.collect()
        gc.freeze()
        # Give back to the kernel the heap pages that start-up (compiling this file, building the filters)
        # dirtied and freed: a fork copies the page-table entries of every resident anonymous page, and each
        # program's process pays for them again when it exits.
        _lib().malloc_trim(0)
        while True:
            src = None
            try:
                n = struct.unpack("<I", _read_exact(self.rfd, 4))[0]
                raw = _read_exact(self.rfd, n)
                # A batch sends the same header with every program of a language (steps, environment,
                # limits: no program text, which is its own frame): an argv header is parsed once and kept,
                # each request a shallow copy of it (its steps are only read, but for the step configuration
                # _step_cfg keeps on them). Other modes are parsed every time (the judged ones' probes are
                # written to).
                cached = self._headers.get(raw)
                if cached is not None:
                    req = dict(cached)
                else:
                    req = loads(raw)
                    if isinstance(req, dict) and req.get("mode") == "argv" and req.get("op", "run") == "run":
                        if len(self._headers) >= 64:
                            self._headers.clear()
                        self._headers[raw] = req
                        req = dict(req)
                del raw
                if req.get("op", "run") == "run":
                    # the program's text: its own frame, read into a mapping of its own (see _read_code)
                    src = req["_src"] = _read_code(self.rfd)
            except EOFError:
                return
            try:
                head = self.handle(req)
            except SystemExit:
                return
            except _Recycle:
                return  # let the trusted side respawn a fresh slot (a fresh tmpfs, too)
            except BaseException as e:  # a worker bug or a broken slot: reported as an infrastructure failure
                head = {"ok": False, "error": _msg(e)}
            finally:
                if src is not None:
                    src[0].close()     # unmapped: the kernel zeroes its pages before anyone sees them again
                req.clear()
            if head is not None:
                _write_all(self.wfd, pack_frame(dumps(head).encode()))
                if not head.get("ok", False):
                    return


class _Recycle(Exception):
    """The run left the slot in need of replacement (or its set-up failed): the worker exits after relaying."""


# ----------------------------------------------------------------------------------------------------------
# Level set-up and entry point
# ----------------------------------------------------------------------------------------------------------

def _mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    libc = _lib()
    r = libc.mount(src.encode() if src else None, dst.encode(), fstype.encode() if fstype else None,
                   ctypes.c_ulong(flags), data.encode() if data else None)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount {src} -> {dst}: {os.strerror(e)}")


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MS_NOEXEC, MS_DETACH = 8, 2


def _setup_namespaces(cfg: dict) -> None:
    """Level ``namespaces``: we were started as root without user namespaces. Build a private minimal
    read-only root in new mount/net/ipc/uts/cgroup namespaces, enter a pid namespace, then drop to the
    slot's unprivileged uid. Returns in the pid-namespace init process; the parent only relays its exit."""
    libc = _lib()
    flags = 0x00020000 | 0x40000000 | 0x08000000 | 0x04000000 | 0x02000000
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = cfg["newroot"]
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for ro in cfg["ro_binds"]:
        src, dst = ro
        target = root + dst
        os.makedirs(target, exist_ok=True)
        _mount(src, target, None, MS_BIND | MS_REC)
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_REC)
    for d in cfg.get("hide", ()):  # package directories (launch.hidden_sites): an empty read-only tmpfs over each
        _mount("tmpfs", root + d, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "mode=0555,size=4k")
    for src, dst in cfg["symlinks"]:
        os.symlink(src, root + dst)
    os.makedirs(root + "/dev", exist_ok=True)
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID, "mode=0755,size=64k")
    for dev in ("null", "zero", "full", "random", "urandom"):
        open(root + "/dev/" + dev, "w").close()
        _mount("/dev/" + dev, root + "/dev/" + dev, None, MS_BIND)
    for d, size in (("/tmp", cfg["tmp_size"]), ("/dev/shm", 1 << 20)):
        os.makedirs(root + d, exist_ok=True)
        _mount("tmpfs", root + d, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={size}")
    # /dev read-only: programs write only to the two size-capped tmpfs the worker empties after each one
    _mount(None, root + "/dev", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    os.makedirs(root + "/proc", exist_ok=True)
    os.makedirs(root + "/.old", exist_ok=True)
    os.chdir(root)
    if libc.syscall(155, b".", b".old") != 0:  # pivot_root (x86_64 number; level probe fails elsewhere)
        raise OSError(ctypes.get_errno(), "pivot_root")
    os.chdir("/")
    if libc.umount2(b"/.old", MS_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "umount old root")
    os.rmdir("/.old")
    if libc.unshare(0x20000000) != 0:  # CLONE_NEWPID: our next child is the namespace's init
        raise OSError(ctypes.get_errno(), "unshare pid")
    pid = os.fork()
    if pid:
        # The root parent: idle relay of the init's exit. It holds no pipes the sandbox can reach.
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.closerange(3, 1 << 16)
        _, st = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(st) & 0xFF)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    uid = int(cfg["uid"])
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


class _Quitter:
    """``exit``/``quit`` as ``site`` defines them (the worker runs with ``-S``): raise SystemExit."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Use {self.name}() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code: object = None) -> None:
        raise SystemExit(code)


def _install_quit() -> None:
    for name in ("exit", "quit"):
        if not hasattr(builtins, name):
            setattr(builtins, name, _Quitter(name))


def _prepare_for_programs() -> None:
    """Process state every program inherits, set once here rather than after each fork: default signal
    dispositions, no core-dumping SIGXFSZ, stdio objects over fds 0-2 (the child dup2s its pipes onto those
    fds), argv, recursion limit, and no_new_privs (needed by seccomp and Landlock)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8",
                                 errors="replace")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 16),
                                  encoding="utf-8", errors="replace", write_through=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace")
    sys.argv = ["solution.py"]
    sys.setrecursionlimit(1000)
    if _lib().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")


def main() -> None:
    # Move the protocol pipes out of the way of the program's stdin/stdout.
    rfd = os.dup(0)
    wfd = os.dup(1)
    nul = os.open("/dev/null", os.O_RDWR)
    os.dup2(nul, 0)
    os.dup2(nul, 1)
    os.dup2(nul, 2)
    os.dup2(rfd, 10)
    os.dup2(wfd, 11)
    for fd in (rfd, wfd, nul):
        if fd > 2 and fd not in (10, 11):
            os.close(fd)
    rfd, wfd = 10, 11
    n = struct.unpack("<I", _read_exact(rfd, 4))[0]
    cfg = loads(_read_exact(rfd, n))
    status = {"ok": True, "level": cfg["level"]}
    try:
        if cfg["level"] == "namespaces":
            _setup_namespaces(cfg)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_DUMPABLE, 0)   # same-uid programs cannot open /proc/<worker>/mem or ptrace us
        if cfg.get("slot_filter"):
            install_filter(build_filter(SLOT_DENY))
        os.environ.clear()
        sys.path.extend(cfg.get("sys_path", ()))
        _install_quit()
        _prepare_for_programs()
        os.chdir(cfg["tmp"])
        if cfg.get("memcg") and min(int(cfg["cg_procs_fd"]), int(cfg["cg_oom_fd"]),
                                    int(cfg.get("cg_acct_fd") or 64)) <= 11:
            raise OSError(errno.EBADF, "the cgroup fds collide with the protocol fds (10, 11)")
        status.update(uid=os.getuid(), pid=os.getpid(), python=sys.version.split()[0])
    except BaseException as e:
        status = {"ok": False, "error": _msg(e)}
    _write_all(wfd, pack_frame(dumps(status).encode()))
    if not status["ok"]:
        return
    Worker(cfg, rfd, wfd).serve()


def bootstrap(spec: dict) -> None:
    """Root bootstrap of a bwrap slot whose interpreter the slot uid cannot reach: bind it at reachable
    mount points in a private mount namespace, drop to the slot uid, exec bubblewrap (fds pass through)."""
    libc = _lib()
    if libc.unshare(0x00020000) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for src, dst in spec["mounts"]:
        _mount(src, dst, None, MS_BIND | MS_REC)
        _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_REC)
    uid = int(spec["uid"])
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SystemExit("bootstrap: failed to drop root")
    # Die with the trusted process (the signal is kept across the exec of bubblewrap, which then sets its own;
    # set only now: a change of credentials clears it), and never outlive it: had it already exited, the
    # parent is no longer the one that started us.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(spec.get("parent", os.getppid())):
        os._exit(1)
    argv = spec["argv"]
    os.execv(argv[0], argv)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--bootstrap":
        bootstrap(loads(sys.argv[2]))
    else:
        main()
