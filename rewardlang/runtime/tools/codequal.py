"""The code-quality analysis of Quality-GRPO (after codequal_analyzer), batched and failing loudly.

:func:`analyze` runs the requested analyzers over a batch: pylint (one process, ``--jobs``), bandit and
the in-Python analyzers (radon, vulture, the AST checks; ``workers`` processes each), all three groups at
the same time; in a batch of at most :data:`TOGETHER_MAX` codes, bandit and the in-Python analyzers run one after
the other in one process beside pylint's (one fork instead of two; the same results). Raw per-analyzer results are cached per distinct code (``LRUCache``), so every quality
function of a spec, whatever its options, shares one analysis per code.

:func:`select` turns raw results into :class:`Finding` values with a severity, a characteristic and a CWE
id, applying the options (complexity threshold, vulture confidence, ignored unused names, quirks), and
:func:`score` aggregates them::

    W_c      = sum of severity weights of the findings of characteristic c   (0.01 when there are none)
    library  = mean over c of 1 / (1 + s_c * W_c)      s = 0.05, 0.1, 0.08, 0.07 (M, S, P, R)
    paper    = 1 / (1 + W)                              W = sum of the weights of all findings

Severity weights: info 0.5, low 1, medium 2.5, high 5, critical 10. With ``characteristic=c`` the library
form is ``1 / (1 + s_c * W_c)`` and the paper form ``1 / (1 + W_c)``.

Unlike the original library, an analyzer that is missing, crashes or times out never counts as "no
findings": :func:`select` reports an error for the sample (or infra, when the tool is broken for the batch).
Code that does not parse as Python (the running interpreter's grammar) is an error for every analyzer.

    >>> f = [Finding("vulture", "unused-import", "Unused import 'os'", "high", "maintainability", "CWE-561", 1)]
    >>> round(score(f, "library"), 6), round(score(f, "paper"), 6)
    (0.949376, 0.166667)
"""

from __future__ import annotations

import os
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, Sequence

from rewardlang.pycompile import compile_quietly
from rewardlang.runtime.tools.runner import FileResult
from rewardlang.runtime.tools.text import SourceText

__all__ = [
    "Finding", "analyze", "select", "score", "characteristic_scores", "weighted_counts", "SEVERITY_WEIGHTS",
    "SCALE_FACTORS", "CHARACTERISTICS", "ANALYZERS", "ANALYZER_CHARACTERISTIC", "KEPT_PYLINT", "KEPT_BANDIT",
]

SEVERITY_WEIGHTS: dict[str, float] = {"info": 0.5, "low": 1.0, "medium": 2.5, "high": 5.0, "critical": 10.0}
SCALE_FACTORS: dict[str, float] = {"maintainability": 0.05, "security": 0.1, "performance": 0.08, "reliability": 0.07}
CHARACTERISTICS: tuple[str, ...] = tuple(SCALE_FACTORS)
#: the default analyzer set of the library's quick assessment (the one its reward uses)
ANALYZERS: tuple[str, ...] = (
    "pylint", "bandit", "radon", "vulture", "exception_handling", "data_structure", "resource_use", "string_concat",
)
ANALYZER_CHARACTERISTIC: dict[str, str] = {
    "pylint": "maintainability", "bandit": "security", "radon": "maintainability", "vulture": "maintainability",
    "exception_handling": "reliability", "data_structure": "performance", "resource_use": "performance",
    "string_concat": "performance",
}
_AST_CWE = {
    "exception_handling": "CWE-703", "data_structure": "CWE-1043", "resource_use": "CWE-1050",
    "string_concat": "CWE-1046",
}
#: pylint symbols the library keeps (those it maps to a CWE), with their CWE. ``duplicate-code`` (CWE-1041)
#: is kept by the library too but compares files with each other, so it is never run on a batch (it never
#: fires on the library's single-file runs either).
KEPT_PYLINT: dict[str, str] = {
    "unused-import": "CWE-561", "unused-variable": "CWE-561", "unused-argument": "CWE-561",
    "too-many-arguments": "CWE-1064", "too-many-instance-attributes": "CWE-1074",
    "too-many-locals": "CWE-1121", "too-many-statements": "CWE-1121", "too-many-branches": "CWE-1121",
    "too-many-return-statements": "CWE-1121", "too-many-public-methods": "CWE-1086",
}
_PYLINT_SEVERITY = {"C": "low", "R": "low", "W": "medium", "E": "high", "F": "critical"}
#: bandit tests the library keeps (those in its CWE table); others (B113, B202, B302, B4xx imports, ...) are
#: dropped as it drops them. The CWE of a finding is bandit's own (the library's table has errors).
KEPT_BANDIT: frozenset[str] = frozenset(
    ["B101", "B102", "B103", "B104", "B105", "B106", "B107", "B108", "B110", "B112", "B201"]
    + [f"B3{i:02d}" for i in (1, *range(3, 25))]
    + [f"B50{i}" for i in range(1, 8)] + [f"B6{i:02d}" for i in range(1, 12)] + ["B701", "B702", "B703"]
)
_RANKS = "ABCDEF"
_RADON_SEVERITY = {"C": "low", "D": "medium", "E": "high", "F": "critical"}
#: bump when the raw analysis changes, so cached results of an older version are not reused
ANALYSIS_VERSION = 2


