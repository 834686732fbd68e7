"""GEPO groups of LLVM IR (the OORL paper's off-policy data; ``rewardlang ir-groups``).

For a C function with a test harness (a row ``{"id", "source", "harness"}``: ``source`` defines the function,
``harness`` is a C ``main`` that calls it and exits non-zero when a check fails):

1. **Winners**: ``clang -S -emit-llvm`` of the source at -O0, -O1, -O2, -O3, -Os and -Oz, normalised
   (:func:`normalize_ir`: comments, metadata, attribute groups, the module header and attributes that do not change
   behaviour removed) and de-duplicated — typically 3-4 distinct texts of 6. Each distinct winner is linked with the
   harness and run: a winner that fails is dropped and reported (the source has undefined behaviour there).
2. **Losers**: IR mutants of the winners (:func:`mutants`: comparison predicates flipped, operands of
   non-commutative operations swapped, opcodes exchanged, integer constants changed, branch targets and select arms
   exchanged, a store dropped). A mutant is kept only when the harness, run on the compiled mutant, shows a
   different behaviour (it exits non-zero or dies); mutants that survive, hang (CPU limit) or do not assemble are
   discarded and counted.
3. The prompt asks for the IR of the C source; the row is the group format ``rewardlang train`` reads for GEPO
   (``prompt``, ``winners``, ``losers``) plus ``id``.

Trust: a row is data from anywhere (a third-party data set is the normal case), so nothing built from it runs on
the host: clang's compiles and links and every harness run happen in the sandbox's slots (docs/sandbox.md), at the
isolation level scoring uses, each step under its own CPU, memory, output and process limits; where no level can be
had the command refuses (:class:`~rewardlang.datasets.sandboxed.NoSandbox`). Only ``clang --version`` runs on the
host. A row that does not compile, or whose harness fails on its own source, is an error of the row, named and
counted; a sandbox failure skips the row (counted), it never decides a winner or a loser.

    >>> ir = 'define dso_local i32 @f(i32 noundef %0) #0 {\\n  ret i32 %0\\n}\\nattributes #0 = { nounwind }\\n'
    >>> print(normalize_ir(ir))
    define i32 @f(i32 %0) {
      ret i32 %0
    }
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

from rewardlang.datasets.sandboxed import (
    STEP_LIMITS,
    open_sandbox,
    split_files,
    steps_request,
)
from rewardlang.sandbox.config import Limits
from rewardlang.outputs import interrupts_deferred

__all__ = ["LEVELS", "OPERATORS", "GroupResult", "build_group", "build_groups", "clang_problem", "mutants",
           "normalize_ir", "prompt_for"]

LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Oz")
CLANG = os.environ.get("REWARDLANG_CLANG", "clang")

PROMPT = ("Compile the following C function to LLVM IR, as `clang -S -emit-llvm` (clang 14, x86-64 Linux) would "
          "print it, without metadata and attribute groups. Answer with the IR only.\n\n```c\n{source}```\n")


def prompt_for(source: str) -> str:
    """The GEPO prompt of one C function."""
    return PROMPT.format(source=source if source.endswith("\n") else source + "\n")


# ---------------------------------------------------------------------------------------------------------------
# Normalisation

_DROP_LINE = re.compile(r"^(source_filename|target datalayout|target triple|attributes #\d+|!)")
_META_ATTACH = re.compile(r",\s*!(?!\")[\w.]+\s+!\d+")           # `, !tbaa !3`, `, !llvm.loop !6`, `, !range !4`
_ATTR_REF = re.compile(r"\s#\d+\b")                             # `#0` references to attribute groups
# Attributes that state facts or hints and never change what a correct program computes.
_NEUTRAL = re.compile(r"\b(dso_local|noundef|local_unnamed_addr|unnamed_addr)\s+")


def _strip_comment(line: str) -> str:
    """The line without its `; comment`, ignoring `;` inside c"..." strings and quoted names."""
    if ";" not in line:
        return line
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == ";" and not quoted:
            return line[:i]
    return line


def normalize_ir(text: str) -> str:
    """LLVM IR reduced to what decides behaviour: no comments or module header, no metadata nodes or
    attachments, no attribute groups or references to them, none of the neutral attributes ``dso_local``,
    ``noundef``, ``local_unnamed_addr``, ``unnamed_addr``; trailing blanks removed, runs of blank lines merged.

    Value and block names are kept as clang prints them (numbered in order), so two texts are equal exactly when
    the instruction streams are equal."""
    out: list[str] = []
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if _DROP_LINE.match(line):
            continue
        line = _ATTR_REF.sub("", _META_ATTACH.sub("", line))
        line = _NEUTRAL.sub("", line).rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Mutation operators: each yields (operator, mutant text) for every site in the IR.

_ICMP = re.compile(r"\b(icmp|fcmp) (eq|ne|slt|sle|sgt|sge|ult|ule|ugt|uge|oeq|one|olt|ole|ogt|oge)\b")
_NEGATE = {"eq": "ne", "ne": "eq", "slt": "sge", "sge": "slt", "sle": "sgt", "sgt": "sle", "ult": "uge",
           "uge": "ult", "ule": "ugt", "ugt": "ule", "oeq": "une", "one": "ueq", "olt": "uge", "oge": "ult",
           "ole": "ugt", "ogt": "ule"}
_NONCOMM = re.compile(r"= (sub|sdiv|udiv|srem|urem|shl|lshr|ashr|fsub|fdiv)((?: nuw| nsw| exact)*) "
                      r"(\w+) ([^,]+), (.+)$")
_OPCODE = re.compile(r"= (add|sub|mul|and|or|xor)\b((?: nuw| nsw)*) ")
_SWAP_OP = {"add": "sub", "sub": "add", "mul": "add", "and": "or", "or": "and", "xor": "and"}
# An integer literal in an operand position: not a value or block name (%4, @g, !3, #0), not part of a float
# (1.5e+00) or a type (i32, [4 x i8]); `align N` and array sizes are skipped by the caller.
_CONST = re.compile(r"(?<![\w%@!#.+\-])(-?\d+)(?![\w.]|\s+x\b)")
_NO_CONST = re.compile(r"^\s*(\d+:|br |switch |\[)|\b(alloca|getelementptr|phi|extractvalue|insertvalue|"
                       r"shufflevector|call|declare)\b")
_BR = re.compile(r"br i1 ([^,]+), label (%\w+), label (%\w+)")
_SELECT = re.compile(r"select i1 ([^,]+), (\w+\*?) ([^,]+), (\w+\*?) ([^,\n]+)")
_STORE = re.compile(r"^\s+store ")

OPERATORS = ("icmp_flip", "operand_swap", "opcode_swap", "constant", "branch_swap", "select_swap", "drop_store")


def _body_lines(lines: list[str]) -> Iterator[int]:
    inside = False
    for i, line in enumerate(lines):
        if line.startswith("define "):
            inside = True
        elif line.startswith("}"):
            inside = False
        elif inside:
            yield i


def mutants(ir: str) -> Iterator[tuple[str, str]]:
    """Every single-site mutant of a normalised IR text, as ``(operator, text)``, in a fixed order.

    >>> ir = "define i32 @f(i32 %0) {\\n  %2 = icmp slt i32 %0, 3\\n  %3 = select i1 %2, i32 1, i32 2\\n  ret i32 %3\\n}\\n"
    >>> sorted({op for op, _ in mutants(ir)})
    ['constant', 'icmp_flip', 'select_swap']
    """
    lines = ir.split("\n")

    def with_line(i: int, new: str) -> str:
        return "\n".join(lines[:i] + [new] + lines[i + 1:])

    for i in _body_lines(lines):
        line = lines[i]
        for m in _ICMP.finditer(line):
            pred = m.group(2)
            if pred in _NEGATE:
                yield "icmp_flip", with_line(i, line[:m.start(2)] + _NEGATE[pred] + line[m.end(2):])
        m = _NONCOMM.search(line)
        if m and m.group(4).strip() != m.group(5).strip():
            yield "operand_swap", with_line(
                i, line[:m.start()] + f"= {m.group(1)}{m.group(2)} {m.group(3)} {m.group(5).strip()}, "
                                      f"{m.group(4).strip()}")
        m = _OPCODE.search(line)
        if m:
            op = _SWAP_OP[m.group(1)]
            flags = m.group(2) if op in ("add", "sub", "mul") else ""
            yield "opcode_swap", with_line(i, line[:m.start()] + f"= {op}{flags} " + line[m.end():])
        if not _NO_CONST.search(line):
            for m in _CONST.finditer(line):
                if line[:m.start()].rstrip().endswith(("align", "x")):
                    continue
                v = int(m.group(1))
                new = v + 1 if v != -1 else 1
                yield "constant", with_line(i, line[:m.start(1)] + str(new) + line[m.end(1):])
        m = _BR.search(line)
        if m and m.group(2) != m.group(3):
            yield "branch_swap", with_line(i, line[:m.start()] + f"br i1 {m.group(1)}, label {m.group(3)}, "
                                                                 f"label {m.group(2)}" + line[m.end():])
        m = _SELECT.search(line)
        if m and m.group(3).strip() != m.group(5).strip():
            yield "select_swap", with_line(i, line[:m.start()] + f"select i1 {m.group(1)}, {m.group(2)} "
                                                                 f"{m.group(5).strip()}, {m.group(4)} "
                                                                 f"{m.group(3).strip()}")
        if _STORE.match(line):
            yield "drop_store", "\n".join(lines[:i] + lines[i + 1:])


# ---------------------------------------------------------------------------------------------------------------
# Running: every compile and every harness run of a row happens in the sandbox (datasets/sandboxed.py)

#: clang's compile and link steps: a minute of CPU, 2 GiB, 1 MiB of diagnostics (an endless or exploding compile
#: of a hostile row ends there, as a row that does not compile)
COMPILE_LIMITS = Limits(cpu=60.0, memory_mb=2048, output_bytes=1 << 20, observation_bytes=1 << 16, processes=16,
                        file_bytes=64 << 20)


def _run_limits(cpu_s: float) -> Limits:
    """The harness run: ``cpu_s`` CPU seconds (over it: a hang), a wall-clock backstop of 10x that (at least 10 s,
    counting idle time only), 1 GiB, 1 MiB of output and of any file it writes."""
    return Limits(cpu=float(cpu_s), wall=max(10.0, 10.0 * cpu_s), memory_mb=1024, output_bytes=1 << 20,
                  observation_bytes=1 << 16, processes=16, file_bytes=1 << 20)


def clang_path() -> str | None:
    """Where clang is (``REWARDLANG_CLANG``, else ``clang`` on PATH), or None. The sandbox's slots see ``/usr``
    (read-only): a clang elsewhere cannot run there."""
    return shutil.which(CLANG)


def clang_problem() -> str | None:
    """Why clang cannot compile in the sandbox (missing, or installed outside ``/usr``), or None."""
    path = clang_path()
    if path is None:
        return f"{CLANG} is not installed (Debian: apt-get install clang; scripts/install.sh installs it)"
    if not os.path.realpath(path).startswith("/usr/"):
        return (f"{path} is outside /usr: the sandbox's slots see only /usr of the host's files (read-only), so "
                "compile with a clang installed there (apt-get install clang)")
    return None


def _tool(path: str, *args: str) -> tuple[str, ...]:
    return (path, *args)


@dataclass
class GroupResult:
    """One input row's outcome: the group (or ``None``) and what was counted on the way."""

    id: str
    group: dict[str, Any] | None
    error: str | None = None
    levels: int = 0
    distinct: int = 0
    winners_failed: int = 0
    tried: Counter = field(default_factory=Counter)
    killed: Counter = field(default_factory=Counter)
    survived: int = 0
    timeouts: int = 0
    invalid: int = 0
    #: sandbox failures (a slot that died, a machine too loaded): the row is skipped, never decided by them
    infra: int = 0


