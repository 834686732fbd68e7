"""``rewardlang eval --lang L``: pass@k on HumanEval translated into other languages (``all``: every language,
one row of the table each), every program compiled and run in the sandbox with its structured tests.

The model is loaded once; each language's problems come from :func:`rewardlang.trainers.evaluate.translated_humaneval`
and are presented with :func:`~rewardlang.trainers.evaluate.lang_system_prompt` (Python keeps the default
prompt); a completion becomes the unit ``prompt + completion`` (:func:`~rewardlang.trainers.evaluate.lang_program_for`).

    >>> print(table({"cpp": {"scored": 2, "samples": 4, "pass@1": 0.5, "infra_failures": 0}}, [1]))
    language  problems  completions  pass@1  masked
    cpp              2            4   0.500       0
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import typer

from rewardlang.outputs import OutputError, check_output
from rewardlang.trainers import evaluate as ev
from rewardlang.trainers.config import ConfigError
from rewardlang.trainers.defaults import default_model

__all__ = ["available", "eval_languages", "table"]


def table(summaries: dict[str, dict[str, Any]], ks: Sequence[int]) -> str:
    """The per-language table ``eval --lang`` prints."""
    head = f"{'language':8s}  {'problems':>8s}  {'completions':>11s}" + "".join(f"  {f'pass@{k}':>6s}" for k in ks) \
        + f"  {'masked':>6s}"
    lines = [head]
    for lang, s in summaries.items():
        figs = "".join(f"  {s[f'pass@{k}']:6.3f}" if f"pass@{k}" in s else f"  {'-':>6s}" for k in ks)
        lines.append(f"{lang:8s}  {s['scored']:8d}  {s['samples']:11d}{figs}  {s['infra_failures']:6d}")
    return "\n".join(lines)


def available(problems: Sequence[str] | None, limit: int | None, language: str) -> tuple[list[dict[str, Any]],
                                                                                         list[str]]:
    """The problems of ``language`` that ``--problems`` names (all when None), then the first ``limit``, and the
    named ones that language does not have (a problem that could not be translated: C has no HumanEval/8).

        >>> rows, missing = available(["HumanEval/8", "9"], None, "c")
        >>> [r["task_id"] for r in rows], missing
        (['HumanEval/9'], ['HumanEval/8'])
    """
    from rewardlang.trainers import evaluate as ev

    every = ev.select_problems(None, None, "humaneval", language=language)
    if not problems:
        return every[:limit] if limit else every, []
    by_id = {r["task_id"]: r for r in every}
    rows, missing = [], []
    for p in problems:
        key = p if p.startswith("HumanEval/") else f"HumanEval/{p}"
        (rows.append(by_id[key]) if key in by_id else missing.append(key))
    return (rows[:limit] if limit else rows), missing


def eval_languages(langs: Sequence[str], *, model: str | None, dataset: str, n: int, temperature: float,
                   ks: Sequence[int] | None, problems: Sequence[str] | None, limit: int | None,
                   max_new_tokens: int, completions: str | None, output: str | None, seed: int, threads: int,
                   progress: bool, fail: Callable[[str], None], presentation: dict[str, Any] | None = None,
                   inputs: dict[str, Any] | None = None, program: Any = None, plus: bool = False) -> None:
    """Evaluate each language in turn and print its table row, then the summaries as one JSON line; the
    per-problem records of every language go to ``output`` (written once, complete).

    Each language is evaluated over the problems it has: a problem ``--problems`` names that a language lacks is
    left out of that language and named (``--lang all --problems 8``: C has no HumanEval/8); a language left with
    none is left out and named; none at all is an error. ``presentation`` (``--spec``'s ``system_prompt`` and
    ``prompt_template``) is how every language's problems are asked; without it, Python's are asked as a run
    directory was trained (else the default) and another language's with :func:`~rewardlang.trainers.evaluate.
    lang_system_prompt`. ``program`` (``--spec``, else a run directory's spec) scores every answer too. With
    ``completions``, pass@k's k defaults to 1 and the completions the file holds per problem, as for Python.
    ``plus``: pass@k on the hidden tests too (:mod:`rewardlang.trainers.plus_eval`), one line per language."""
    if completions is None:
        ks = sorted(set(ks or [1, n]))
        if any(x < 1 or x > n for x in ks):
            fail(f"--k {ks}: every k must be between 1 and --n ({n})")
    if dataset != "humaneval":
        fail(f"--lang: only HumanEval is translated (not --dataset {dataset})")
    if output is not None:
        try:
            check_output(output, inputs={"completions file": completions, **(inputs or {})})
        except OutputError as exc:
            fail(str(exc))
    chosen: dict[str, list[dict[str, Any]]] = {}
    try:
        for lang in langs:
            rows, missing = available(problems, limit, lang)
            if missing:
                n_all = len(ev.select_problems(None, None, "humaneval", language=lang))
                where = "; left out of it" if rows else "; the language is left out"
                typer.echo(f"note: {lang}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not among "
                           f"the {n_all} problems translated into {lang}{where}", err=True)
            if rows:
                chosen[lang] = rows
    except ValueError as exc:
        fail(str(exc))
        return
    if not chosen:
        fail(f"--problems {' '.join(problems or [])}: no problem to evaluate in {', '.join(langs)}")
        return
    m = tok = None
    name = None
    run_shown: dict[str, Any] = {}
    summaries: dict[str, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []
    plus_lines: list[str] = []
    try:
        if completions is None:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            if threads > 0:
                import torch

                torch.set_num_threads(threads)
            name = model or default_model()
            m, tok, run_shown = ev.load_eval_model(name)
            if program is None and model is not None and os.path.isdir(model):
                program = ev.run_spec(model)  # a run directory's answers are scored with the spec it trained on
        elif not os.path.exists(completions):
            fail(f"--completions {completions}: file not found")
        for lang, rows in chosen.items():
            if completions is not None:
                given = ev.load_completions(completions, rows)
                try:  # pass@k from the completions the file holds per problem
                    lang_ks = ev.completion_ks(completions, rows, given, ks)
                except ValueError as exc:
                    fail(str(exc))
                given_shown = presentation or {}  # what the spec scores: the problems as it presents them
                summary, recs = ev.evaluate(rows, completions=given, ks=lang_ks, program=program,
                                            system_prompt=given_shown.get("system_prompt"),
                                            prompt_template=given_shown.get("prompt_template"),
                                            few_shot=given_shown.get("few_shot") or ())
            else:
                shown = presentation if presentation else (run_shown if lang == "python" else {})
                default = ev.DEFAULT_SYSTEM_PROMPT if lang == "python" else ev.lang_system_prompt(lang)
                summary, recs = ev.evaluate(rows, model=m, tokenizer=tok, n=n, ks=ks, temperature=temperature,
                                            max_new_tokens=max_new_tokens, seed=seed, progress=progress,
                                            system_prompt=shown.get("system_prompt") or default,
                                            prompt_template=shown.get("prompt_template"), desc=f"eval {lang}",
                                            program=program, few_shot=shown.get("few_shot") or ())
                summary["model"] = name
            if plus:
                from rewardlang.trainers.plus_eval import plus_line, plus_summary

                ps = plus_summary(rows, recs, lang_ks if completions is not None else ks)
                summary["plus"] = {key: v for key, v in ps.items() if key != "per_problem"}
                for rec, pp in zip(recs, ps["per_problem"], strict=True):
                    rec["plus"] = {key: v for key, v in pp.items() if key != "task_id"}
                plus_lines.append(f"hidden tests, {lang}: {plus_line(ps)}")
            summaries[lang] = summary
            records.extend(recs)
    except (ConfigError, ValueError) as exc:
        fail(str(exc))
        return
    shown_ks = ks or sorted({int(m.group(1)) for s in summaries.values() for key in s
                             if (m := re.fullmatch(r"pass@(\d+)", key))})  # not pass@1_ci95
    typer.echo(table(summaries, shown_ks))
    typer.echo(json.dumps(next(iter(summaries.values())) if len(langs) == 1 else {"languages": summaries}))
    for line in plus_lines:
        typer.echo(line)
    if output:
        ev.write_jsonl(output, records)
        typer.echo(f"per-problem results: {output}")
