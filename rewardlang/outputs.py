"""Every file a command writes goes through here: it is complete or absent, never half-made, never a surprise.

The rule (docs/reliability.md):

- **Checked before the work.** :func:`check_output` refuses, with a plain message naming the path, an output that
  is one of the command's inputs (the same file, through a symlink or a hard link too), a directory where a file is
  meant, a missing directory, and a place the process cannot write; commands call it before any expensive work.
- **Written atomically.** :func:`atomic_write` (a file object) and :func:`atomic_path` (a path, for writers such
  as matplotlib that want one) write to a temporary file in the destination's directory, ``fsync`` it, and
  ``os.replace`` it over the destination: a reader sees the old file or the whole new one. The file gets the mode a
  plain ``open()`` would (``0666`` less the umask), not ``mkstemp``'s ``0600``.
- **Nothing left behind.** On any ending the process controls (an error, SIGINT, SIGTERM: see
  :func:`install_signal_handlers`) the temporary file is removed. SIGKILL cannot be handled, so a temporary's name
  carries its host and process id (``.NAME.rl<host>-<pid>-<random>.partial``): the next write into the same
  directory removes those of processes that are gone.
- **I/O errors are plain errors.** A failed write, ``fsync`` or rename (``ENOSPC``, ``EIO``, ``EACCES`` ...) raises
  :class:`OutputError`, which names the path and the system's reason ("no space left on device"); the command
  prints it as ``error: ...`` and exits 1, never as an internal error.

A destination that exists and is not a regular file (``/dev/null``, a FIFO, a terminal) is written in place: there
is nothing to replace atomically, and replacing a device node with a regular file would break it.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with atomic_write(os.path.join(d, "out.txt")) as fh:
    ...     _ = fh.write("hello\\n")
    >>> sorted(os.listdir(d)), oct(os.stat(os.path.join(d, "out.txt")).st_mode & 0o777) == oct(0o666 & ~_umask())
    (['out.txt'], True)
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import signal
import socket
import stat
import sys
from typing import IO, Any, Callable, Iterator, Mapping, NoReturn, Union

__all__ = ["OutputError", "Interrupted", "check_output", "check_output_dir", "atomic_write", "atomic_path",
           "check_outputs", "write_text", "sweep", "reason", "same_file", "install_signal_handlers", "interrupt_line",
           "set_interrupt_note", "note_stdout", "InterruptExit", "exit_interrupted", "interrupts_deferred", "committed", "what_was_kept", "guard_command", "quiet_broken_pipe",
           "ENVIRONMENT_ERRNOS"]

PathLike = Union[str, "os.PathLike[str]"]

#: OSError numbers that describe the machine's state (a full disk, a read-only mount, permissions), not a bug of
#: rewardlang: a command reports them as a plain error naming the path, never as an internal error
ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM,
                                errno.EFBIG, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ETXTBSY})

# A temporary's name says which process made it, so a later run can tell a dead run's leftover from a live run's
# file: the host (a directory shared over NFS is written from several machines, whose pids mean nothing here) and
# the pid. `.partial` is the suffix `score` always used.
_HOST = hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.rl(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-f]{8}\.partial$")

_LIVE: set[str] = set()        # temporaries of this process not yet renamed or removed
_COMMITTED: list[str] = []     # outputs this process completed (said on an interrupt)
_STDOUT_NOTE: list[str] = []   # set by a command that streams its result to standard output
_NOTE: list[Callable[[], str | None]] = []  # a command's own word on an interrupt (train: the last checkpoint)


class OutputError(Exception):
    """An output that cannot be written (or must not be): ``path`` and the reason, for a plain ``error:`` line."""

    def __init__(self, path: PathLike, message: str) -> None:
        super().__init__(message)  # the whole message: it names the path itself
        self.path = os.fspath(path)

    @classmethod
    def writing(cls, path: PathLike, exc: BaseException) -> "OutputError":
        """The error for a failed write of ``path``: ``cannot write PATH: no space left on device``."""
        return cls(path, f"cannot write {os.fspath(path)}: {reason(exc)}")


class Interrupted(KeyboardInterrupt):
    """SIGTERM (or SIGHUP) raised as an interrupt, so that every ``finally`` and ``except KeyboardInterrupt`` on the
    way out (temporary files, the sandbox, worker pools) runs exactly as for Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class InterruptExit(SystemExit):
    """The exit, with 128 + the signal, of a command an interrupt ended (raised by :func:`guard_command`); a process
    entry point ends it with :func:`exit_interrupted`."""


