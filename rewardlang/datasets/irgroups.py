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

Trust: the programs run here are the dataset's own sources and their mutants (not a policy's output); each runs
as a child process under CPU, memory, file-size and process rlimits with a wall-clock backstop, in a private
temporary directory. A compiler or harness that cannot run is an error of the row, named and counted.

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
import resource
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LEVELS", "OPERATORS", "GroupResult", "build_group", "build_groups", "mutants", "normalize_ir",
           "prompt_for"]

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
# Running

def _limits(cpu_s: float, mem_mb: int) -> Any:
    def apply() -> None:
        cpu = max(1, int(cpu_s + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setsid()
    return apply


def _run(argv: list[str], cwd: str, *, cpu_s: float, mem_mb: int = 1024) -> tuple[str, int]:
    """("ok" | "fail" | "timeout", status) of one program under rlimits; wall backstop 10x the CPU limit."""
    try:
        p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, preexec_fn=_limits(cpu_s, mem_mb),
                           timeout=max(10.0, 10 * cpu_s), env={"PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired:
        return "timeout", -9
    if p.returncode == -9 or p.returncode == -24:  # SIGKILL at the hard CPU limit, SIGXCPU at the soft one
        return "timeout", p.returncode
    return ("ok" if p.returncode == 0 else "fail"), p.returncode


def _compile(args: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLANG, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": cwd})


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


def build_group(row: dict[str, Any], *, losers: int = 4, seed: int = 0, max_tries: int = 40,
                cpu_s: float = 1.0) -> GroupResult:
    """The GEPO group of one ``{"id", "source", "harness"}`` row (see the module docstring)."""
    rid = str(row.get("id"))
    res = GroupResult(rid, None)
    for key in ("id", "source", "harness"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            res.error = f"`{key}` must be a non-empty string"
            return res
    tmp = tempfile.mkdtemp(prefix="rl-ir-")
    try:
        with open(os.path.join(tmp, "f.c"), "w") as fh:
            fh.write(row["source"])
        with open(os.path.join(tmp, "h.c"), "w") as fh:
            fh.write(row["harness"])
        p = _compile(["-O0", "-w", "-c", "h.c", "-o", "h.o"], tmp)
        if p.returncode:
            res.error = "the harness does not compile: " + _first_error(p.stderr)
            return res
        texts: list[str] = []
        for lv in LEVELS:
            p = _compile([lv, "-w", "-S", "-emit-llvm", "f.c", "-o", "f.ll"], tmp)
            if p.returncode:
                res.error = f"the source does not compile at {lv}: " + _first_error(p.stderr)
                return res
            with open(os.path.join(tmp, "f.ll")) as fh:
                texts.append(normalize_ir(fh.read()))
        res.levels = len(texts)
        distinct = list(dict.fromkeys(texts))
        res.distinct = len(distinct)
        winners = []
        for k, ir in enumerate(distinct):
            if _check(ir, tmp, f"w{k}", cpu_s) == "ok":
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
        seen = set(winners)
        found: list[str] = []
        tries = 0
        while len(found) < losers and tries < max_tries and any(by_op.values()):
            for op in order:
                if not by_op[op] or len(found) >= losers or tries >= max_tries:
                    continue
                text = by_op[op].pop()
                if text in seen:
                    continue
                seen.add(text)
                tries += 1
                res.tried[op] += 1
                verdict = _check(text, tmp, f"m{tries}", cpu_s)
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
            res.error = f"no mutant changes the harness's verdict ({tries} tried)"
            return res
        res.group = {"id": rid, "prompt": prompt_for(row["source"]), "winners": winners, "losers": found}
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _first_error(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error" in line:
            return line.strip()
    return stderr.strip().splitlines()[0] if stderr.strip() else "(no message)"


def _check(ir: str, tmp: str, tag: str, cpu_s: float) -> str:
    """"ok", "fail", "timeout" or "invalid" (does not assemble) for the harness linked with ``ir``."""
    ll = os.path.join(tmp, f"{tag}.ll")
    exe = os.path.join(tmp, tag)
    with open(ll, "w") as fh:
        fh.write(ir)
    p = _compile(["-O0", "-w", "h.o", f"{tag}.ll", "-o", tag, "-lm"], tmp)
    try:
        if p.returncode:
            return "invalid"
        return _run([exe], tmp, cpu_s=cpu_s)[0]
    finally:
        for f in (ll, exe):
            try:
                os.unlink(f)
            except OSError:
                pass


def _build_one(args: tuple[dict[str, Any], dict[str, Any]]) -> GroupResult:
    row, kw = args
    return build_group(row, **kw)


def build_groups(rows: Iterable[dict[str, Any]], *, workers: int | None = None, **kw: Any) -> Iterator[GroupResult]:
    """:func:`build_group` over ``rows`` on ``workers`` processes (default: every core), in input order."""
    rows = list(rows)
    n = workers or os.cpu_count() or 1
    if n <= 1 or len(rows) <= 1:
        for r in rows:
            yield build_group(r, **kw)
        return
    with ProcessPoolExecutor(max_workers=n) as ex:
        yield from ex.map(_build_one, [(r, kw) for r in rows], chunksize=1)


def clang_version() -> str | None:
    """The first line of ``clang --version``, or ``None`` where clang is missing."""
    if shutil.which(CLANG) is None:
        return None
    p = subprocess.run([CLANG, "--version"], capture_output=True, text=True)
    return p.stdout.splitlines()[0] if p.returncode == 0 and p.stdout else None
