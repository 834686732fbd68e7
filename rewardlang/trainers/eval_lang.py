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
from collections.abc import Callable, Sequence
from typing import Any

import typer

from rewardlang.outputs import OutputError, check_output
from rewardlang.trainers import evaluate as ev
from rewardlang.trainers.config import ConfigError
from rewardlang.trainers.defaults import default_model

__all__ = ["eval_languages", "table"]


def table(summaries: dict[str, dict[str, Any]], ks: Sequence[int]) -> str:
    """The per-language table ``eval --lang`` prints."""
    head = f"{'language':8s}  {'problems':>8s}  {'completions':>11s}" + "".join(f"  {f'pass@{k}':>6s}" for k in ks) \
        + f"  {'masked':>6s}"
    lines = [head]
    for lang, s in summaries.items():
        figs = "".join(f"  {s[f'pass@{k}']:6.3f}" if f"pass@{k}" in s else f"  {'-':>6s}" for k in ks)
        lines.append(f"{lang:8s}  {s['scored']:8d}  {s['samples']:11d}{figs}  {s['infra_failures']:6d}")
    return "\n".join(lines)


def eval_languages(langs: Sequence[str], *, model: str | None, dataset: str, n: int, temperature: float,
                   ks: Sequence[int] | None, problems: Sequence[str] | None, limit: int | None,
                   max_new_tokens: int, completions: str | None, output: str | None, seed: int, threads: int,
                   progress: bool, fail: Callable[[str], None], plus: bool = False) -> None:
    """Evaluate each language in turn and print its table row, then the summaries as one JSON line; the
    per-problem records of every language go to ``output`` (written once, complete). ``plus``: pass@k on the
    hidden tests too (:mod:`rewardlang.trainers.plus_eval`), one line per language."""
    ks = sorted(set(ks or [1, n]))
    if any(x < 1 or x > n for x in ks):
        fail(f"--k {ks}: every k must be between 1 and --n ({n})")
    if dataset != "humaneval":
        fail(f"--lang: only HumanEval is translated (not --dataset {dataset})")
    if output is not None:
        try:
            check_output(output, inputs={"completions file": completions})
        except OutputError as exc:
            fail(str(exc))
    try:
        chosen = {lang: ev.select_problems(problems if problems else None, limit, dataset, language=lang)
                  for lang in langs}
    except ValueError as exc:
        fail(str(exc))
        return
    m = tok = None
    name = None
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
            m, tok, _shown = ev.load_eval_model(name)
        elif not os.path.exists(completions):
            fail(f"--completions {completions}: file not found")
        for lang, rows in chosen.items():
            if completions is not None:
                given = ev.load_completions(completions, rows)
                summary, recs = ev.evaluate(rows, completions=given, ks=ks)
            else:
                prompt = ev.DEFAULT_SYSTEM_PROMPT if lang == "python" else ev.lang_system_prompt(lang)
                summary, recs = ev.evaluate(rows, model=m, tokenizer=tok, n=n, ks=ks, temperature=temperature,
                                            max_new_tokens=max_new_tokens, seed=seed, progress=progress,
                                            system_prompt=prompt, desc=f"eval {lang}")
                summary["model"] = name
            if plus:
                from rewardlang.trainers.plus_eval import plus_line, plus_summary

                ps = plus_summary(rows, recs, ks)
                summary["plus"] = {key: v for key, v in ps.items() if key != "per_problem"}
                for rec, pp in zip(recs, ps["per_problem"], strict=True):
                    rec["plus"] = {key: v for key, v in pp.items() if key != "task_id"}
                plus_lines.append(f"hidden tests, {lang}: {plus_line(ps)}")
            summaries[lang] = summary
            records.extend(recs)
    except (ConfigError, ValueError) as exc:
        fail(str(exc))
        return
    typer.echo(table(summaries, ks))
    typer.echo(json.dumps(summaries[langs[0]] if len(langs) == 1 else {"languages": summaries}))
    for line in plus_lines:
        typer.echo(line)
    if output:
        ev.write_jsonl(output, records)
        typer.echo(f"per-problem results: {output}")