def exit_interrupted(code: int) -> NoReturn:
    """End the process with status ``code`` once an interrupt has been handled (the line said, every ``finally`` run).

    Why not plain ``sys.exit``: CPython 3.11 notes a ``KeyboardInterrupt`` that ends any ``exec`` of a string
    (dataclasses and namedtuple build their methods that way, so Ctrl-C during an import lands there) in a
    process-wide flag that nothing clears, and when run as ``python -m`` turns the handled interrupt's status 130
    into death by SIGINT at exit. The interrupt was handled, so the flag is cleared first; then the interpreter
    exits as usual (threads joined, atexit handlers, finalizers)."""
    try:
        import ctypes

        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (ImportError, AttributeError, ValueError, OSError):  # pragma: no cover - another interpreter's layout
        pass
    sys.exit(code)


_DONE: list[bool] = []
_WHOLE: list[bool] = []


def set_whole_process() -> None:
    """Say that the command about to run is the whole process (the ``rewardlang`` script, ``python -m
    rewardlang``): what it leaves running may be stopped at its end. Not said when a command runs inside another
    program (typer's ``CliRunner``, a notebook), whose other work goes on after it."""
    _WHOLE.append(True)


def whole_process() -> bool:
    """Whether the running command is the whole process (:func:`set_whole_process`).

        >>> whole_process()
        False
    """
    return bool(_WHOLE)


def done_cleanly() -> None:
    """Say that the running command has finished its work and closed everything it wrote (its output is complete
    on disk or on standard output): a process entry point may then end it with :func:`exit_fast`."""
    _DONE.append(True)


def exit_fast(code: int) -> None:
    """End a CLI process whose command said :func:`done_cleanly` at once, without the interpreter's teardown;
    return (and let the caller exit as usual) in any other case.

    The teardown frees every object the run made one by one (the caches of a large `score`: trees, features,
    rows) and collects them: ~0.4 s of CPU after 13,120 CodePO rows, with nothing left to do. What it would do
    that matters is done first: the atexit handlers run (temporary files, multiprocessing), standard output
    and error are flushed. Not taken while another non-daemon thread still runs (the interpreter would wait for
    it) or when flushing fails (a closed pipe: the usual exit reports it)."""
    import threading

    if not _DONE or not isinstance(code, int):
        return
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    import atexit

    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def reason(exc: BaseException) -> str:
    """The system's reason for an OSError, as a user reads it: ``no space left on device``."""
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether ``a`` and ``b`` are one file (same device and inode: through symlinks and hard links too)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _probe(directory: str) -> OSError | None:
    """Create and remove a temporary in ``directory``: the only sure test of writability (``os.access`` says yes to
    root on a read-only bind mount's files, and knows nothing of a full quota)."""
    try:
        path = _tmp_name(directory, "probe")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return exc
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(path)
    return None


Inputs = Mapping[str, Union[PathLike, None, "list[PathLike]", "tuple[PathLike, ...]"]]


def _refuse_inputs(path: PathLike, inputs: Inputs, flag: str) -> None:
    """``inputs``: what each input is (``"spec file"``) and its path, or its paths (a spec and the files it
    imports)."""
    pairs = [(what, inp) for what, given in inputs.items()
             for inp in (given if isinstance(given, (list, tuple)) else [given])]
    for what, inp in pairs:
        if inp is not None and os.fspath(inp) != "-" and same_file(path, inp):
            shown = "" if os.path.abspath(os.fspath(inp)) == os.path.abspath(os.fspath(path)) else f" ({inp})"
            raise OutputError(path, f"{flag} {os.fspath(path)} is the {what}{shown}; writing it would destroy what "
                                    "the command reads: write to another file")


