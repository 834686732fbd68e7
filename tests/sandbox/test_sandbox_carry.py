"""Issue 19, "nothing carried between programs": the worker's memory.

Every program's process (and every judge process) is a fork of the slot's worker, so it inherits the worker's
whole address space, freed-but-not-zeroed heap included. Whatever of an earlier program the worker once held
in memory (its source text, the values it returned, what it printed, the judge process's records about it) a
later program could find by scanning its own memory: in a GRPO group (one task, many samples on one slot) a
wrong program would find a correct sibling's source and exec it, or copy its returned values.

Each test runs program A (a unique random marker in its source, in a value it returns, in what it prints) and
then, on the same one-slot sandbox, program B, which reads every readable mapping of its own process
(``/proc/self/maps``, ``/proc/self/mem``) and returns the markers it found: it must find none. The markers are
searched for as a prefix followed by a suffix, each held by B as a separate object, so B's own needles never
match. The judged case also scans the judge process of B, and looks for the bytes of A's judged test.
"""

from __future__ import annotations

import json
import secrets
import textwrap
from collections.abc import Iterator

import pytest

from rewardlang.sandbox.config import Limits, SandboxConfig
from rewardlang.sandbox.runner import Sandbox, Task

LIMITS = Limits(cpu=20.0, wall=40.0, memory_mb=512, processes=12)


