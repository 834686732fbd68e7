"""``rewardlang data NAME -o FILE``: the task data sets as JSONL, written through :mod:`rewardlang.outputs`
(complete or absent), with a report of what was written and skipped on standard error.

Every destination is checked before any work (``-o`` and ``--report`` both, and against each other); an option
that does not apply to the data set is refused rather than dropped; language names are resolved as everywhere
else (:func:`rewardlang.sandbox.languages.canonical_language`: ``javascript``, ``C++``, ``golang`` ...).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "go.jsonl")
    >>> report = write_humaneval("golang", path)
    >>> report.splitlines()[0].startswith(f"wrote 145 go rows to {path} (19 problems skipped")
    True
    >>> sum(1 for _ in open(path))
    145
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable, Mapping

from rewardlang.outputs import atomic_write, check_outputs

__all__ = ["DATASETS", "OPTIONS", "DataSetError", "refuse_unused", "language_code", "write_dataset",
           "write_humaneval", "write_translate", "write_robot", "write_cfuncs"]

#: the data sets ``rewardlang data`` writes
DATASETS = ("robot", "humaneval", "translate", "cfuncs")
#: the options each data set takes besides ``-o``: any other one given is refused (never silently dropped)
OPTIONS: dict[str, tuple[str, ...]] = {
    "robot": ("--split", "--verify"),
    "humaneval": ("--lang", "--report", "--plus", "--per-problem", "--seed"),
    "translate": ("--source", "--target", "--split"),
    "cfuncs": (),
}
_WHY_NOT = {
    "--split": "its rows have no train/held-out split",
    "--lang": "its rows are in one language",
    "--report": "it skips nothing",
    "--verify": "it has no canonical programs to run",
    "--source": "it is no translation set",
    "--target": "it is no translation set",
    "--plus": "it has no hidden tests",
    "--per-problem": "it has no hidden tests",
    "--seed": "nothing in it is drawn at random",
}
#: options that apply only beside another one (``data humaneval --per-problem`` without ``--plus`` generates nothing)
_ONLY_WITH = {"--per-problem": "--plus", "--seed": "--plus"}


class DataSetError(ValueError):
    """A request ``rewardlang data`` refuses before any work: the message says why and what to give instead."""


def refuse_unused(name: str, given: Iterable[str]) -> None:
    """Raise :class:`DataSetError` for the first option in ``given`` that data set ``name`` does not take.

        >>> refuse_unused("humaneval", ["--lang"])
        >>> try:
        ...     refuse_unused("humaneval", ["--split"])
        ... except DataSetError as exc:
        ...     print(exc)
        data humaneval does not take --split (its rows have no train/held-out split); it takes --lang, --report, --plus, --per-problem, --seed
    """
    if name not in OPTIONS:
        raise DataSetError(f"unknown data set {name!r} (known: {', '.join(DATASETS)})")
    given = list(given)
    for opt in given:
        if opt not in OPTIONS[name]:
            takes = ", ".join(OPTIONS[name]) or "only -o"
            raise DataSetError(f"data {name} does not take {opt} ({_WHY_NOT.get(opt, 'it does not apply')}); "
                               f"it takes {takes}")
        if opt in _ONLY_WITH and _ONLY_WITH[opt] not in given:
            raise DataSetError(f"data {name}: {opt} applies only with {_ONLY_WITH[opt]}")


def language_code(flag: str, name: str, allowed: Iterable[str]) -> str:
    """The language code of ``name`` by the one resolver every command uses, if it is among ``allowed``.

        >>> language_code("--lang", "JavaScript", ("python", "js")), language_code("--lang", "PYTHON", ("python",))
        ('js', 'python')
    """
    from rewardlang.sandbox.languages import canonical_language

    allowed = tuple(allowed)
    code = canonical_language(name)
    if code is None or code not in allowed:
        raise DataSetError(f"{flag} {name}: one of {', '.join(allowed)} (or a name such as javascript, c++, bash, "
                           "golang)")
    return code


def _write(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    with atomic_write(path) as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def write_humaneval(language: str, path: str | os.PathLike[str], skipped_report: str | os.PathLike[str] | None = None,
                    *, plus: bool = False, per_problem: int | None = None, seed: int = 0, progress: Any = None) -> str:
    """Write one language's rows; the report (the skip reasons with counts) is returned as text, and written as
    JSON to ``skipped_report`` when given. Both destinations are checked before the rows are built. Raises
    :class:`DataSetError` for an unknown language, ``OutputError`` for a destination that cannot be written.

    ``plus``: generate the hidden tests too (:mod:`rewardlang.datasets.plus`: mutated inputs, the canonical solution
    run in the sandbox as the oracle) and write them as each row's ``plus_tests``, in the format of its ``tests``;
    the report gives the counts (problems covered, extra inputs per problem, what was dropped and why).
    ``progress``: a callable given the hidden tests' progress lines."""
    from rewardlang.datasets.multilang import LANGUAGES, build

    language = language_code("--lang", language, LANGUAGES)
    check_outputs({"-o": path, "--report": skipped_report})
    b = build(language)
    plus_lines: list[str] = []
    plus_json: dict[str, Any] | None = None
    if plus:
        from rewardlang.datasets.plus import DEFAULT_PER_PROBLEM, build_plus, plus_for_language, python_plus_tests

        wanted = sorted(int(r["task_id"].split("/")[1]) for r in b.rows)
        pb = build_plus(wanted, per_problem=per_problem or DEFAULT_PER_PROBLEM, seed=seed, progress=progress)
        by_task = pb.by_task()
        rendered = not_rendered = 0
        for r in b.rows:
            p = by_task.get(r["task_id"])
            if p is None or not p.covered:
                continue
            if language == "python":
                r["plus_tests"] = python_plus_tests(p)
                rendered += len(p.inputs)
            else:
                text, lost = plus_for_language(p, language)
                not_rendered += lost
                if text is not None:
                    r["plus_tests"] = text
                    rendered += len(json.loads(text)["cases"])
        with_plus = sum("plus_tests" in r for r in b.rows)
        plus_lines = pb.report_lines()
        plus_lines.insert(1, f"  {with_plus} of {len(b.rows)} {language} rows have plus_tests: {rendered} extra "
                             f"cases, {rendered / max(1, with_plus):.1f} per row"
                             + (f" ({not_rendered} the target cannot render)" if not_rendered else ""))
        plus_json = {**pb.report_json(), "rows_with_plus": with_plus, "extra_cases": rendered}
    _write(b.rows, path)
    if skipped_report is not None:
        with atomic_write(skipped_report) as fh:
            json.dump({"language": language, "rows": len(b.rows), "dropped_cases": b.dropped_cases,
                       "skipped": [{"task_id": t, "reason": r} for t, r in b.skipped],
                       **({"plus": plus_json} if plus_json is not None else {})}, fh, indent=1)
            fh.write("\n")
    lines = [(f"wrote {len(b.rows)} {language} rows to {os.fspath(path)} ({len(b.skipped)} problems skipped, "
              f"{b.dropped_cases} cases dropped)")]
    for reason, n in b.reasons().most_common():
        lines.append(f"  skipped {n:3d}: {reason}")
    lines += plus_lines
    if skipped_report is not None:
        lines.append(f"wrote the skipped problems to {os.fspath(skipped_report)}")
    return "\n".join(lines)


