"""Code quality of Quality-GRPO (codequal_analyzer): ``quality_score`` and ``quality_findings``.

Findings with a severity and a CWE id come from pylint (the library's kept symbols), bandit, radon
cyclomatic complexity (rank C low, D medium, E high, F critical), vulture and four AST analyzers (exception
handling, data-structure size, resources used in loops, string concatenation in loops). Each belongs to a
characteristic: maintainability, security, performance or reliability. With severity weights info 0.5,
low 1, medium 2.5, high 5, critical 10 and W_c the weighted count of characteristic c::

    form="library": mean over c of 1 / (1 + s_c * W_c), s = 0.05 / 0.1 / 0.08 / 0.07, W_c = 0.01 if none
    form="paper":   1 / (1 + W), W over all findings

``characteristic="security"`` (or any of the four) scores that characteristic alone: ``1/(1 + s_c W_c)``
(library) or ``1/(1 + W_c)`` (paper). A spec may use several; the analysis runs once per distinct code
and is shared (cache keyed by analyzer and code)::

    component quality in [0, 1] = quality_score(code_block(completion, "python") or completion)
    component secure in [0, 1]  = quality_score(code, characteristic="security", form="paper")

Failing loudly: a tool that is missing or broken for the batch is an infrastructure failure (masked and
counted, never a score). A failure caused by the code itself -- it does not parse as Python, or one analyzer
crashes or times out on it alone -- is the sample's outcome, never a mask: ``invalid="worst"`` (default) gives
it the worst score, 0 (``quality_findings``: one span over the code, value -10, label ``[invalid] <why>``);
``invalid="library"`` does what the original library does, counting the failing analyzers as no findings (so
unparseable code scores ~0.99925). Empty code has no findings: library ~0.99925, paper 1.0.

``quirks=true`` (default) reproduces the library's effective behaviour where it has bugs (every vulture
finding high; a raise anywhere in a try flagged; ``with open`` counted as an unclosed resource; ignored
unused names matched as substrings). See ``docs/components/quality.md``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from rewardlang.runtime.api import Context, Result, Span, function

__all__ = ["QualityParams", "QualityFindingsParams", "quality_score", "quality_findings"]

Analyzer = Literal[
    "pylint", "bandit", "radon", "vulture", "exception_handling", "data_structure", "resource_use", "string_concat",
]
Characteristic = Literal["overall", "maintainability", "security", "performance", "reliability"]
DEFAULT_TIMEOUT = 20.0
#: the worst quality score, the bottom of the declared range [0, 1]: what invalid code gets (invalid="worst")
WORST = 0.0
#: the weight of a critical finding: the value of the span that marks invalid code in quality_findings
SEVERITY_CRITICAL = 10.0
_ALL: list[Any] = ["pylint", "bandit", "radon", "vulture", "exception_handling", "data_structure", "resource_use",
                   "string_concat"]


class QualityFindingsParams(BaseModel):
    """Which findings count (shared by ``quality_findings`` and ``quality_score``)."""

    #: one characteristic only, or all of them
    characteristic: Characteristic = "overall"
    #: the analyzers to run (default: the library's quick set, all eight)
    analyzers: list[Analyzer] = Field(default_factory=lambda: list(_ALL), min_length=1)
    #: lowest radon rank reported (ranks A and B never are: the library maps them to no CWE)
    complexity_threshold: Literal["A", "B", "C", "D", "E", "F"] = "C"
    #: vulture's --min-confidence
    vulture_min_confidence: int = Field(60, ge=0, le=100)
    #: names whose "unused" findings are dropped (the library drops "solution", its entry point)
    ignore_unused: list[str] = Field(default_factory=lambda: ["solution"])
    #: reproduce the library's buggy rules (see the module docstring)
    quirks: bool = True
    #: what code the analyzers cannot analyse gets (code that is not parseable Python, or on which an analyzer
    #: crashes or runs out of time by itself): "worst" = the worst score, 0 (spans: one span over the whole code);
    #: "library" = the library's behaviour, the failing analyzers count as no findings (unparseable code
    #: scores ~0.99925). Never a mask: a failure caused by the completion's own text is its outcome.
    invalid: Literal["worst", "library"] = "worst"


class _Form(BaseModel):
    #: "library": mean of the characteristic scores 1/(1 + s_c W_c); "paper": 1/(1 + W)
    form: Literal["library", "paper"] = "library"


class QualityParams(QualityFindingsParams, _Form):
    """Options of ``quality_score`` (``form`` first, then those of ``quality_findings``)."""


def _analysis(code: list[str], params: QualityFindingsParams, ctx: Context) -> list[tuple[Any, str | None, bool]]:
    from rewardlang.runtime.tools import codequal

    raws = codequal.analyze(
        code, params.analyzers, timeout=float(ctx.timeout) if ctx.timeout else DEFAULT_TIMEOUT,
        workers=ctx.workers, cache=ctx.cache if ctx.use_cache else None, stats=ctx.stats,
    )
    out = []
    for raw in raws:
        findings, error, infra = _select(raw, params, params.analyzers)
        invalid = None
        if findings is None and not infra:
            # the code's own failure (it does not parse, or one analyzer crashes or times out on it alone): the
            # sample's outcome, never a mask (docs/components/quality.md, "Bad input")
            invalid = error
            ctx.stats["quality.invalid"] += 1
            if params.invalid == "library":  # the library skips a failing analyzer: its findings are none
                ran = [a for a in params.analyzers if a in raw and raw[a].ok]
                findings = _select(raw, params, ran)[0] if ran else []
            else:
                findings = None
            error = None
        elif error is not None:
            ctx.stats["quality.infra"] += 1
        if findings is not None and params.characteristic != "overall":
            findings = [f for f in findings if f.characteristic == params.characteristic]
        out.append((findings, error, infra, invalid))
    return out


def _select(raw: Any, params: QualityFindingsParams, analyzers: list[Any]) -> tuple[Any, str | None, bool]:
    from rewardlang.runtime.tools import codequal

    return codequal.select(
        raw, analyzers=analyzers, complexity_threshold=params.complexity_threshold,
        vulture_min_confidence=params.vulture_min_confidence, ignore_unused=params.ignore_unused,
        quirks=params.quirks,
    )


@function(
    "quality_score", args={"code": "code"}, returns="number", params=QualityParams, range=(0.0, 1.0),
    in_workers=False, tags=("quality", "tool"),
    doc="Quality-GRPO code quality in (0, 1]: form='library' (mean of four characteristic scores "
        "1/(1+s_c W_c)) or 'paper' (1/(1+W)); characteristic= one of maintainability, security, performance, "
        "reliability scores that one alone. Code the analyzers cannot analyse (not Python, an analyzer failing on "
        "it alone) scores 0 (invalid='worst'), or as the library does (invalid='library'); a broken tool masks.",
)
def quality_score(code: list[str], *, params: QualityParams | None = None, ctx: Context) -> Result:
    """Score every code string.

        >>> from rewardlang.runtime.api import Context
        >>> p = QualityParams(analyzers=["exception_handling"])
        >>> r = quality_score.fn(["try:\\n    f()\\nexcept Exception:\\n    log()\\n"], params=p, ctx=Context())
        >>> round(r.values[0], 6)      # reliability W = 2.5: (1/1.0005 + 1/1.001 + 1/1.0008 + 1/1.175) / 4
        0.962191
    """
    from rewardlang.runtime.tools import codequal

    params = params or QualityParams()
    values: list[float] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    details: list[dict[str, Any] | None] = []
    for findings, error, is_infra, invalid in _analysis(code, params, ctx):
        if error is not None:  # an infrastructure failure: masked and counted, never a score
            values.append(float("nan"))
            errors.append(error)
            infra.append(is_infra)
            details.append(None)
            continue
        if findings is None:  # invalid="worst": code the analyzers cannot analyse scores the worst, 0
            values.append(WORST)
            errors.append(None)
            infra.append(False)
            details.append({"invalid": invalid})
            continue
        values.append(codequal.score(findings, params.form, params.characteristic))
        errors.append(None)
        infra.append(False)
        details.append({
            "characteristics": codequal.characteristic_scores(findings),
            "weighted": codequal.weighted_counts(findings), "findings": len(findings),
            **({"invalid": invalid} if invalid is not None else {}),
        })
    return Result(values=values, errors=errors, infra=infra, details=details)


@function(
    "quality_findings", args={"code": "code"}, returns="spans", params=QualityFindingsParams, spans_of="code",
    in_workers=False, tags=("quality", "tool"),
    doc="The findings behind quality_score as spans: value = -severity weight, label "
        "'[characteristic/severity, CWE] analyzer rule: message'. A span covers the finding on its first line.",
)
def quality_findings(code: list[str], *, params: QualityFindingsParams | None = None, ctx: Context) -> Result:
    """The quality findings of every code string as spans.

        >>> from rewardlang.runtime.api import Context
        >>> p = QualityFindingsParams(analyzers=["bandit"])
        >>> r = quality_findings.fn(["x = 1\\nassert x\\n"], params=p, ctx=Context())
        >>> [(s.start, s.end, s.value) for s in r.values[0]]
        [(6, 14, -1.0)]
    """
    from rewardlang.runtime.tools.text import SourceText

    params = params or QualityFindingsParams()
    values: list[list[Span]] = []
    errors: list[str | None] = []
    infra: list[bool] = []
    for c, (findings, error, is_infra, invalid) in zip(code, _analysis(code, params, ctx)):
        if error is not None:
            values.append([])
            errors.append(error)
            infra.append(is_infra)
            continue
        if findings is None:  # invalid="worst": one span over the whole code says why it scores the worst
            values.append([Span(0, len(c), -SEVERITY_CRITICAL, f"[invalid] {invalid}")] if c else [])
            errors.append(None)
            infra.append(False)
            continue
        src = SourceText(c)
        spans = []
        for f in findings:
            line_start, line_end = src.line_bounds(f.line)
            start = src.offset(f.line, f.col) if f.col is not None else line_start
            if f.end_col is not None and f.end_line == f.line:
                end = src.offset(f.line, f.end_col)
            else:  # multi-line node or unknown end: the rest of its first line
                end = line_end
            if end <= start:
                end = min(start + 1, len(c))
            spans.append(Span(start, max(end, start), -f.weight, f.label()))
        values.append(spans)
        errors.append(None)
        infra.append(False)
    return Result(values=values, errors=errors, infra=infra)


__test__ = {"quality_score": quality_score.fn, "quality_findings": quality_findings.fn}
