"""``rewardlang eval``: pass@1 and pass@k of a model on HumanEval problems, every program judged in the sandbox.

``dataset="robot"`` evaluates on the robot tasks instead (held-out split by default, docs/robot.md): a completion's
first python block runs on its task's 5 worlds in the robot simulator; its class is the worst run, it passes on
``success``, and the summary adds ``outcome_classes`` (the paper's Python / simulation / completion error /
success counts).

For each problem the model writes ``n`` completions (greedy when ``temperature`` is 0, then ``n`` is 1); each
completion becomes a program (:func:`program_for`) that the sandbox runs against the problem's tests
(:mod:`rewardlang.sandbox`: the verdict is computed outside the program's process). A problem's pass@k is the
unbiased estimator of Chen et al. (2021), ``1 - C(n - c, k) / C(n, k)`` for ``c`` passing samples of ``n``
(:func:`pass_at_k`), and the reported figure is its mean over problems. A completion whose execution failed for an
infrastructure reason (a sandbox slot died) is left out of its problem's ``n`` and counted, never scored as a fail.

Given completions (``--completions FILE``, rows ``{"task_id", "completion"}``) are judged the same way without a
model, which is how the canonical solutions are checked to score 1.0.

    >>> pass_at_k(5, 2, 1), round(pass_at_k(5, 2, 2), 4), pass_at_k(5, 0, 3), pass_at_k(3, 2, 2)
    (0.4, 0.7, 0.0, 1.0)
    >>> program_for("```python\\ndef f(x):\\n    return x\\n```", "import math\\n", "f")
    'import math\\n\\ndef f(x):\\n    return x\\n'
    >>> program_for("    return x\\n", "def f(x):\\n", "f")
    'def f(x):\\n    return x\\n'
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from rewardlang.pycompile import compile_quietly
from rewardlang.trainers import prefix as _prefix
from rewardlang.trainers.prefix import prefill_rows, shared_prefix

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["pass_at_k", "program_for", "lang_program_for", "lang_system_prompt", "translated_humaneval",
           "translation_code", "robot_program", "judge", "judge_robot", "generate", "evaluate", "summarize", "write_jsonl",
           "load_completions", "select_problems", "load_eval_model", "DEFAULT_SYSTEM_PROMPT", "bootstrap_ci",
           "mean_ci", "paired_change", "spec_scores", "spec_summary", "change_between", "BOOTSTRAP_SEED",
           "run_spec", "load_compare", "figures_lines"]

#: how a problem is presented when neither a spec nor a run directory says (the shipped specs state their own)
DEFAULT_SYSTEM_PROMPT = ("You are an expert Python programmer. Complete the function the user gives. Reply with the "
                         "whole function in one ```python code block.")
#: the same for ``--dataset robot`` (the prompt already holds the API description and the task)
ROBOT_SYSTEM_PROMPT = ("You are a robot programmer. Reply with one ```python code block that defines task_program() "
                       "using only the robot API, and nothing else.")

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``c`` correct of ``n`` samples: ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021),
    computed exactly (integer binomials, one rounding at the end; Chen et al.'s product form rounds at every
    factor). ``k > n`` is an error (the estimate needs at least ``k`` samples).

    >>> pass_at_k(10, 1, 1), pass_at_k(10, 10, 5), round(pass_at_k(10, 3, 5), 6)
    (0.1, 1.0, 0.916667)
    """
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"pass_at_k: need 0 <= c <= n and k >= 1 (n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"pass_at_k: k={k} needs at least k samples per problem (n={n})")
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


_FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[ \t]*$", re.MULTILINE)
_CODE_LINE = re.compile(r"^(?:[ \t]+\S|def |class |import |from |@|async def |return )", re.MULTILINE)


def code_of(completion: str, prompt: str = "") -> str:
    r"""The code a completion holds: its first fenced block, or, when the completion starts with code and the
    first fence is a bare one that closes it (a model continuing the prompt writes the body, then a closing fence and
    prose), the text before that fence; the whole text when there is no fence.

    The text before a bare first fence is code when it has a code line (indented, or starting with ``def``,
    ``class``, ``import``, ``from``, ``@`` or ``return``) and parses as Python after ``prompt`` (parsed, never
    run); otherwise the fence opens a block (``Here is the code:`` then a fence).

    >>> code_of("    return x\n```\n\nThis returns x.", "def f(x):\n")
    '    return x\n'
    >>> code_of("Here it is:\n```\ndef f(x):\n    return x\n```\nDone.")
    'def f(x):\n    return x\n'
    >>> code_of("```python\ndef f(x):\n    return x\n```")
    'def f(x):\n    return x\n'
    """

    first = _FENCE_LINE.search(completion)
    if first is None:
        return completion
    before = completion[:first.start()]
    if before.strip() and not first.group(1) and _CODE_LINE.search(before):
        for source in ((prompt + before, before) if prompt else (before,)):
            try:
                compile_quietly(source)
            except (SyntaxError, ValueError):
                continue
            return before
    m = _FENCE.search(completion, first.start())
    return m.group(1) if m else completion