def check_output(path: PathLike, *, inputs: Inputs | None = None, flag: str = "-o") -> None:
    """Refuse a file destination before any work: one of ``inputs`` (``{"input file": path, ...}``), a directory,
    a missing directory, an unwritable place. Raises :class:`OutputError` whose text is the whole message."""
    p = os.fspath(path)
    _refuse_inputs(p, inputs or {}, flag)
    real = os.path.realpath(p)
    if os.path.isdir(real):
        raise OutputError(p, f"{flag} {p} is a directory; name a file")
    if os.path.exists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        return  # /dev/null, a FIFO: written in place
    parent = os.path.dirname(real)
    shown = os.path.dirname(p) or "."
    try:
        st = os.stat(parent)
    except FileNotFoundError:
        raise OutputError(p, f"{flag} {p}: directory {shown} does not exist (create it first)") from None
    except OSError as exc:  # ENOTDIR: a path under a regular file
        raise OutputError(p, f"{flag} {p}: {shown} is not a usable directory ({reason(exc)})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(p, f"{flag} {p}: {shown} is not a directory")
    exc = _probe(parent)
    if exc is None and os.path.exists(real) and not os.access(real, os.W_OK):
        exc = OSError(errno.EPERM, "")  # an immutable file (chattr +i) cannot be replaced, even by root
    if exc is not None:
        raise OutputError(p, f"{flag} {p}: cannot write there ({reason(exc)})")


def check_output_dir(path: PathLike, *, inputs: Inputs | None = None, flag: str = "-o",
                     files: tuple[str, ...] = ()) -> None:
    """Refuse a directory destination before any work: a path that is a file, one under a file, an unwritable place,
    and (``files``: the names the command writes in it) a file there that is one of ``inputs``. A missing directory
    is fine: the command creates it (with its parents)."""
    p = os.fspath(path)
    for name in files:
        _refuse_inputs(os.path.join(p, name), inputs or {}, flag)
    real = os.path.realpath(p)
    if os.path.exists(real) and not os.path.isdir(real):
        raise OutputError(p, f"{flag} {p} is a file; name a directory")
    probe_in = real
    while not os.path.exists(probe_in):  # the nearest existing ancestor is where the new directories go
        probe_in = os.path.dirname(probe_in)
    if not os.path.isdir(probe_in):
        raise OutputError(p, f"{flag} {p}: {probe_in} is not a directory")
    exc = _probe(probe_in)
    if exc is not None:
        raise OutputError(p, f"{flag} {p}: cannot write in {probe_in} ({reason(exc)})")


def _one_destination(a: PathLike, b: PathLike) -> bool:
    """Whether writing ``a`` and then ``b`` would write one file: the same file when both exist (device and inode:
    symlinks and hard links too), else the same resolved path (a file not written yet, a dangling symlink). A
    character device (``/dev/null`` twice) is not a clash: both writes go to it in place and neither destroys the
    other."""
    if os.path.exists(a) and os.path.exists(b):
        if not same_file(a, b):
            return False
        return not stat.S_ISCHR(os.stat(a).st_mode)
    return os.path.realpath(os.fspath(a)) == os.path.realpath(os.fspath(b))


def check_outputs(files: Mapping[str, PathLike | None], *, inputs: Inputs | None = None,
                  dirs: Mapping[str, PathLike | None] | None = None,
                  dir_files: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """Every destination of a command, checked before any work: each file of ``files`` (``{flag: path}``; None:
    not written this time) as :func:`check_output` does, each directory of ``dirs`` as :func:`check_output_dir`
    does (``dir_files[flag]``: the names written in it), and no two destinations the same file: the second write
    would destroy the first (``data humaneval -o rows.jsonl --report rows.jsonl``). Raises :class:`OutputError`
    naming both flags.

        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> check_outputs({"-o": os.path.join(d, "a.jsonl"), "--report": os.path.join(d, "b.json")})
        >>> try:
        ...     check_outputs({"-o": os.path.join(d, "a.jsonl"), "--report": os.path.join(d, ".", "a.jsonl")})
        ... except OutputError as exc:
        ...     print(str(exc).replace(d, "D"))
        --report D/./a.jsonl is the same file as -o D/a.jsonl; each output needs a file of its own
    """
    given = [(flag, p) for flag, p in files.items() if p is not None]
    for flag, p in given:
        check_output(p, inputs=inputs, flag=flag)
    placed: list[tuple[str, PathLike]] = list(given)
    for flag, p in (dirs or {}).items():
        if p is None:
            continue
        check_output_dir(p, inputs=inputs, flag=flag, files=(dir_files or {}).get(flag, ()))
        placed += [(flag, os.path.join(os.fspath(p), name)) for name in (dir_files or {}).get(flag, ())]
    for j, (flag, p) in enumerate(placed):
        for other, q in placed[:j]:
            if _one_destination(p, q):
                raise OutputError(p, f"{flag} {os.fspath(p)} is the same file as {other} {os.fspath(q)}; each "
                                     "output needs a file of its own")


def _tmp_name(directory: str, name: str) -> str:
    return os.path.join(directory, f".{name}.rl{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.partial")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def sweep(directory: PathLike) -> list[str]:
    """Remove the temporaries that dead processes of this host left in ``directory`` (a run killed by SIGKILL);
    returns their paths. A live process's temporary, or another host's, is left alone."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = _TMP_RE.match(name)
        if m is None or m["host"] != _HOST:
            continue
        pid = int(m["pid"])
        if pid != os.getpid() and _alive(pid):
            continue
        path = os.path.join(os.fspath(directory), name)
        if pid == os.getpid() and path in _LIVE:
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed


#: how the temporary's descriptor becomes a file object; the tests put a file system that fills up here
_fdopen: Callable[..., IO[Any]] = os.fdopen


class _Writer:
    """The temporary file, whose write errors become :class:`OutputError` naming the destination."""

    def __init__(self, fh: IO[Any], path: str) -> None:
        self._fh = fh
        self._path = path

    def write(self, data: Any) -> int:
        try:
            return self._fh.write(data)
        except OSError as exc:
            raise OutputError.writing(self._path, exc) from exc

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._fh.flush()
        except OSError as exc:
            raise OutputError.writing(self._path, exc) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w", *, encoding: str | None = "utf-8") -> Iterator[Any]:
    """Write ``path`` whole or not at all: a file object on a temporary beside it, renamed over ``path`` when the
    ``with`` block ends normally, removed when it ends by an exception (an interrupt included). A symlink is
    followed: the file it points to is replaced. Raises :class:`OutputError` for every I/O error of the output."""
    p = os.fspath(path)
    binary = "b" in mode
    real = os.path.realpath(p)
    if os.path.exists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        with _direct(p, real, mode, None if binary else encoding) as fh:  # a device or a FIFO
            yield fh
        return
    directory, name = os.path.split(real)
    sweep(directory)
    tmp = _tmp_name(directory, name)
    fh = None
    # in _LIVE before it exists: an interrupt between the open and the next line must still remove it (the name is
    # this process's alone: its pid and a random part, created with O_EXCL)
    _LIVE.add(tmp)
    try:
        try:
            # 0o666: the umask applies, as for open(); O_EXCL: never another process's file
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise OutputError.writing(p, exc) from exc
        fh = _fdopen(fd, "wb" if binary else "w", encoding=None if binary else encoding)
        yield _Writer(fh, p)
        try:
            fh.flush()
            os.fsync(fh.fileno())  # the data is on disk before the name points at it (a crash keeps the old file)
            fh.close()
            os.replace(tmp, real)
        except OSError as exc:
            raise OutputError.writing(p, exc) from exc
        _LIVE.discard(tmp)
        _fsync_dir(directory)
        _COMMITTED.append(p)
    finally:
        if fh is not None and not fh.closed:
            with contextlib.suppress(OSError):  # a full disk fails the close's flush too: the file goes anyway
                fh.close()
        if tmp in _LIVE:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            _LIVE.discard(tmp)


@contextlib.contextmanager
def _direct(p: str, real: str, mode: str, encoding: str | None) -> Iterator[Any]:
    try:
        fh = open(real, "wb" if "b" in mode else "w", encoding=encoding)
    except OSError as exc:
        raise OutputError.writing(p, exc) from exc
    try:
        yield _Writer(fh, p)
        try:
            fh.flush()
        except OSError as exc:
            raise OutputError.writing(p, exc) from exc
    finally:
        with contextlib.suppress(OSError):
            fh.close()


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """Like :func:`atomic_write`, for a writer that wants a path (``fig.savefig(tmp, format="png")``): yields the
    temporary's path; it is renamed over ``path`` when the block ends normally, removed otherwise. The writer's own
    OSErrors inside the block become :class:`OutputError` as well."""
    p = os.fspath(path)
    real = os.path.realpath(p)
    if os.path.exists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        yield real
        return
    directory, name = os.path.split(real)
    sweep(directory)
    tmp = _tmp_name(directory, name)
    _LIVE.add(tmp)  # before it exists: see atomic_write
    try:
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        except OSError as exc:
            raise OutputError.writing(p, exc) from exc
        try:
            yield tmp
        except OSError as exc:
            raise OutputError.writing(p, exc) from exc
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, real)
        except OSError as exc:
            raise OutputError.writing(p, exc) from exc
        _LIVE.discard(tmp)
        _fsync_dir(directory)
        _COMMITTED.append(p)
    finally:
        if tmp in _LIVE:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            _LIVE.discard(tmp)


def _fsync_dir(directory: str) -> None:
    """Make the rename itself durable; best effort (some file systems refuse fsync on a directory)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text(path: PathLike, text: str, *, encoding: str = "utf-8") -> None:
    """``path`` gets ``text``, whole or not at all (see :func:`atomic_write`)."""
    with atomic_write(path, encoding=encoding) as fh:
        fh.write(text)


def append_record(path: PathLike, line: str) -> None:
    """Append one record (a line, newline included) to a log (``metrics.jsonl``, ``alarms.jsonl``): an append is
    not atomic, so the line goes in one ``os.write`` (``O_APPEND``), and on a failed write (a full disk) the file is
    cut back to where it was, so the log never ends in half a record. Raises :class:`OutputError`.

        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "log.jsonl")
        >>> append_record(p, '{"step": 1}\\n'); append_record(p, '{"step": 2}\\n')
        >>> open(p).read().splitlines()
        ['{"step": 1}', '{"step": 2}']
    """
    data = line.encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise OutputError.writing(path, exc) from exc
    try:
        size = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise OutputError.writing(path, exc) from exc
    finally:
        os.close(fd)


def committed() -> list[str]:
    """The outputs this process has completed so far."""
    return list(_COMMITTED)


def note_stdout(what: str) -> None:
    """Say, on an interrupt, that ``what`` went to standard output and is incomplete (``score`` without ``-o``)."""
    _STDOUT_NOTE[:] = [what]


def set_interrupt_note(note: Callable[[], str | None] | None) -> None:
    """A command's own word on an interrupt, computed when it comes (``train``: the last checkpoint and the
    ``--resume`` command); ``None`` removes it."""
    _NOTE[:] = [note] if note is not None else []


def what_was_kept() -> str:
    """What a command stopped now leaves: the command's own word (``train``: its last checkpoint and the
    ``--resume`` command), else the outputs completed so far, or "nothing written"."""
    said = None
    if _NOTE:
        with contextlib.suppress(Exception):  # the note is a courtesy: it must not turn an interrupt into a crash
            said = _NOTE[0]()
    if said is None:
        kept = committed()
        said = (f"kept {', '.join(kept)} (complete); nothing else written" if kept else "nothing written")
        if _STDOUT_NOTE:
            said += f"; {_STDOUT_NOTE[0]}"
    return said


def interrupt_line(exc: BaseException) -> tuple[str, int]:
    """The one line said on an interrupt, and the exit status (128 + the signal: 130 for SIGINT, 143 for SIGTERM)."""
    signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
    by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    return f"interrupted{by}: {what_was_kept()}", 128 + signum


def _reset() -> None:
    """A new command starts with nothing committed and nothing noted (several commands may run in one process:
    tests, the main CLI delegating to the training one)."""
    _COMMITTED.clear()
    _STDOUT_NOTE.clear()
    _NOTE.clear()


_DEFERRING: list[int] = []  # depth of interrupts_deferred blocks (main thread only: handlers run there)
_PENDING: list[int] = []  # the signal that arrived inside one


def _raise_interrupt(signum: int) -> NoReturn:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signum)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold an interrupt (Ctrl-C, SIGTERM, SIGHUP) that arrives inside the block until the block ends.

    For the few lines between starting a process and recording it: an exception raised inside
    ``subprocess.Popen`` (while it waits for the child's exec) leaves a child that nothing knows of, so nothing
    kills it and it outlives the command. Only the handlers of :func:`install_signal_handlers` defer; under
    others, and outside the main thread (where no handler runs), the block is plain.

        >>> with interrupts_deferred():
        ...     pass
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _DEFERRING.append(1)
    try:
        yield
    finally:
        _DEFERRING.pop()
        if not _DEFERRING and _PENDING:
            signum = _PENDING[0]
            _PENDING.clear()
            _raise_interrupt(signum)


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP raise :class:`Interrupted` (SIGINT already raises ``KeyboardInterrupt``), so a scheduler's
    stop unwinds like Ctrl-C: temporaries removed, the sandbox closed, one line said. A second signal while the
    first unwinds is ignored: it would cut the clean-up short and leave what the first one was removing."""
    if sys.platform == "win32":  # pragma: no cover
        return

    def handler(signum: int, frame: Any) -> None:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        if _DEFERRING:  # between starting a process and recording it: raised when that block ends
            _PENDING.append(signum)
            return
        _raise_interrupt(signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) is signal.SIG_IGN and s != signal.SIGTERM:
            continue  # nohup'd: keep ignoring the hang-up; a background job ignores SIGINT
        signal.signal(s, handler)


def guard_command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a CLI command: an :class:`OutputError`, or an OSError that is the machine's state (a full disk, a
    read-only mount), ends it with a plain ``error:`` line and status 1; an interrupt (Ctrl-C, SIGTERM) with
    :func:`interrupt_line` and 128 + the signal. Raised as ``SystemExit`` so that click, which turns an interrupt
    into a silent status 130 of its own, lets it through."""
    import functools

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        outer = bool(_GUARDS)  # the main CLI's `train` runs the training CLI's: the inner one speaks
        _GUARDS.append(1)
        if not outer:
            _reset()
        try:
            return fn(*args, **kwargs)
        except OutputError as exc:
            sys.stderr.write(f"error: {exc}{_note()}\n")
            raise SystemExit(1) from None
        except KeyboardInterrupt as exc:
            line, code = interrupt_line(exc)
            sys.stderr.write(line + "\n")
            raise InterruptExit(code) from None
        except BrokenPipeError:
            quiet_broken_pipe()
        except OSError as exc:
            if exc.errno not in ENVIRONMENT_ERRNOS:
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            sys.stderr.write(f"error: {where}{reason(exc)}{_note()}\n")
            raise SystemExit(1) from None
        finally:
            _GUARDS.pop()
            if not outer:
                _NOTE.clear()

    return run


_GUARDS: list[int] = []


def _note() -> str:
    """A stopped run's word after an I/O error (``train``: the last good checkpoint); nothing for other commands."""
    if not _NOTE:
        return ""
    return f"; the run stopped: {what_was_kept()}"


def quiet_broken_pipe() -> None:
    """The reader of standard output went away (``| head -1``): end quietly with status 141, as a C tool killed by
    SIGPIPE does; standard output is pointed at /dev/null first so that the interpreter's flush at exit does not
    report the error after all."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(141)