def _d(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    s = Sandbox(SandboxConfig(slots=1))       # one slot: A and B run on the same slot, B right after A
    yield s
    s.close()


def _markers(*labels: str) -> dict[str, str]:
    return {label: f"RLCARRY{label.upper()}{secrets.token_hex(16)}" for label in labels}


def _rev(s: str) -> str:
    return s[::-1]


#: Scans the calling process's readable memory for ``NEEDLES`` (label, prefix hex, suffix hex) and returns the
#: sorted labels found. Reads through /proc/self/mem (EIO on pages that cannot be read is skipped) after trying
#: to make itself dumpable; where the program filter refuses that (issue 19 class 4), /proc/self/mem is root's
#: and the anonymous mappings, heap and stack are read directly (file mappings are skipped: past a file's end
#: they fault, and no relayed byte lives there).
SCANNER = _d('''
    def __rl_scan(needles_hex):
        import ctypes, os
        try:
            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)       # PR_SET_DUMPABLE
        except Exception:
            pass
        needles = [(label, bytes.fromhex(p), bytes.fromhex(s)) for label, p, s in needles_hex]
        found = set()
        with open("/proc/self/maps") as fh:
            lines = fh.read().splitlines()
        try:
            fd = os.open("/proc/self/mem", os.O_RDONLY)
        except PermissionError:   # not dumpable (the filter refuses PR_SET_DUMPABLE 1): read memory directly
            fd = -1
        chunk = 1 << 22
        try:
            for line in lines:
                parts = line.split()
                if parts[1][0] != "r" or (len(parts) > 5 and parts[5] in ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
                    continue
                if fd < 0 and len(parts) > 5 and not parts[5].startswith("["):
                    continue   # a file mapping may fault past the file's end; data lands in anonymous memory
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                addr = lo
                while addr < hi:
                    n = min(hi - addr, chunk)
                    if fd < 0:
                        data = ctypes.string_at(addr, n)
                    else:
                        try:
                            data = os.pread(fd, n, addr)
                        except OSError:
                            data = b""
                    for label, p, s in needles:
                        i = data.find(p)
                        while i >= 0:
                            if data.startswith(s, i + len(p)):
                                found.add(label)
                                break
                            i = data.find(p, i + 1)
                    if addr + n >= hi:
                        break
                    addr += n - 128        # overlap: a marker across two chunks is still found
        finally:
            if fd >= 0:
                os.close(fd)
        return sorted(found)
    ''')


def _needles(markers: dict[str, str]) -> list[list[str]]:
    return [[label, m[:12].encode().hex(), m[12:].encode().hex()] for label, m in markers.items()]


def _scanner_program(markers: dict[str, str]) -> str:
    return SCANNER + f"\ndef scan():\n    return __rl_scan({_needles(markers)!r})\n"


def _b_finds_nothing(sb: Sandbox, markers: dict[str, str]) -> None:
    """Program B, next on the slot, scans its own process: none of A's markers may be there."""
    v = sb.evaluate([Task(_scanner_program(markers), ["assert scan() == []"], None, "mbpp", LIMITS)],
                    use_cache=False)[0]
    assert v.infra is None and v.outcome == "pass", v.details()


def _a_call(m: dict[str, str]) -> str:
    return _d(f'''
        SOURCE_ONLY = "{m["src"]}"          # the source text: in the request frame
        def f(x):
            print("".join(reversed("{_rev(m["out"])}")))    # stdout, relayed by the worker
            return "".join(reversed("{_rev(m["ret"])}"))    # a returned value, relayed on the result channel
        ''')


def test_scanner_finds_what_is_in_its_own_process(sb: Sandbox) -> None:
    """The scanner works: a marker the scanning process builds at run time is found."""
    m = _markers("self")
    code = _scanner_program(m) + f'\nKEEP = "".join(reversed("{_rev(m["self"])}"))\n'
    v = sb.evaluate([Task(code, ["assert scan() == ['self']"], None, "mbpp", LIMITS)], use_cache=False)[0]
    assert v.outcome == "pass", v.details()


@pytest.mark.parametrize("fmt", ["mbpp", "humaneval"])
def test_call_mode_program_leaves_nothing_in_the_worker(sb: Sandbox, fmt: str) -> None:
    m = _markers("src", "out", "ret")
    if fmt == "mbpp":
        tests: list[str] | str = [f'assert f(1) == "{m["ret"]}"', f'assert f(2) == "{m["ret"]}"']
    else:
        tests = f'def check(candidate):\n    assert candidate(1) == "{m["ret"]}"\n    assert candidate(2) == "{m["ret"]}"\n'
    a = sb.evaluate([Task(_a_call(m), tests, "f", fmt, LIMITS)], use_cache=False)[0]
    assert a.outcome == "pass", a.details()
    _b_finds_nothing(sb, m)


def test_stdio_program_leaves_nothing_in_the_worker(sb: Sandbox) -> None:
    m = _markers("src", "out")
    code = _d(f'''
        SOURCE_ONLY = "{m["src"]}"
        n = int(input())
        print("".join(reversed("{_rev(m["out"])}")) if n else "zero")
        ''')
    tests = json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": [m["out"] + "\n"] * 3})
    a = sb.evaluate([Task(code, tests, None, "stdio", LIMITS)], use_cache=False)[0]
    assert a.outcome == "pass", a.details()
    _b_finds_nothing(sb, m)


def test_script_leaves_nothing_in_the_worker(sb: Sandbox) -> None:
    m = _markers("src", "out")
    code = _d(f'''
        SOURCE_ONLY = "{m["src"]}"
        print("".join(reversed("{_rev(m["out"])}")))
        ''')
    a = sb.evaluate([Task(code, None, None, "auto", LIMITS)], use_cache=False)[0]
    assert a.outcome == "pass", a.details()
    _b_finds_nothing(sb, m)


def test_a_failing_program_with_a_large_output_leaves_nothing(sb: Sandbox) -> None:
    """Output past the cap (the worker stops reading mid-stream) and a result channel over its limit."""
    m = _markers("src", "out", "ret")
    code = _d(f'''
        SOURCE_ONLY = "{m["src"]}"
        def f(x):
            s = "".join(reversed("{_rev(m["out"])}"))
            print((s + "\\n") * 200_000)
            return ["".join(reversed("{_rev(m["ret"])}"))] * 100_000
        ''')
    a = sb.evaluate([Task(code, ['assert f(1) == 1'], None, "mbpp", LIMITS)], use_cache=False)[0]
    assert a.outcome == "output_limit", a.details()
    _b_finds_nothing(sb, m)


def test_judged_test_leaves_nothing_in_the_worker_or_the_judge_process(sb: Sandbox) -> None:
    """A's test has a loop, so it runs in the judge process: A's returned values cross the call channel, the
    judge process's records pass through the worker, and the judged test (with a marker of its own) is a
    frame only the judge process reads. Then B's program scans its process, and B's judged test scans the
    judge process it runs in: neither holds anything of A or of A's judged test."""
    m = _markers("src", "out", "ret", "judge")
    a_tests = _d(f'''
        def check(candidate):
            tag = "{m["judge"]}"
            for i in range(3):
                assert candidate(i) == "{m["ret"]}" and tag
        ''')
    a = sb.evaluate([Task(_a_call(m), a_tests, "f", "humaneval", LIMITS)], use_cache=False)[0]
    assert a.outcome == "pass" and a.tests[0].inside, a.details()
    b_tests = SCANNER + _d(f'''

        def check(candidate):
            for who in ("program", "judge process"):
                found = candidate() if who == "program" else __rl_scan({_needles(m)!r})
                assert found == [], (who, found)
        ''')
    b = sb.evaluate([Task(_scanner_program(m), b_tests, "scan", "humaneval", LIMITS)], use_cache=False)[0]
    assert b.infra is None and b.tests[0].inside, b.details()
    assert b.outcome == "pass", b.details()
    _b_finds_nothing(sb, m)


def test_names_of_files_and_xattrs_leave_nothing_in_the_worker(sb: Sandbox) -> None:
    """The clean-up reads the names a program gave its files and the roots' extended attributes: both go
    through zeroed fixed buffers (getdents64 + unlinkat, llistxattr + lremovexattr) and never become Python
    objects. Before that, B found the xattr names, and then (once the worker's heap changed) the file names
    that an `os.scandir` listing had left in freed memory."""
    m = _markers("file", "xattr")
    code = _d(f'''
        import os
        def f(x):
            for i in range(200):    # many: the allocator reuses some of the freed names' memory at once
                open("".join(reversed("{_rev(m["file"])}")) + str(i), "w").close()
            for i in range(20):
                os.setxattr("/dev/shm", "user." + "".join(reversed("{_rev(m["xattr"])}")) + str(i), b"1")
            return x
        ''')
    a = sb.evaluate([Task(code, ["assert f(1) == 1"], None, "mbpp", LIMITS)], use_cache=False)[0]
    assert a.outcome == "pass", a.details()
    _b_finds_nothing(sb, m)