def program_for(completion: str, prompt: str, entry_point: str) -> str:
    """The program a completion stands for: its first python code block (the whole text when it has none); when
    that code defines ``entry_point`` it follows the problem's prompt (imports and helpers stay defined, the new
    definition replaces the docstring-only one), else it is the body that continues the prompt (HumanEval's own
    convention, as the canonical solutions are written)."""
    code = code_of(completion, prompt)
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.M):
        return prompt + "\n" + code
    return prompt + code


def lang_system_prompt(language: str) -> str:
    """How a problem in another language is presented (``eval --lang``): the prompt ends with the function's
    declaration and opening, and the program is the prompt followed by the completion."""
    from rewardlang.sandbox.languages import PROFILES

    p = PROFILES[language]
    return (f"You are an expert {p.title} programmer. Complete the code the user gives: write the body of the "
            f"function it opens and close what it opened. Reply with the code in one ```{language} block.")


def lang_program_for(completion: str, prompt: str, language: str) -> str:
    r"""The unit a completion in another language stands for: the first fenced block of that language (else of
    any language, else the whole text). When the block restates the prompt's last line (the function's
    declaration) the unit is the prompt up to that line and the block from it (the model rewrote the
    function), else the prompt followed by the block (it continued the prompt).

        >>> lang_program_for("```cpp\nint f(int x) {\n  return x;\n}\n```", "#include <x>\nint f(int x) {\n", "cpp")
        '#include <x>\nint f(int x) {\n  return x;\n}'
        >>> lang_program_for("  return x;\n}\n", "int f(int x) {\n", "c")
        'int f(int x) {\n  return x;\n}\n'
    """
    from rewardlang.sandbox.languages import fence_names

    names = fence_names(language)
    blocks = re.findall(r"```[ \t]*([\w+#.-]*)[ \t]*\n(.*?)(?:```|\Z)", completion, re.S)
    code = next((b for tag, b in blocks if tag.lower() in names), None)
    if code is None:
        code = blocks[0][1] if blocks else completion
    lines = prompt.rstrip("\n").split("\n")
    decl = lines[-1].strip() if lines else ""
    if decl:
        for m in re.finditer(r"^[ \t]*" + re.escape(decl), code, re.M):
            head = "\n".join(lines[:-1])
            return (head + "\n" if head else "") + code[m.start():].rstrip("\n")
    return prompt + code


def translation_code(completion: str, language: str) -> str | None:
    r"""The unit a translation answer holds, by ``specs/oorl.reward``'s format rule: exactly one fenced block in
    ``language`` (its usual fence names), closed, not empty, and no unclosed fence anywhere; None when the answer
    does not follow the format (it is not run: the rule reward gives it 0).

        >>> translation_code("```js\nfunction f() { return 1; }\n```", "js")
        'function f() { return 1; }'
        >>> translation_code("```python\ndef f():\n    return 1\n```", "js") is None
        True
        >>> translation_code("```js\nlet a;\n```\n```js\nlet b;\n```", "js") is None
        True
    """
    from rewardlang.runtime.components.text import fence_language_ok, fences

    blocks = fences(completion)
    ours = [b for b in blocks if fence_language_ok(b[0], language)]
    if len(ours) != 1 or not all(b[3] for b in blocks):
        return None
    code = completion[ours[0][1]:ours[0][2]]
    return code if code.strip() else None


def translated_humaneval(language: str) -> list[dict[str, Any]]:
    """HumanEval translated into ``language`` (rows with ``task_id``, ``prompt``, structured ``tests``,
    ``entry_point``, ``language``): the one place ``eval --lang`` reads them from."""
    try:
        from rewardlang.datasets.multilang import load_humaneval as load_translated  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ValueError(f"--lang {language}: the translated HumanEval (rewardlang.datasets.multilang) is not "
                         f"installed in this checkout ({exc})") from None
    return load_translated(language)


def robot_program(completion: str) -> str:
    """The program of a robot completion: its first python code block, else the whole text."""
    return code_of(completion)


def judge_robot(problems: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[str]], *,
                timeout: float = 2.0) -> list[list[str | None]]:
    """Each robot completion's class over its task's 5 worlds (``success``, ``completion_error``,
    ``simulation_error``, ``python_error``; None for an infrastructure failure), per problem, in order."""
    from rewardlang.runtime.api import Context
    from rewardlang.runtime.components.robot import RobotParams, robot_outcome_label

    codes, tasks, where = [], [], []
    for i, (row, comps) in enumerate(zip(problems, completions, strict=True)):
        for comp in comps:
            codes.append(robot_program(comp))
            tasks.append(row["task"])
            where.append(i)
    res = robot_outcome_label.fn(codes, tasks, params=RobotParams(timeout=timeout), ctx=Context()) if codes else None
    out: list[list[str | None]] = [[] for _ in problems]
    for j, i in enumerate(where):
        assert res is not None
        if res.infra and res.infra[j]:
            out[i].append(None)
        elif res.values[j] is None:  # a task the components cannot read: the data is wrong, say so
            raise ValueError(f"{problems[i]['task_id']}: {res.errors[j] if res.errors else 'no value'}")
        else:
            out[i].append(res.values[j])
    return out