class _Infra(Exception):
    """A sandbox failure while building a row: the row is skipped and counted, never judged on it."""


#: a request to run and what comes back (see sandboxed.steps_request; RawResult of the sandbox's pool)
_Request = tuple[tuple[bytes, bytes], float]


def _raw_runs(raw: Any, what: str) -> list[Any]:
    if raw.runs is None:
        raise _Infra(f"{what}: {raw.infra or 'sandbox failure'}")
    return raw.runs


def _compile_error(run: Any) -> str:
    if run.reason in ("cpu", "wall"):
        return "compilation exceeded its time limit"
    if run.reason == "memory":
        return "compilation exceeded its memory limit"
    if run.reason in ("output", "obs"):
        return "compilation exceeded its output limit"
    if run.exit < 0:
        return f"the compiler was killed by signal {-run.exit}"
    return _first_error(run.out.decode("utf-8", "replace"))


def _step_ok(run: Any) -> bool:
    return run.reason is None and run.exit == 0 and not run.exec_failed and not getattr(run, "not_built", False)


class _Builder:
    """Requests for one row, and how to read what comes back (clang at ``clang``, in the sandbox at ``level``)."""

    def __init__(self, clang: str, level: str, slack: float, cpu_s: float) -> None:
        self.clang, self.level, self.slack, self.cpu_s = clang, level, slack, cpu_s

    def harness(self, harness: str) -> _Request:
        """The harness compiled to an object file, returned as bytes (``cat``)."""
        return steps_request("h.c", harness.encode("utf-8", "surrogatepass"), [
            (_tool(self.clang, "-O0", "-w", "-c", "h.c", "-o", "h.o"), COMPILE_LIMITS, True),
            (("/usr/bin/cat", "h.o"), STEP_LIMITS, False)], self.level, self.slack)

    def levels(self, source: str) -> _Request:
        """The source's IR at every level in :data:`LEVELS` (each compile's diagnostics, then each text)."""
        steps = [(_tool(self.clang, lv, "-w", "-S", "-emit-llvm", "f.c", "-o", f"f{k}.ll"), COMPILE_LIMITS, True)
                 for k, lv in enumerate(LEVELS)]
        steps += [(("/usr/bin/cat", f"f{k}.ll"), STEP_LIMITS, False) for k in range(len(LEVELS))]
        return steps_request("f.c", source.encode("utf-8", "surrogatepass"), steps, self.level, self.slack)

    def check(self, harness_obj: bytes, ir: str) -> _Request:
        """The harness object linked with ``ir`` and run: the object and the IR travel as one file, cut apart
        inside."""
        return steps_request("bundle", harness_obj + ir.encode("utf-8", "surrogatepass"), [
            *split_files("bundle", [("h.o", len(harness_obj)), ("m.ll", None)]),
            (_tool(self.clang, "-O0", "-w", "h.o", "m.ll", "-o", "m", "-lm"), COMPILE_LIMITS, True),
            (("./m",), _run_limits(self.cpu_s), False)], self.level, self.slack)

    @staticmethod
    def harness_object(raw: Any) -> tuple[bytes | None, str | None]:
        """(the object file, None) or (None, why the harness does not compile); :class:`_Infra`."""
        runs = _raw_runs(raw, "compiling the harness")
        if any(r.exec_failed for r in runs):
            raise _Infra("clang or cat could not be started in the sandbox")
        if not _step_ok(runs[0]):
            return None, "the harness does not compile: " + _compile_error(runs[0])
        if len(runs) < 2 or not _step_ok(runs[1]):
            return None, "the harness's object file is larger than the 8 MiB the sandbox returns"
        return runs[1].out, None

    @staticmethod
    def level_texts(raw: Any) -> tuple[list[str] | None, str | None]:
        """(the raw IR per level, None) or (None, why the source does not compile); :class:`_Infra`."""
        runs = _raw_runs(raw, "compiling the source")
        if any(r.exec_failed for r in runs):
            raise _Infra("clang or cat could not be started in the sandbox")
        n = len(LEVELS)
        for k in range(n):
            if k >= len(runs):
                raise _Infra("the sandbox stopped before every level was compiled")
            if not _step_ok(runs[k]):
                return None, f"the source does not compile at {LEVELS[k]}: " + _compile_error(runs[k])
        if len(runs) < 2 * n or not all(_step_ok(r) for r in runs[n:]):
            return None, "an IR text is larger than the 8 MiB the sandbox returns"
        return [r.out.decode("utf-8", "replace") for r in runs[n:2 * n]], None

    @staticmethod
    def verdict(raw: Any) -> str:
        """``ok``, ``fail``, ``timeout`` or ``invalid`` (does not assemble or link) of one harness run; ``infra``
        for a sandbox failure. A hang is CPU time over the limit (or output past its cap); running out of memory
        or being killed is dying: ``fail``."""
        if raw.runs is None:
            return "infra"
        runs = raw.runs
        if any(r.exec_failed for r in runs[:3]):
            return "infra"                   # dd or clang could not be started: the sandbox's, not the row's
        if len(runs) < 3 or not all(_step_ok(r) for r in runs[:3]):
            return "invalid"
        if len(runs) < 4:
            return "infra"
        run = runs[3]
        if run.exec_failed:
            return "invalid"                 # what clang linked cannot be executed
        if run.reason in ("cpu", "wall", "output", "obs"):
            return "timeout"
        if run.reason is None and run.exit == 0:
            return "ok"
        return "fail"