class Finding(NamedTuple):
    """One quality finding. ``line`` is 1-based; ``col``/``end_col`` 0-based characters (None: unknown)."""

    analyzer: str
    rule: str
    message: str
    severity: str
    characteristic: str
    cwe: str | None
    line: int
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None

    @property
    def weight(self) -> float:
        return SEVERITY_WEIGHTS.get(self.severity, SEVERITY_WEIGHTS["medium"])

    def label(self) -> str:
        cwe = f", {self.cwe}" if self.cwe else ""
        return f"[{self.characteristic}/{self.severity}{cwe}] {self.analyzer} {self.rule}: {self.message}"


# ------------------------------------------------------------------------------------- analysis
def _parse_error(text: str) -> str | None:
    try:
        compile_quietly(text)
    except SyntaxError as exc:
        return f"not parseable Python: {exc.msg} (line {exc.lineno})"
    except (ValueError, MemoryError, RecursionError, UnicodeError) as exc:
        return f"not parseable Python: {type(exc).__name__}: {exc or 'nesting too deep'}"
    return None


def analyze(codes: Sequence[str], analyzers: Sequence[str] = ANALYZERS, *, timeout: float = 20.0,
            workers: int = 2, cache: Any = None, stats: Counter | None = None) -> list[dict[str, FileResult]]:
    """Raw results per analyzer for every code string (same order): ``[{analyzer: FileResult}]``.

    ``cache`` is an :class:`~rewardlang.runtime.api.LRUCache` (or None); only successful results are
    cached, so a timeout under load is retried next time.
    """
    from rewardlang.runtime.tools import pyanalyzers

    stats = stats if stats is not None else Counter()
    analyzers = [a for a in ANALYZERS if a in set(analyzers)]
    out: list[dict[str, FileResult]] = [{} for _ in codes]
    todo: dict[str, set[str]] = {}          # code -> analyzers still to run
    for i, code in enumerate(codes):
        err = _parse_error(SourceText(code).text)
        for a in analyzers:
            if err is not None:
                out[i][a] = FileResult(error=err)
                continue
            hit = cache.get(("rewardlang.quality.raw", ANALYSIS_VERSION, a, code)) if cache is not None else None
            if hit is not None:
                out[i][a] = hit
                stats["quality.cache_hits"] += 1
            else:
                todo.setdefault(code, set()).add(a)

    def need(names: Sequence[str]) -> list[str]:
        return [c for c, s in todo.items() if s & set(names)]

    py_names = [a for a in analyzers if a in pyanalyzers.NAMES]
    fresh = _together(todo, analyzers, py_names, timeout, workers, stats)
    if fresh is None:
        fresh = _apart(need, analyzers, py_names, timeout, workers, stats)
    for i, code in enumerate(codes):
        for a in todo.get(code, ()):
            r = fresh.get(code, {}).get(a) or FileResult(error=f"{a} returned nothing")
            out[i][a] = r
            if cache is not None and r.ok:
                cache.put(("rewardlang.quality.raw", ANALYSIS_VERSION, a, code), r)
    return out