def judge(problems: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[str]], *,
          timeout: float = 10.0, dataset: str = "humaneval") -> list[list[str | None]]:
    """Each completion's outcome class from the sandbox (``"pass"``, ``"fail"``, ``"timeout"`` ...; None for an
    infrastructure failure), per problem, in order. ``dataset="robot"``: :func:`judge_robot`. A translation row
    (one with a ``source_language``) is judged as ``specs/oorl.reward`` judges it: the answer's one block in the
    target language (:func:`translation_code`) against the row's tests; an answer out of that format is
    ``format_error``, never run."""
    from rewardlang.sandbox import Limits, Task, get_sandbox

    if dataset == "robot":
        return judge_robot(problems, completions)

    limits = Limits(cpu=timeout)
    tasks, where = [], []
    out: list[list[str | None]] = [[] for _ in problems]
    unformatted: set[tuple[int, int]] = set()
    for i, (row, comps) in enumerate(zip(problems, completions, strict=True)):
        lang = row.get("language") or "python"
        for j, comp in enumerate(comps):
            if row.get("source_language"):
                code = translation_code(comp, lang)
                if code is None:
                    unformatted.add((i, j))
                else:
                    tasks.append(Task(code, row["tests"], row["entry_point"], limits=limits, language=lang))
                    where.append((i, j))
            elif lang == "python":   # the prompt's helpers are the tests' trusted prelude (docs/sandbox.md)
                tasks.append(Task(program_for(comp, row["prompt"], row["entry_point"]), row["tests"],
                                  row["entry_point"], format="humaneval", limits=limits, prelude=row["prompt"]))
            else:
                tasks.append(Task(lang_program_for(comp, row["prompt"], lang), row["tests"], row["entry_point"],
                                  limits=limits, language=lang))
            if not row.get("source_language"):
                where.append((i, j))
    verdicts = dict(zip(where, get_sandbox().evaluate(tasks) if tasks else [], strict=True))
    for i, comps in enumerate(completions):
        for j in range(len(comps)):
            if (i, j) in unformatted:
                out[i].append("format_error")
            else:
                v = verdicts[(i, j)]
                out[i].append(None if v.infra else v.outcome)
    return out