def _row_flow(row: dict[str, Any], b: _Builder, *, losers: int, seed: int,
              max_tries: int) -> Generator[list[_Request], list[Any], GroupResult]:
    """One row's group, as a coroutine: it yields the requests it needs next (run in parallel) and receives
    their raw results; it returns the :class:`GroupResult`. Mutants are checked in rounds of as many as are still
    needed, so exactly the mutants a one-at-a-time loop would try are tried (the counts are the same)."""
    rid = str(row.get("id"))
    res = GroupResult(rid, None)
    for key in ("id", "source", "harness"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            res.error = f"`{key}` must be a non-empty string"
            return res
    try:
        h_raw, s_raw = yield [b.harness(row["harness"]), b.levels(row["source"])]
        obj, err = b.harness_object(h_raw)
        if obj is None:
            res.error = err
            return res
        texts_raw, err = b.level_texts(s_raw)
        if texts_raw is None:
            res.error = err
            return res
        texts = [normalize_ir(t) for t in texts_raw]
        res.levels = len(texts)
        distinct = list(dict.fromkeys(texts))
        res.distinct = len(distinct)
        checked = yield [b.check(obj, ir) for ir in distinct]
        winners = []
        for ir, raw in zip(distinct, checked):
            v = b.verdict(raw)
            if v == "infra":
                raise _Infra(f"checking a winner: {raw.infra or 'a sandbox step could not be started'}")
            if v == "ok":
                winners.append(ir)
            else:
                res.winners_failed += 1
        if not winners:
            res.error = "no IR of the source passes its harness (does the harness pass on the source?)"
            return res
        rng = random.Random(f"{seed}:{rid}")
        sites = [(op, text) for w in winners for op, text in mutants(w)]
        rng.shuffle(sites)
        # Take operators in turn so that one operator with many sites does not fill the group.
        by_op: dict[str, list[str]] = {}
        for op, text in sites:
            by_op.setdefault(op, []).append(text)
        order = [op for op in OPERATORS if op in by_op]
        rng.shuffle(order)
        candidates = _candidates(by_op, order, set(winners), max_tries)
        found: list[str] = []
        while len(found) < losers:
            # every one of the next `losers - found` candidates would be tried one at a time too: check them at once
            batch = [c for _, c in zip(range(losers - len(found)), candidates)]
            if not batch:
                break
            raws = yield [b.check(obj, text) for _, text in batch]
            for (op, text), raw in zip(batch, raws):
                verdict = b.verdict(raw)
                if verdict == "infra":
                    raise _Infra(f"checking a mutant: {raw.infra or 'a sandbox step could not be started'}")
                res.tried[op] += 1
                if verdict == "fail":
                    res.killed[op] += 1
                    found.append(text)
                elif verdict == "ok":
                    res.survived += 1
                elif verdict == "timeout":
                    res.timeouts += 1
                else:
                    res.invalid += 1
        if not found:
            res.error = f"no mutant changes the harness's verdict ({sum(res.tried.values())} tried)"
            return res
        res.group = {"id": rid, "prompt": prompt_for(row["source"]), "winners": winners, "losers": found}
        return res
    except _Infra as e:
        res.infra += 1
        res.error = f"sandbox infrastructure failure ({e}); the row is skipped, not judged"
        res.group = None
        return res


def _candidates(by_op: dict[str, list[str]], order: list[str], seen: set[str],
                max_tries: int) -> Iterator[tuple[str, str]]:
    """The mutants in the order they are tried: operators in turn, each operator's sites in the drawn order, a text
    seen before skipped, at most ``max_tries``."""
    tries = 0
    while tries < max_tries and any(by_op.values()):
        for op in order:
            if not by_op[op] or tries >= max_tries:
                continue
            text = by_op[op].pop()
            if text in seen:
                continue
            seen.add(text)
            tries += 1
            yield op, text


def _first_error(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error" in line:
            return line.strip()
    return stderr.strip().splitlines()[0] if stderr.strip() else "(no message)"


def build_group(row: dict[str, Any], *, sandbox: Any = None, losers: int = 4, seed: int = 0, max_tries: int = 40,
                cpu_s: float = 1.0) -> GroupResult:
    """The GEPO group of one ``{"id", "source", "harness"}`` row (see the module docstring), built in ``sandbox``
    (default: one of its own, see :func:`build_groups`)."""
    return next(iter(build_groups([row], sandbox=sandbox, losers=losers, seed=seed, max_tries=max_tries,
                                  cpu_s=cpu_s)))


def build_groups(rows: Iterable[dict[str, Any]], *, workers: int | None = None, sandbox: Any = None,
                 losers: int = 4, seed: int = 0, max_tries: int = 40, cpu_s: float = 1.0) -> Iterator[GroupResult]:
    """:func:`build_group` over ``rows``, in input order, every compile and run in the sandbox: ``sandbox``, or one of
    its own with ``workers`` slots (default: one per core) at the level scoring uses. Several rows are in flight at
    once so that every slot is busy. Raises :class:`~rewardlang.datasets.sandboxed.NoSandbox` where no sandbox
    level can be had, :class:`FileNotFoundError` without clang."""
    problem = clang_problem()
    if problem is not None:
        raise FileNotFoundError(problem)
    clang = clang_path()
    assert clang is not None
    own = sandbox is None
    sb = sandbox if sandbox is not None else open_sandbox("ir-groups", slots=workers)
    try:
        b = _Builder(clang, sb.level, sb.config.hard_timeout_slack, cpu_s)
        yield from _drive(sb, [lambda r=r: _row_flow(r, b, losers=losers, seed=seed, max_tries=max_tries)
                               for r in rows])
    finally:
        if own:
            sb.close()


def _drive(sb: Any, flows: list[Any]) -> Iterator[GroupResult]:
    """Run the row coroutines ``flows`` (callables making them) over the sandbox's slots, a few rows ahead of the
    slots' count, and yield their results in order. On any exit, requests not started yet are cancelled."""
    ahead = 2 * max(1, len(sb.pool.slots)) + 1
    waiting: dict[int, tuple[Any, list[Future]]] = {}
    done: dict[int, GroupResult] = {}
    nxt = out = 0

    def advance(i: int, gen: Any, answers: list[Any] | None) -> None:
        try:
            reqs = next(gen) if answers is None else gen.send(answers)
        except StopIteration as stop:
            done[i] = stop.value
            return
        waiting[i] = (gen, [sb.pool.submit(frames, hard) for frames, hard in reqs])

    try:
        while out < len(flows):
            # An interrupt (Ctrl-C, SIGTERM) must not land while this thread holds a future's lock: a Future's
            # condition is entered by Python code (wait() takes every future's lock one by one, done() and result()
            # take one), and an exception raised inside leaves the lock held, so the slot thread that completes that
            # future blocks for ever, and the command with it (ir-groups hung for 15-30 s). The interrupt is held
            # to the end of each round (a wait of at most 0.1 s) and raised here, between rounds, holding nothing.
            with interrupts_deferred():
                while nxt < len(flows) and len(waiting) < ahead:
                    advance(nxt, flows[nxt](), None)
                    nxt += 1
                ready = []
                while out in done:
                    ready.append(done.pop(out))
                    out += 1
                if not ready and waiting:
                    wait([f for _, fs in waiting.values() for f in fs], timeout=0.1, return_when=FIRST_COMPLETED)
                    for i in [i for i, (_, fs) in waiting.items() if all(f.done() for f in fs)]:
                        gen, fs = waiting.pop(i)
                        advance(i, gen, [f.result() for f in fs])
            yield from ready
    finally:
        for _, fs in waiting.values():
            for f in fs:
                f.cancel()


def clang_version() -> str | None:
    """The first line of ``clang --version`` (clang's own, run on the host: no input reaches it), or ``None`` where
    clang is missing."""
    path = clang_path()
    if path is None:
        return None
    p = subprocess.run([path, "--version"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    return p.stdout.splitlines()[0] if p.returncode == 0 and p.stdout else None