#: the most distinct codes whose bandit and in-Python analysers run one after the other in one process
#: (:func:`_together`); above it the two runs side by side on the machine's cores take less time
TOGETHER_MAX = 32


def _together(todo: dict[str, set[str]], analyzers: Sequence[str], py_names: Sequence[str], timeout: float,
              workers: int, stats: Counter) -> dict[str, dict[str, FileResult]] | None:
    """The tools' results for the codes of ``todo`` of a small batch: pylint's run beside one process that runs
    bandit's and then the in-Python analysers' (:func:`~rewardlang.runtime.tools.runner.run_together`: one fork
    of the light tools' helper instead of two; issue 38, where ~45 ms of a small batch's CPU went to the three
    tool runs). Each run is the one :func:`_apart` would start (same files, same command line), so its results
    are the same; when the pair does not end cleanly they run apart. None when this does not apply (a large
    batch, codes that need different tools, ``REWARDLANG_TOOL_TOGETHER=0``): then :func:`_apart`.

    pylint keeps a run of its own: in one process with the other two (tried: ~20 ms less CPU per batch), the
    three ran one after the other on one core and a batch of 16 rows took ~1.5x as long on a shared machine.
    """
    from rewardlang.runtime.tools import bandit, pyanalyzers, pylint
    from rewardlang.runtime.tools.runner import run_batch, run_together

    if (not todo or len(todo) > TOGETHER_MAX or "bandit" not in analyzers or not py_names
            or os.environ.get("REWARDLANG_TOOL_TOGETHER", "1").strip().lower() in ("0", "no", "false", "off")
            or any(s != set(analyzers) for s in todo.values())):
        return None
    codes = list(todo)
    tool_b, src_b, names_b = bandit.plan(codes, workers=workers)
    tool_py, src_py, names_py = pyanalyzers.plan(codes, py_names, timeout=timeout, workers=workers)
    with ThreadPoolExecutor(max_workers=1) as pool:
        lint = pool.submit(pylint.lint, codes, enable=list(KEPT_PYLINT), timeout=timeout, workers=workers,
                           stats=stats) if "pylint" in analyzers else None
        got = run_together([(tool_b, src_b), (tool_py, src_py)], timeout=timeout, stats=stats)
        if got is None:  # apart, each isolating whichever file was the cause
            got = [run_batch(tool_b, src_b, timeout=timeout, workers=workers, stats=stats),
                   run_batch(tool_py, src_py, timeout=timeout, workers=workers, stats=stats)]
        linted = lint.result() if lint is not None else None
    res_b, res_py = got
    fresh: dict[str, dict[str, FileResult]] = {}
    for k, (c, n_b, per) in enumerate(zip(codes, names_b, pyanalyzers.finish(res_py, names_py, py_names))):
        fresh[c] = {"bandit": res_b[n_b], **per}
        if linted is not None:
            fresh[c]["pylint"] = linted[k]
    return fresh