def undefined_in(problems: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Python problems whose tests use names nothing defines (not the tests, the prompt as their prelude, the
    builtins or the standard library): ``{"task", "names"}`` each. Those tests fail for every program.

        >>> from rewardlang.datasets.humaneval import load_humaneval
        >>> undefined_in(load_humaneval())
        []
    """
    from rewardlang.sandbox.convert import TestFormatError, make_plan

    out = []
    for row in problems:
        if (row.get("language") or "python") != "python" or row.get("source_language") or not row.get("tests"):
            continue
        try:
            plan = make_plan(row["tests"], row.get("entry_point"), "humaneval", row.get("prompt"))
        except TestFormatError:
            continue
        if plan.undefined:
            out.append({"task": row.get("task_id", row.get("entry_point")), "names": list(plan.undefined)})
    return out


def generate(model: "PreTrainedModel", tokenizer: "PreTrainedTokenizerBase", problems: Sequence[Mapping[str, Any]],
             *, n: int = 1, temperature: float = 0.0, max_new_tokens: int = 256, system_prompt: str | None = None,
             prompt_template: str | None = None, batch_size: int = 32, seed: int = 0,
             on_problem: Callable[[int], None] | None = None, few_shot: Sequence[str] = ()) -> list[list[str]]:
    """``n`` completions per problem (greedy when ``temperature`` is 0), prompts presented as in training
    (:func:`rewardlang.trainers.data.present`), generated ``batch_size`` sequences at a time with left padding.

    Problems go to the model shortest prompt first (the result keeps the problems' order): a batch then pads its
    prompts to similar lengths, and a larger batch amortises each decoding step's weight reads (on 2 CPU cores,
    SmolLM2-135M: 26 ms a token at 8 sequences, 14 ms at 40). The batches, and so the completions, depend only on
    the problems, the tokenizer and ``batch_size``: the same for a seed on every run."""
    import torch

    from rewardlang.trainers.data import render_prompt

    if temperature <= 0 and n != 1:
        raise ValueError("greedy decoding (temperature 0) gives one completion per problem: use --n 1, or a "
                         "temperature above 0 for pass@k")
    chat = bool(getattr(tokenizer, "chat_template", None))
    texts = [render_prompt(row["prompt"], tokenizer, chat, system_prompt, prompt_template, few_shot)
             for row in problems]
    was_training = model.training
    model.eval()
    per_batch = max(1, batch_size // n)
    token_ids = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    lengths = [len(ids) for ids in token_ids]
    order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
    out: list[list[str]] = [[] for _ in texts]
    gen = torch.Generator().manual_seed(seed)
    done = 0
    # The system prompt and worked examples are the same tokens at the start of every prompt: their keys and values
    # are computed once and every batch continues from a copy (greedy answers only: sampled ones keep their draws).
    prefix = shared_prefix(token_ids) if n == 1 else 0
    prefix_cache = None
    if prefix >= _prefix.MIN_SHARED_PREFIX:
        with torch.no_grad():
            prefix_cache = model(input_ids=torch.tensor([token_ids[0][:prefix]], device=model.device),
                                 use_cache=True).cache
    try:
        for start in range(0, len(order), per_batch):
            members = order[start:start + per_batch]
            if prefix_cache is not None:
                enc, cache = prefill_rows(model, [token_ids[i] for i in members], prefix, prefix_cache,
                                          tokenizer.pad_token_id, model.device)
            else:
                chunk = [texts[i] for i in members]
                enc = tokenizer(chunk, return_tensors="pt", padding=True, padding_side="left",
                                add_special_tokens=False).to(model.device)
            kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, num_return_sequences=n,
                                          pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
            if temperature > 0:
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
                kwargs.update(do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            if prefix_cache is not None:
                kwargs["cache"] = cache
            with torch.no_grad():
                seqs = model.generate(**enc, **kwargs)
            decoded = tokenizer.batch_decode(seqs[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for j, i in enumerate(members):
                out[i] = decoded[j * n:(j + 1) * n]
                if on_problem is not None:
                    on_problem(done)
                done += 1
    finally:
        model.train(was_training)
    return out


def summarize(records: Sequence[Mapping[str, Any]], ks: Iterable[int]) -> dict[str, Any]:
    """pass@k averaged over problems (a k above a problem's sample count is left out of the summary)."""
    ks = sorted(set(ks))
    scored = [r for r in records if r["n"] > 0]
    out: dict[str, Any] = {"problems": len(records), "scored": len(scored),
                           "samples": sum(r["n"] for r in records),
                           "infra_failures": sum(r["infra"] for r in records)}
    for k in ks:
        vals = [pass_at_k(r["n"], r["correct"], k) for r in scored if r["n"] >= k]
        if vals and len(vals) == len(scored):
            out[f"pass@{k}"] = sum(vals) / len(vals)
    return out


def write_jsonl(path: str, records: Iterable[Mapping[str, Any]]) -> None:
    """Write ``records`` whole or not at all (:func:`rewardlang.outputs.atomic_write`: a temporary beside ``path``,
    renamed over it; mode 0644; ``OutputError`` naming the path on a full disk)."""
    from rewardlang.outputs import OutputError, atomic_write

    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise OutputError.writing(path, exc) from exc
    with atomic_write(path) as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")


def _named(rows: list[dict[str, Any]], problems: Sequence[str], unknown: Callable[[str], str],
           prefix: str = "HumanEval/") -> list[dict[str, Any]]:
    """The rows named by ``problems`` in that order (``0`` stands for ``{prefix}0``); ValueError(``unknown(p)``) for
    the first name that is not among them."""
    by_id = {r["task_id"]: r for r in rows}
    chosen = []
    for p in problems:
        key = p if not prefix or p.startswith(prefix) else prefix + p
        if key not in by_id:
            raise ValueError(unknown(p))
        chosen.append(by_id[key])
    return chosen


def select_problems(problems: Sequence[str] | None = None, limit: int | None = None,
                    dataset: str = "humaneval", language: str = "python") -> list[dict[str, Any]]:
    """HumanEval rows: those named (``HumanEval/0`` or ``0``), else all, then the first ``limit``. ``robot``: the
    robot tasks' rows (:func:`rewardlang.domains.robot.data.rows`), those named by task id, else the held-out
    split. ``language`` other than python: the translated HumanEval of that language
    (:func:`translated_humaneval`; a problem that could not be translated is not there)."""
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be at least 1 (got {limit})")
    if language != "python":
        if dataset != "humaneval":
            raise ValueError(f"--lang {language}: only the HumanEval dataset is translated (not {dataset})")
        rows = [dict(r, language=language) for r in translated_humaneval(language)]
        if problems:
            rows = _named(rows, problems, lambda p: f"--problems: {p!r} is not among the {len(rows)} problems "
                                                    f"translated into {language}")
    elif dataset == "robot":
        from rewardlang.domains.robot.data import rows as robot_rows

        every = robot_rows()
        if problems:
            rows = _named(every, problems, lambda p: f"--problems: unknown robot task {p!r} (e.g. "
                                                     f"{every[0]['task_id']})", prefix="")
        else:
            rows = [r for r in every if r["split"] == "heldout"]
    elif dataset != "humaneval":
        raise ValueError(f"--dataset {dataset}: humaneval or robot")
    else:
        from rewardlang.datasets.humaneval import load_humaneval

        rows = load_humaneval()
        if problems:
            rows = _named(rows, problems, lambda p: f"--problems: unknown problem {p!r} (HumanEval/0 .. "
                                                    f"HumanEval/{len(rows) - 1})")
    return rows[:limit] if limit else rows


def load_completions(path: str, problems: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Completions from a JSONL file of ``{"task_id", "completion"}`` rows, grouped per problem (in order).

    Bad rows (not JSON, no ``task_id``/``completion``, an unknown task) are a ValueError naming the line; a problem
    with no completion is an error too (its pass@k would be undefined)."""
    from rewardlang.jsonl import read_jsonl

    by_id: dict[str, list[str]] = {r["task_id"]: [] for r in problems}
    for lineno, row in read_jsonl(path):
        if not isinstance(row.get("task_id"), str) or not isinstance(row.get("completion"), str):
            raise ValueError(f"{path}:{lineno}: expected {{\"task_id\": str, \"completion\": str}}")
        if row["task_id"] in by_id:
            by_id[row["task_id"]].append(row["completion"])
    missing = [t for t, c in by_id.items() if not c]
    if missing:
        raise ValueError(f"{path}: no completion for {len(missing)} of {len(by_id)} problems (first: {missing[0]}); "
                         f"choose the problems with --problems")
    return [by_id[r["task_id"]] for r in problems]


def completion_ks(path: str, problems: Sequence[Mapping[str, Any]], given: Sequence[Sequence[str]],
                  ks: Sequence[int] | None) -> list[int]:
    """The pass@k values to report from a completions file: ``ks`` (default 1 and the fewest completions a problem
    has), each between 1 and that fewest. ValueError naming a problem with the fewest otherwise.

        >>> completion_ks("c.jsonl", [{"task_id": "a"}, {"task_id": "b"}], [["x", "y"], ["z"]], None)
        [1]
        >>> completion_ks("c.jsonl", [{"task_id": "a"}], [["x"]], [2])
        Traceback (most recent call last):
        ValueError: --k [2]: every k must be between 1 and the completions per problem (c.jsonl holds 1 for a)
    """
    fewest = min(len(c) for c in given)
    out = sorted(set(ks or [1, fewest]))
    if any(x < 1 or x > fewest for x in out):
        short = next(r["task_id"] for r, c in zip(problems, given) if len(c) == fewest)
        raise ValueError(f"--k {out}: every k must be between 1 and the completions per problem ({path} holds "
                         f"{fewest} for {short})")
    return out


#: the bootstrap's fixed seed: an interval is a function of its sample alone, the same on every run and machine
BOOTSTRAP_SEED = 20240601
#: bootstrap resamples (the interval's ends move by about 0.005 of a standard error between seeds at this count)
BOOTSTRAP_RESAMPLES = 10_000


def bootstrap_ci(values: Sequence[float], *, level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> list[float] | None:
    """The percentile bootstrap interval of the mean of ``values`` (Efron & Tibshirani, 1993, ch. 13): the mean of
    ``resamples`` resamples drawn with replacement, and their ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles
    (numpy's linear interpolation). Deterministic: a fixed ``seed``. None for an empty sample; a sample whose
    values are all equal gives that value at both ends.

    A sample of two values, 0 and 1: the resampled means are 0, 0.5 and 1 with probabilities 1/4, 1/2, 1/4, so the
    95 % interval is [0, 1]; one of 40 values spread evenly is about the mean ± 1.96 standard errors.

    >>> bootstrap_ci([0.0, 1.0])
    [0.0, 1.0]
    >>> bootstrap_ci([0.3] * 7), bootstrap_ci([])
    ([0.3, 0.3], None)
    >>> lo, hi = bootstrap_ci([i / 39 for i in range(40)]); round(lo, 2), round(hi, 2)
    (0.41, 0.59)
    """
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("bootstrap_ci: a one-dimensional sample")
    if not 0 < level < 1 or resamples < 1:
        raise ValueError(f"bootstrap_ci: level in (0, 1) and resamples >= 1 (got {level}, {resamples})")
    if x.size == 0:
        return None
    if not np.isfinite(x).all():
        raise ValueError("bootstrap_ci: the sample holds NaN or infinity (leave masked values out first)")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, 4_000_000 // x.size)  # bounded memory for large samples: indices drawn in blocks
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        means[start:stop] = x[rng.integers(0, x.size, size=(stop - start, x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    # an all-equal sample's resampled means differ from it in the last bit (summation order): clamp to the range
    lo, hi = max(float(lo), float(x.min())), min(float(hi), float(x.max()))
    return [lo, hi]


def mean_ci(values: Sequence[float], **kw: Any) -> dict[str, Any]:
    """``{"mean", "ci95", "n"}`` of a sample (:func:`bootstrap_ci`); mean and interval None when it is empty.

    >>> mean_ci([1.0, 0.0, 1.0, 1.0])["mean"]
    0.75
    """
    vals = [float(v) for v in values]
    return {"mean": sum(vals) / len(vals) if vals else None, "ci95": bootstrap_ci(vals, **kw), "n": len(vals)}


def paired_change(before: Sequence[float | None], after: Sequence[float | None], **kw: Any) -> dict[str, Any]:
    """The change ``after - before`` of paired values (one pair per problem): its mean and the 95 % bootstrap
    interval of that mean, resampling problems (the pairs stay together, so what every problem shares, its
    difficulty, cancels). A pair with a None on either side (a masked reward, a problem with no judged sample) is
    left out and counted in ``"left_out"``.

    >>> paired_change([0.2, 0.5, 0.1], [0.2, 0.5, 0.1])
    {'mean': 0.0, 'ci95': [0.0, 0.0], 'n': 3, 'left_out': 0}
    >>> c = paired_change([0.2, 0.5, None], [0.4, 0.7, 0.9]); c["ci95"], c["n"], c["left_out"]
    ([0.2, 0.2], 2, 1)
    """
    if len(before) != len(after):
        raise ValueError(f"paired_change: {len(before)} values before, {len(after)} after")
    pairs = [(float(b), float(a)) for b, a in zip(before, after) if b is not None and a is not None]
    out = mean_ci([a - b for b, a in pairs], **kw)
    if out["mean"] is not None:
        out["mean"] = round(out["mean"], 12)  # 0.4 - 0.2 and 0.7 - 0.5 differ in the last bit; their mean is 0.2
        out["ci95"] = [round(v, 12) for v in out["ci95"]]
    out["left_out"] = len(before) - len(pairs)
    return out


def score_completions(program: Any, problems: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[str]], *,
                      chat: bool = True, system_prompt: str | None = None, prompt_template: str | None = None,
                      few_shot: Sequence[str] = ()) -> tuple[list[int], Any]:
    """Every completion scored by ``program`` (a compiled spec) as training scores it: the spec reads the problem's
    columns by its inputs' names, and the prompt as the model was shown it (:func:`rewardlang.trainers.data.present`).
    Returns ``(owner, result)``: ``owner[j]`` is the problem of the j-th completion (problems in order, each one's
    completions in order) and ``result`` the program's score of them all, one batch (None when there are none)."""
    from rewardlang.trainers.data import present

    flat = [(i, c) for i, comps in enumerate(completions) for c in comps]
    if not flat:
        return [], None
    cols: dict[str, list[Any]] = {"completion": [c for _, c in flat]}
    for inp in program.inputs:
        if inp.name == "completion" or not inp.used:
            continue
        if inp.name == "prompt":
            cols["prompt"] = [present(problems[i]["prompt"], chat, system_prompt, prompt_template, few_shot)
                              for i, _ in flat]
        else:
            cols[inp.name] = [problems[i].get(inp.column) for i, _ in flat]
    return [i for i, _ in flat], program.score(**cols)


def spec_scores(program: Any, problems: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[str]], *,
                chat: bool = True, system_prompt: str | None = None, prompt_template: str | None = None,
                few_shot: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Each problem's completions scored by ``program`` (:func:`score_completions`). Per problem: ``reward`` (the
    mean total of its unmasked completions; None when every one is masked), ``components`` (each one's mean over
    the same completions) and ``reward_masked`` (completions whose total the spec masked: an infrastructure
    failure, never scored 0)."""
    import numpy as np

    owner, res = score_completions(program, problems, completions, chat=chat, system_prompt=system_prompt,
                                   prompt_template=prompt_template, few_shot=few_shot)
    if res is None:
        return [{"reward": None, "components": {}, "reward_masked": 0} for _ in problems]
    of: list[list[int]] = [[] for _ in problems]
    for j, i in enumerate(owner):
        of[i].append(j)
    out = []
    for rows in of:
        totals = [float(res.total[j]) for j in rows if res.total[j] == res.total[j]]
        comps = {}
        for name, vals in res.components.items():
            got = [float(vals[j]) for j in rows if vals[j] == vals[j] and res.total[j] == res.total[j]]
            comps[name] = float(np.mean(got)) if got else None
        out.append({"reward": float(np.mean(totals)) if totals else None, "components": comps,
                    "reward_masked": len(rows) - len(totals)})
    return out


def spec_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The spec's held-out figures over ``records`` (per problem: ``reward``, ``components``, ``pass@1``): the
    reward's mean and 95 % bootstrap interval over problems, each component's mean (and interval), pass@1's
    interval. Problems whose reward is masked are left out of the reward and counted."""
    out: dict[str, Any] = {}
    rewards = [r["reward"] for r in records if r.get("reward") is not None]
    if any("reward" in r for r in records):
        out["reward"] = {**mean_ci(rewards), "masked": len(records) - len(rewards)}
        names = list(dict.fromkeys(k for r in records for k in (r.get("components") or {})))
        per = {k: [r["components"][k] for r in records if r.get("reward") is not None
                   and (r.get("components") or {}).get(k) is not None] for k in names}
        out["components"] = {k: (sum(v) / len(v) if v else None) for k, v in per.items()}
        out["components_ci95"] = {k: bootstrap_ci(v) for k, v in per.items()}
    passes = [r["pass@1"] for r in records if r.get("pass@1") is not None]
    if passes:
        out["pass@1_ci95"] = bootstrap_ci(passes)
    return out


def _key(r: Mapping[str, Any]) -> tuple[str, str]:
    return (str(r["task_id"]), str(r.get("language") or "python"))


def change_between(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``after - before`` per problem (paired by task id and language), for the spec's reward, each component and
    pass@1: each a :func:`paired_change`. Problems on one side only are an error (the two evaluations must judge
    the same problems)."""
    a = {_key(r): r for r in after}
    b = {_key(r): r for r in before}
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"before and after evaluated different problems (first: {only[0][0]})")
    keys = [_key(r) for r in before]
    out: dict[str, Any] = {}
    if any("reward" in r for r in before):
        out["reward"] = paired_change([b[k].get("reward") for k in keys], [a[k].get("reward") for k in keys])
        names = list(dict.fromkeys(n for r in (*before, *after) for n in (r.get("components") or {})))

        def comp(r: Mapping[str, Any], n: str) -> float | None:
            return None if r.get("reward") is None else (r.get("components") or {}).get(n)

        out["components"] = {n: paired_change([comp(b[k], n) for k in keys], [comp(a[k], n) for k in keys])
                             for n in names}
    out["pass@1"] = paired_change([b[k].get("pass@1") for k in keys], [a[k].get("pass@1") for k in keys])
    return out


def evaluate(problems: Sequence[Mapping[str, Any]], *, model: Any = None, tokenizer: Any = None,
             completions: Sequence[Sequence[str]] | None = None, n: int = 1, ks: Sequence[int] = (1,),
             temperature: float = 0.0, max_new_tokens: int = 256, system_prompt: str | None = None,
             prompt_template: str | None = None, seed: int = 0, progress: bool = False, desc: str = "eval",
             out_path: str | None = None, dataset: str = "humaneval", program: Any = None,
             chat: bool | None = None, few_shot: Sequence[str] = (),
             batch_size: int = 32) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate (or take the given ``completions``), judge, and return ``(summary, per-problem records)``; the
    records go to ``out_path`` as JSONL when given (written once everything is judged).

    With a ``program`` (a compiled spec) every completion is also scored by it (:func:`spec_scores`; ``chat``:
    whether prompts were shown as chats, default: when the tokenizer has a chat template) and the summary adds
    :func:`spec_summary`'s figures: the reward's mean and 95 % bootstrap interval, each component's mean, and
    pass@1's interval.

    >>> from rewardlang.datasets.humaneval import load_humaneval
    >>> rows = load_humaneval()[:2]
    >>> summary, _ = evaluate(rows, completions=[[r["reference"]] for r in rows])   # doctest: +SKIP
    >>> summary["pass@1"]                                                            # doctest: +SKIP
    1.0
    """
    t0 = time.perf_counter()
    bar = None
    given = completions is not None
    if completions is None:
        if model is None or tokenizer is None:
            raise ValueError("evaluate: give a model and tokenizer, or completions")
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(problems), desc=desc, unit="problem", dynamic_ncols=True, file=sys.stderr)
        try:
            completions = generate(model, tokenizer, problems, n=n, temperature=temperature,
                                   max_new_tokens=max_new_tokens, system_prompt=system_prompt,
                                   prompt_template=prompt_template, seed=seed, few_shot=few_shot,
                                   batch_size=batch_size, on_problem=(lambda _i: bar.update(1)) if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()
    gen_s = time.perf_counter() - t0
    undefined = undefined_in(problems) if dataset != "robot" else []
    if undefined:   # tests that fail for every program: said once, never a silent 0
        from rewardlang.runtime.components.execution import undefined_names_lines

        for line in undefined_names_lines(found=[(u["task"], u["names"]) for u in undefined]):
            print(line, file=sys.stderr, flush=True)
    outcomes = judge(problems, completions, dataset=dataset)
    passing = "success" if dataset == "robot" else "pass"
    records = []
    for row, comps, outs in zip(problems, completions, outcomes, strict=True):
        ok = [o for o in outs if o is not None]
        c = sum(o == passing for o in ok)
        rec = {"task_id": row["task_id"], "language": row.get("language") or "python", "n": len(ok), "correct": c,
               "infra": len(outs) - len(ok),
               "outcomes": outs, "completions": list(comps)}
        for k in ks:
            if len(ok) >= k:
                rec[f"pass@{k}"] = pass_at_k(len(ok), c, k)
        records.append(rec)
    if program is not None:
        if chat is None:
            chat = bool(getattr(tokenizer, "chat_template", None)) if tokenizer is not None else True
        scores = spec_scores(program, problems, completions, chat=chat, system_prompt=system_prompt,
                             prompt_template=prompt_template, few_shot=few_shot)
        for rec, sc in zip(records, scores, strict=True):
            rec.update(sc)
    summary = summarize(records, ks)
    if undefined:
        summary["undefined_names"] = undefined
    if program is not None or 1 in ks:
        summary.update(spec_summary(records))
        if program is not None:
            summary["spec"] = program.name
    if dataset == "robot":  # the paper's table: how many completions end in each class
        classes = ("python_error", "simulation_error", "completion_error", "success")
        flat = [o for r in records for o in r["outcomes"] if o is not None]
        summary["outcome_classes"] = {c: flat.count(c) for c in classes}
    if given:  # the completions per problem the file holds (not the generation option --n)
        counts = [len(c) for c in completions]
        n = min(counts)
        if max(counts) != n:
            summary["n_max"] = max(counts)
    langs = sorted({r.get("language") or "python" for r in problems})
    if len(langs) > 1:  # several languages (a translation run's targets): each one's figures too
        summary["by_language"] = {lang: summarize([r for r in records if r["language"] == lang], ks)
                                  for lang in dict.fromkeys(r.get("language") or "python" for r in problems)}
    summary.update({"dataset": dataset, "language": langs[0] if len(langs) == 1 else langs, "n": n,
                    "temperature": temperature, "generation_s": round(gen_s, 2),
                    "total_s": round(time.perf_counter() - t0, 2)})
    if out_path:
        write_jsonl(out_path, records)
    return summary, records


def run_spec(name: str) -> Any:
    """The spec a run directory trained on (its ``config.json``: path and parameters), compiled; None when ``name``
    is not a run directory, or the spec file is no longer where the run found it (then ``--spec`` names one)."""
    path = os.path.join(name, "config.json")
    if not (os.path.isdir(os.path.join(name, "final")) and os.path.exists(path)):
        return None
    with open(path, encoding="utf-8") as fh:
        spec = json.load(fh).get("spec") or {}
    where = spec.get("path")
    if not where or not os.path.exists(where):
        return None
    import rewardlang
    from rewardlang.diagnostics import SpecError

    try:
        return rewardlang.load(where, params=spec.get("params") or None)
    except SpecError as exc:
        raise ValueError(f"--model {name}: the spec it trained on, {where}, no longer compiles "
                         f"({exc}); name one with --spec") from None


def load_compare(path: str) -> list[dict[str, Any]]:
    """Per-problem records of an earlier evaluation (``rewardlang eval -o FILE``, or a run's
    ``eval-before.jsonl``) to pair with this one; ValueError naming the line of a row that is not one."""
    from rewardlang.jsonl import read_jsonl

    out = []
    for lineno, row in read_jsonl(path):
        if not isinstance(row.get("task_id"), str) or not isinstance(row.get("n"), int):
            raise ValueError(f"{path}:{lineno}: not a per-problem evaluation record (task_id, n, outcomes ...); "
                             f"give a file written by `rewardlang eval -o` or a run's eval-before.jsonl")
        out.append(row)
    if not out:
        raise ValueError(f"{path}: no per-problem records")
    return out


def figures_lines(summary: Mapping[str, Any]) -> list[str]:
    """``rewardlang eval``'s lines for the spec's reward, its components and pass@1, each with its 95 % bootstrap
    interval over problems, and the paired change against ``--compare`` when there is one.

        >>> figures_lines({"spec": "s", "scored": 3, "pass@1": 0.5, "pass@1_ci95": [0.0, 1.0],
        ...                "reward": {"mean": 0.4, "ci95": [0.1, 0.7], "n": 3, "masked": 0},
        ...                "components": {"format": 1.0}})
        ['reward (spec `s`): 0.400 (95% CI 0.100 to 0.700) over 3 problems; components: format 1.000', 'pass@1: 0.500 (95% CI 0.000 to 1.000)']
    """
    out = []
    r = summary.get("reward") or {}
    if r.get("mean") is not None:
        comps = ", ".join(f"{k} {v:.3f}" for k, v in (summary.get("components") or {}).items() if v is not None)
        out.append(f"reward (spec `{summary.get('spec', '?')}`): {r['mean']:.3f} (95% CI {r['ci95'][0]:.3f} to "
                   f"{r['ci95'][1]:.3f}) over {r['n']} problems" + (f", {r['masked']} masked left out"
                                                                     if r.get("masked") else "")
                   + (f"; components: {comps}" if comps else ""))
    if summary.get("pass@1_ci95"):
        lo, hi = summary["pass@1_ci95"]
        out.append(f"pass@1: {summary['pass@1']:.3f} (95% CI {lo:.3f} to {hi:.3f})")
    ch = summary.get("change") or {}
    for what in ("reward", "pass@1"):
        c = ch.get(what) or {}
        if c.get("mean") is not None:
            out.append(f"change in {what} against {ch.get('against', 'the comparison')}: {c['mean']:+.3f} (95% CI "
                       f"{c['ci95'][0]:+.3f} to {c['ci95'][1]:+.3f}, paired over {c['n']} problems)")
    return out


def not_policy(name: str) -> None:
    """A ValueError when ``name`` (a run directory or a model directory) holds no policy: a PRM run, whose final
    model is a token classifier (a step scorer with a one-logit head), would be loaded as a causal LM with a fresh,
    random output head and "evaluated". Checked before any model loads."""
    run_config = os.path.join(name, "config.json")
    if os.path.isdir(os.path.join(name, "final")) and os.path.exists(run_config):
        try:
            with open(run_config, encoding="utf-8") as fh:
                algorithm = (json.load(fh).get("train") or {}).get("algorithm")
        except (OSError, ValueError):
            algorithm = None
        if algorithm == "prm":
            raise ValueError(f"--model {name}: a PRM run; its final model is a process reward model (it scores "
                             f"steps), not a policy that writes code. Evaluate a policy run, or use this PRM in a "
                             f"spec's prm_* components (docs/prm.md)")
    model_config = os.path.join(name, "config.json")
    if os.path.isdir(name) and os.path.exists(model_config):
        try:
            with open(model_config, encoding="utf-8") as fh:
                archs = json.load(fh).get("architectures") or []
        except (OSError, ValueError):
            archs = []
        heads = [a for a in archs if isinstance(a, str) and not a.endswith(("ForCausalLM", "LMHeadModel"))
                 and a.endswith(("ForTokenClassification", "ForSequenceClassification"))]
        if heads:
            raise ValueError(f"--model {name}: a {heads[0]} (a classifier, such as a PRM's final model), not a "
                             f"policy that writes code; eval measures policies")


def load_eval_model(name: str, dtype: str = "float32") -> tuple[Any, Any, dict[str, Any]]:
    """``smollm2`` | ``tiny`` | a model directory | a run directory or its ``final/`` (the trained policy; a LoRA
    adapter merged into its base, SmolLM2 converted here when this machine has no copy yet:
    :func:`rewardlang.trainers.model.load_trained_policy`) → ``(model, tokenizer, presentation)``;
    ``presentation`` holds the run's ``system_prompt`` and ``prompt_template`` when a run is given (so the model is
    asked as it was trained)."""
    from rewardlang.trainers.config import TrainConfig
    from rewardlang.trainers.model import load_policy, load_trained_policy, run_policy

    not_policy(name)
    if run_policy(name) is not None:
        model, tokenizer, train = load_trained_policy(name, dtype=dtype)
        shown = {k: train.get(k) for k in ("system_prompt", "prompt_template", "few_shot") if train.get(k)}
        return model, tokenizer, shown
    model, tokenizer = load_policy(TrainConfig(model=None if name == "tiny" else name, dtype=dtype))
    return model, tokenizer, {}