def write_translate(source: str, target: str, path: str | os.PathLike[str], split: str = "all") -> str:
    """Write translation rows (see :func:`rewardlang.datasets.translate.translation_rows`); returns the report."""
    from rewardlang.datasets.translate import SOURCES, SPLITS, TARGETS, translation_rows

    source = language_code("--source", source, SOURCES)
    target = language_code("--target", target, TARGETS)
    if split not in SPLITS:
        raise DataSetError(f"--split {split}: one of {', '.join(SPLITS)}")
    check_outputs({"-o": path})
    rows = translation_rows(source, target, split)
    _write(rows, path)
    n_held = sum(r["split"] == "heldout" for r in rows)
    return (f"wrote {len(rows)} {source} -> {target} rows ({len(rows) - n_held} train, {n_held} held out) "
            f"to {os.fspath(path)}")


def write_robot(path: str | os.PathLike[str], split: str = "all", *,
                verify: Callable[[list[dict[str, Any]]], list[str]] | None = None) -> str:
    """Write the robot tasks' rows; ``verify`` (``data robot --verify``) is given the rows once the destination
    has been checked and returns the failures, each a line; any failure writes nothing (:class:`DataSetError`)."""
    from rewardlang.domains.robot.data import SPLITS, rows

    if split not in SPLITS:
        raise DataSetError(f"--split {split}: one of {', '.join(SPLITS)}")
    check_outputs({"-o": path})
    data = rows(split)
    if verify is not None:
        failures = verify(data)
        if failures:
            unrun = sum(": not verified:" in line for line in failures)
            counts = [f"{len(failures) - unrun} task(s) fail their worlds"] if len(failures) > unrun else []
            counts += [f"{unrun} could not be run (infrastructure)"] if unrun else []
            raise DataSetError("\n".join(failures) + f"\n{', '.join(counts)}; nothing written")
    _write(data, path)
    n_held = sum(r["split"] == "heldout" for r in data)
    return f"wrote {len(data)} rows ({len(data) - n_held} train, {n_held} held out) to {os.fspath(path)}"


def write_cfuncs(path: str | os.PathLike[str], *, progress: bool = True) -> str:
    """Write the C functions with recorded harnesses (``rewardlang data cfuncs``: each source compiled and run at
    -O0 to record its behaviour, tens of seconds, with a progress bar on a terminal); returns the report."""
    from rewardlang.datasets.cfuncs import corpus, rows
    from rewardlang.progress import progress_bar

    check_outputs({"-o": path})
    fns = corpus()
    with progress_bar(len(fns), "recording C harnesses", enabled=progress, unit="functions") as advance:
        data = rows(fns, on_function=advance)
    _write(data, path)
    return f"wrote {len(data)} C functions with harnesses to {os.fspath(path)}"


def write_dataset(name: str, path: str | os.PathLike[str], *, given: Iterable[str] = (), split: str = "all",
                  lang: str | None = None, source: str = "python", target: str | None = None,
                  report: str | os.PathLike[str] | None = None,
                  verify: Callable[[list[dict[str, Any]]], list[str]] | None = None, progress: bool = True,
                  plus: bool = False, per_problem: int | None = None, seed: int = 0,
                  plus_progress: Callable[[str], Any] | None = None) -> str:
    """``rewardlang data NAME``: refuse an option ``NAME`` does not take (``given``: the options on the command
    line), check every destination, build and write; returns the report for standard error."""
    refuse_unused(name, given)
    if name == "humaneval":
        return write_humaneval(lang or "python", path, report, plus=plus, per_problem=per_problem, seed=seed,
                               progress=plus_progress if plus else None)
    if name == "translate":
        if not target:
            raise DataSetError("data translate needs --target (c, cpp, java, js, php, sh, go)")
        return write_translate(source, target, path, split)
    if name == "robot":
        return write_robot(path, split, verify=verify)
    return write_cfuncs(path, progress=progress)
