"""Running what the data builders build from an input file: only in the sandbox, at the level scoring uses.

A data row is not trusted: ``rewardlang ir-groups -i`` takes any JSONL (a third-party data set is the normal
case), and compiling a row is already running a toolchain on hostile input (``#include "/dev/zero"``,
``.incbin "/proc/self/environ"``). So every program a builder makes from its input — compiler runs included —
runs in the sandbox's slots (docs/sandbox.md), at the isolation level scoring would use
(:func:`rewardlang.sandbox.runner.expected_level`, or the one ``REWARDLANG_SANDBOX_LEVEL`` forces), and a
builder refuses to start where that level cannot be had (:func:`open_sandbox`), as scoring refuses a forced level
that does not work: never a silent run on the host.

:func:`steps_request` makes one *argv* request: a file written into a fresh run directory, then commands run
there one after the other, each with its own limits (a step that does not end cleanly ends the request); every
step's standard output comes back. Several files travel as one (``dd`` cuts them apart inside), so nothing of the
request is written on the host.

    >>> frames, hard = steps_request("x.txt", b"hello", [(("/usr/bin/cat", "x.txt"), STEP_LIMITS, False)], "bwrap")
    >>> json.loads(frames[0])["steps"][0]["argv"], frames[1], hard > 0
    (['/usr/bin/cat', 'x.txt'], b'hello', True)
    >>> [argv for argv, _, _ in split_files("b", [("h.o", 3), ("m.ll", None)])]
    [('/usr/bin/dd', 'if=b', 'of=h.o', 'bs=65536', 'count=3', 'iflag=count_bytes', 'status=none'), ('/usr/bin/dd', 'if=b', 'of=m.ll', 'bs=65536', 'skip=3', 'iflag=skip_bytes', 'status=none')]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rewardlang.sandbox.config import RUN_END_S, Limits

__all__ = ["STEP_LIMITS", "NoSandbox", "open_sandbox", "require_sandbox", "split_files", "steps_request"]

#: what every step sees of the environment: a fixed PATH, HOME and TMPDIR in its run directory
ENV = {"PATH": "/usr/bin:/bin", "HOME": "{run}", "TMPDIR": "{run}", "LANG": "C.UTF-8"}
#: a small helper step (dd, cat): a few seconds, little memory, output up to 8 MiB (an IR text, an object file)
STEP_LIMITS = Limits(cpu=5.0, memory_mb=256, output_bytes=8 << 20, observation_bytes=1 << 16, processes=4,
                     file_bytes=64 << 20)
DD = "/usr/bin/dd"


class NoSandbox(RuntimeError):
    """No sandbox level can be had here: the command refuses to run programs built from its input."""


def _refusal(what: str, exc: BaseException) -> NoSandbox:
    return NoSandbox(
        f"{what} runs every program it builds from its input (compilers included) in the sandbox only, and no "
        f"sandbox level works here: {exc}. Install bubblewrap (apt-get install -y bubblewrap) and see "
        f"`rewardlang doctor`; REWARDLANG_SANDBOX_LEVEL names a level (docs/sandbox.md)")


def open_sandbox(what: str, slots: int | None = None) -> Any:
    """A sandbox of its own (``slots`` slots, default one per core) at the level scoring would use, or
    :class:`NoSandbox` saying why none can be had (``what`` names the command in the message)."""
    from rewardlang.sandbox.config import SandboxConfig
    from rewardlang.sandbox.launch import LevelUnavailable
    from rewardlang.sandbox.runner import Sandbox

    try:
        return Sandbox(SandboxConfig(slots=slots))
    except (LevelUnavailable, ValueError) as e:
        raise _refusal(what, e) from None


def require_sandbox(what: str) -> Any:
    """The process-wide sandbox (the one scoring uses, :func:`rewardlang.sandbox.get_sandbox`), started now, or
    :class:`NoSandbox`."""
    from rewardlang.sandbox.launch import LevelUnavailable
    from rewardlang.sandbox.runner import get_sandbox

    try:
        return get_sandbox()
    except (LevelUnavailable, ValueError) as e:
        raise _refusal(what, e) from None


def split_files(bundle: str, parts: Sequence[tuple[str, int | None]]) -> list[tuple[tuple[str, ...], Limits, bool]]:
    """Steps cutting ``bundle`` (the request's one file) into ``parts``: ``(name, size in bytes)`` in order, the last
    one's size ``None`` (the rest of the bundle)."""
    out: list[tuple[tuple[str, ...], Limits, bool]] = []
    offset = 0
    for name, size in parts:
        argv = [DD, f"if={bundle}", f"of={name}", "bs=65536"]
        flags = []
        if offset:
            argv.append(f"skip={offset}")
            flags.append("skip_bytes")
        if size is not None:
            argv.append(f"count={size}")
            flags.append("count_bytes")
            offset += size
        if flags:
            argv.append("iflag=" + ",".join(flags))
        out.append((tuple(argv + ["status=none"]), STEP_LIMITS, False))
    return out


def steps_request(file: str, payload: bytes, steps: Sequence[tuple[Sequence[str], Limits, bool]], level: str,
                  slack: float = 5.0) -> tuple[tuple[bytes, bytes], float]:
    """The frames of one argv request (``file`` holding ``payload``, then ``steps``: ``(argv, limits, stderr
    too)``) and its hard timeout, for ``Sandbox.pool.submit``. The header's ``limits`` (last: the pool reads the
    memory budget from its tail) is the largest step's budget."""
    from rewardlang.sandbox.runner import NPROC_BASE

    base = NPROC_BASE[level]
    wire = []
    mem = 0
    for i, (argv, lim, stderr) in enumerate(steps):
        w = lim.to_wire(base)
        mem = max(mem, int(w["mem"]))
        wire.append({"step": f"s{i}", "argv": list(argv), "env": ENV, "limits": w, "stderr": bool(stderr)})
    head = {"mode": "argv", "file": file, "steps": wire, "limits": dict(wire[-1]["limits"], mem=mem)}
    hard = sum(lim.hard_wall + RUN_END_S for _, lim, _ in steps) + slack
    return (json.dumps(head).encode("utf-8", "surrogatepass"), payload), hard