def _apart(need: Any, analyzers: Sequence[str], py_names: Sequence[str], timeout: float, workers: int,
           stats: Counter) -> dict[str, dict[str, FileResult]]:
    """The tools' results for the codes that ``need`` them, each tool its own runs, the three at once."""
    from rewardlang.runtime.tools import bandit, pyanalyzers, pylint

    jobs: dict[str, Any] = {}
    with ThreadPoolExecutor(max_workers=3) as pool:
        if "pylint" in analyzers and need(["pylint"]):
            codes_pl = need(["pylint"])
            jobs["pylint"] = (codes_pl, pool.submit(
                pylint.lint, codes_pl, enable=list(KEPT_PYLINT), timeout=timeout, workers=workers, stats=stats))
        if "bandit" in analyzers and need(["bandit"]):
            codes_b = need(["bandit"])
            jobs["bandit"] = (codes_b, pool.submit(bandit.scan, codes_b, timeout=timeout, workers=workers, stats=stats))
        if py_names and need(py_names):
            codes_py = need(py_names)
            jobs["py"] = (codes_py, pool.submit(
                pyanalyzers.analyze, codes_py, py_names, timeout=timeout, workers=workers, stats=stats))
        fresh: dict[str, dict[str, FileResult]] = {}
        for key, (cs, fut) in jobs.items():
            for c, r in zip(cs, fut.result()):
                if key == "py":
                    fresh.setdefault(c, {}).update(r)
                else:
                    fresh.setdefault(c, {})[key] = r
    return fresh


# ---------------------------------------------------------------------------------- selection
_QUOTED = re.compile(r"'([^']+)'")


def _unused_name(message: str) -> str:
    """The name an unused-* message is about (pylint: "Unused variable 'x'", "Unused import os",
    "Unused sqrt imported from math")."""
    m = _QUOTED.search(message)
    if m:
        return m.group(1)
    words = message.split()
    if len(words) >= 3 and words[0] == "Unused" and words[1] == "import":
        return words[2]
    return words[1] if len(words) >= 2 else ""


def _ignored(rule: str, message: str, name: str, ignore_unused: Sequence[str], quirks: bool) -> bool:
    if not ignore_unused or "unused" not in rule.lower():
        return False
    if quirks:  # the library's filter: the substring anywhere in the lower-cased message
        low = message.lower()
        return any(n.lower() in low for n in ignore_unused)
    return name in set(ignore_unused)


def _rank(complexity: int) -> str:
    for rank, limit in zip("ABCDE", (5, 10, 20, 30, 40)):
        if complexity <= limit:
            return rank
    return "F"


def select(raw: dict[str, FileResult], *, analyzers: Sequence[str] = ANALYZERS, complexity_threshold: str = "C",
           vulture_min_confidence: int = 60, ignore_unused: Sequence[str] = ("solution",),
           quirks: bool = True) -> tuple[list[Finding] | None, str | None, bool]:
    """Findings of one code from its raw results: ``(findings, error, infra)``.

    ``findings`` is None when an analyzer failed; ``error`` then says which and why, and ``infra`` is True
    when the failure is the tool's, not the sample's.
    """
    failures = [(a, raw[a]) for a in analyzers if a in raw and not raw[a].ok]
    missing = [a for a in analyzers if a not in raw]
    if failures or missing:
        by_msg: dict[str, list[str]] = {}
        for a, r in failures:
            by_msg.setdefault(str(r.error), []).append(a)
        for a in missing:
            by_msg.setdefault("not run", []).append(a)
        if len(by_msg) == 1 and len(failures) == len(analyzers):  # e.g. a syntax error: say it once
            msg = next(iter(by_msg))
        else:
            msg = "; ".join(f"{', '.join(names)}: {m}" for m, names in by_msg.items())
        return None, msg, any(r.infra for _, r in failures)
    out: list[Finding] = []
    for a in analyzers:
        ch = ANALYZER_CHARACTERISTIC[a]
        res = raw[a]
        if a == "pylint":
            for f in res.findings:
                if f.name not in KEPT_PYLINT:
                    continue
                if f.name.startswith("unused-") and _ignored(f.name, f.message, _unused_name(f.message),
                                                             ignore_unused, quirks):
                    continue
                out.append(Finding(a, f"{f.code} {f.name}", f.message, _PYLINT_SEVERITY.get(f.severity, "medium"),
                                   ch, KEPT_PYLINT[f.name], f.line, f.col, f.end_line,
                                   None if f.end_col < 0 else f.end_col))
        elif a == "bandit":
            for f in res.findings:
                if f["test_id"] not in KEPT_BANDIT:
                    continue
                sev = {"LOW": "low", "MEDIUM": "medium", "HIGH": "high"}.get(f["issue_severity"], "medium")
                out.append(Finding(a, f"{f['test_id']} {f['test_name']}", f["message"], sev, ch, f["cwe"],
                                   f["line"], f["col"], f["end_line"], f["end_col"]))
        elif a == "radon":
            limit = _RANKS.index(complexity_threshold)
            for b in res.findings:
                rank = _rank(b["complexity"])
                if _RANKS.index(rank) < limit or rank not in _RADON_SEVERITY:
                    continue
                out.append(Finding(a, f"complexity-{rank}", f"{b['type'].capitalize()} '{b['name']}' has cyclomatic "
                                   f"complexity of {b['complexity']} (rank {rank})", _RADON_SEVERITY[rank], ch,
                                   "CWE-1121", b["line"], b["col"], b["line"], None))
            loc = int(res.meta.get("loc", 0))
            if loc > 1000:
                out.append(Finding(a, "excessive-file-length", f"File has {loc} lines of code (exceeds recommended "
                                   "limit of 1000)", "medium", ch, "CWE-1080", 1))
        elif a == "vulture":
            for v in res.findings:
                if v["confidence"] < vulture_min_confidence:
                    continue
                kind = "unknown" if v["typ"] == "unreachable_code" else v["typ"]
                rule = f"unused-{kind}"
                message = f"Unused {kind} '{v['name']}' ({v['confidence']}% confidence)"
                if _ignored(rule, message, v["name"], ignore_unused, quirks):
                    continue
                if quirks:
                    # The library reads the confidence from "(confidence: N%)", a format vulture never
                    # prints, so it always falls back to 100 and every finding is high.
                    sev = "high"
                else:
                    sev = "low" if v["confidence"] < 60 else ("medium" if v["confidence"] < 90 else "high")
                out.append(Finding(a, rule, message, sev, ch, "CWE-561", v["line"], None, v["line"], None))
        else:
            for f in res.findings:
                if not quirks and (f.get("outside_handler") or f.get("with_only")):
                    continue
                out.append(Finding(a, f["rule"], f["message"], f["severity"], ch, _AST_CWE[a], f["line"], f["col"],
                                   f["end_line"], f["end_col"]))
    out.sort(key=lambda f: (f.line, f.col or 0, f.analyzer, f.rule))
    return out, None, False


# ------------------------------------------------------------------------------------- scoring
def weighted_counts(findings: Sequence[Finding]) -> dict[str, float]:
    """W_c per characteristic: the sum of severity weights (0.0 when none; see :func:`score`)."""
    w = {c: 0.0 for c in CHARACTERISTICS}
    for f in findings:
        w[f.characteristic] = w.get(f.characteristic, 0.0) + f.weight
    return w


def characteristic_scores(findings: Sequence[Finding]) -> dict[str, float]:
    """The library's per-characteristic scores in [0, 1]: ``1 / (1 + s_c * W_c)``, W_c = 0.01 when empty."""
    w = weighted_counts(findings)
    has = Counter(f.characteristic for f in findings)
    return {c: 1.0 / (1.0 + SCALE_FACTORS[c] * (w[c] if has[c] else 0.01)) for c in CHARACTERISTICS}


def score(findings: Sequence[Finding], form: str = "library", characteristic: str = "overall") -> float:
    """The quality score in (0, 1] of a list of findings (see the module docstring)."""
    if form == "library":
        per = characteristic_scores(findings)
        if characteristic == "overall":
            return sum(per.values()) / len(per)
        return per[characteristic]
    if form == "paper":
        w = weighted_counts(findings)
        total = sum(w.values()) if characteristic == "overall" else w[characteristic]
        return 1.0 / (1.0 + total)
    raise ValueError(f"unknown form {form!r}")
