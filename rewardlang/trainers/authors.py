"""The dense-reward PPO authors' token mapping (``mapping = "authors"`` of specs/dense_ppo.reward).

specs/dense_ppo.reward places its four terms on tokens with the project's ``tokens`` clauses (characters, the
overlap rule). The authors' code (stg-tud/RL-CodeGeneration @ bb3551d492d0152a0e04a4c8f80079dadbc32701:
``rewards/ruff_linter_reward.py``, ``wrappers/syncode_wrapper.py``, ``rewards/extra_rewards.py``,
``rewards/reward_helper.py``, ``wrappers/ppo_wrapper.py``, ``config/hyperparams.json``) works on tokens and differs
in many places (docs/specs/dense_ppo.md, quirk table). Under ``mapping = "authors"`` :class:`DenseRewards
<rewardlang.trainers.dense.DenseRewards>` hands the batch to :class:`AuthorsMapping`, which gives every token
what their code gives it. This is an implementation written here from their algorithm, not their code:

- **lint** (``find_row_change_token``, ``get_rewards``): row ``r`` starts at the token after the one whose text
  (decoded since the previous row start, special tokens as text) holds the ``r``-th line break; a finding on
  ruff rows ``a..b`` gives −1 to the tokens from row ``a``'s start to row ``b+1``'s start (to the end when there is
  no such row; a first row past the last is the last); every other token, EOS included, gets +1.
- **syntax** (the SynCode logits processor, ``wrappers/syncode_wrapper.py``): before generating token ``k`` the
  text of the tokens since the last marker is searched, special tokens as text: ``"```python"`` opens a block,
  then ``"```"`` closes it; at each marker the **two tokens before** ``k`` get 2.0 (whatever they held); tokens
  inside a block get ±1, others 0; blocks re-open after a close (every later python block is valued). Inside a
  block, SynCode's rule: the code starts one token after the opening marker's (``start_from = input_ids.size(1)
  + 1``), so that first token is judged against empty code (+1) and is never part of the code; every later token
  gets +1 while the code up to it is a *viable prefix* of a Python program (some text can follow it to make a
  valid program: an unclosed docstring or bracket, a block header without its body are viable), −1 from the first
  token after which no valid program can follow; the end-of-sequence token gets +1 only where the code before it
  is a whole program. CPython decides viability (:func:`rewardlang.runtime.code.validity.viable`). Their check
  is of a *resampled* token (a random draw, not a function of the completion); here the generated tokens are
  checked.
- **masked code**: the tokens whose ``lint_w·lint + syntax_w·syntax`` (float32) is > 0 are kept, the others
  become padding; the kept tokens are decoded (special tokens skipped) and ``extract_python_code`` is applied.
  The spec is scored again on that text (its ``tests`` and ``dfg`` terms under ``mapping = "authors"``: the
  per-test runs, 2 s of CPU each where theirs are 2 s of wall time, the dataflow match), so the tests and the
  dataflow see the masked code.
- **code range** (``get_related_indicies``): from the first kept token, the first ``i`` whose decoded text
  ``[first, i)`` holds ``"```python"`` (whitespace removed) sets ``start = max(i - 2, 0)``; then the first ``i``
  from ``start`` whose text ``[start, i)`` holds the whitespace-free code ends the range at ``i``, or at ``i + 2``
  when tokens ``i, i+1`` decode to exactly ``"```"``; no such ``i`` (the search stops before the last token): the
  range ends at the first kept token. ``tests`` puts its pass share there when > 0, else −0.3 on every kept token;
  ``dfg`` puts its value there when > 0. Both values are stored in bfloat16 and summed in bfloat16
  (``0.1·dfg`` then ``+ 0.7·tests``, their order), then added to the float32 ``0.1·lint + 0.1·syntax``.

Where equality cannot hold: SynCode's ±1 (random, above; and SynCode's LALR grammar for Python approximates the
language where CPython decides here); a block marker completed by the very first token (their score list grows by
one and ``torch.stack`` fails: their run stops; here the one token before it gets 2.0).

    >>> import rewardlang
    >>> from rewardlang.trainers.model import build_tokenizer
    >>> prog = rewardlang.load("specs/dense_ppo.reward", params={"mapping": "authors"})
    >>> mapper = AuthorsMapping(prog, build_tokenizer(300))
    >>> ids = mapper.tokenizer("```python\\nx = 1\\n```")["input_ids"]     # one character a token here
    >>> out = mapper.row_values(ids, [], weights={"lint": 0.1, "syntax": 0.1})
    >>> out["syntax"]    # 2.0 on "o" "n" (the two tokens before the marker is seen); the close is never seen
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0]
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rewardlang.runtime.code import validity
from rewardlang.runtime.components.syntax import DEFAULT_TIMEOUT, SyntaxParams
from rewardlang.trainers.align import TokenAligner

if TYPE_CHECKING:  # pragma: no cover
    from rewardlang.runtime.program import Program

__all__ = ["AuthorsBatch", "AuthorsMapping", "extract_python_code", "uses_authors_mapping"]

OPEN, CLOSE = "```python", "```"
_WS = re.compile(r"\s+")


def uses_authors_mapping(program: Program) -> bool:
    """True when the spec asks for the authors' token mapping (its ``mapping`` param is ``"authors"``)."""
    return program.params.get("mapping") == "authors"


def extract_python_code(text: str) -> str:
    """The authors' code extraction: the text after the first ``"```python"`` up to the next ``"```"`` (or the
    end); ``""`` without one.

    >>> extract_python_code("hi ```python3 x\\ny = 1\\n``` ```python\\nz\\n```")
    '3 x\\ny = 1\\n'
    >>> extract_python_code("```Python\\nx\\n```"), extract_python_code("```python\\nopen")
    ('', '\\nopen')
    """
    start = text.find(OPEN)
    if start < 0:
        return ""
    start += len(OPEN)
    end = text.find(CLOSE, start)
    return text[start:] if end < 0 else text[start:end]


@dataclass
class AuthorsBatch:
    """One batch's per-token values under the authors' mapping, as arrays (what
    :class:`~rewardlang.trainers.dense.DenseRewards` wraps into its :class:`~rewardlang.trainers.dense.DenseBatch`).

    ``rewards``: (B, T) float32, their score sum; ``components``: (B, T) float32 per component; ``masked``: (B,)
    bool, rows never to train on; ``texts``: the decoded completions; ``totals``: (B,) the spec's sequence total of
    the unmasked text (NaN where masked)."""

    rewards: np.ndarray
    components: dict[str, np.ndarray]
    masked: np.ndarray
    texts: list[str]
    totals: np.ndarray


class AuthorsMapping:
    """Per-token rewards of a batch as the authors' code gives them (see the module docstring)."""

    def __init__(self, program: Program, tokenizer: Any) -> None:
        self.program = program
        self.tokenizer = tokenizer
        self.names = [c.name for c in program.components]
        missing = {"lint", "syntax", "tests", "dfg"} - set(self.names)
        if missing:
            raise ValueError(f"spec {program.name!r}: mapping = \"authors\" needs the components lint, syntax, tests "
                             f"and dfg of specs/dense_ppo.reward (missing: {', '.join(sorted(missing))})")
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad = pad if pad is not None else getattr(tokenizer, "eos_token_id", None)
        self.max_chars = SyntaxParams().max_chars  # longer code is not compiled (the syntax component's bound)
        self.aligner = TokenAligner(tokenizer)
        self.seconds_scoring = 0.0

    # -- decoding as their code does -------------------------------------------------------------------------
    def _text(self, ids: Sequence[int], special: bool) -> str:
        """``decode`` with special tokens skipped (their ``decode(..., skip_special_tokens=True)``) or kept as
        text (their ``batch_decode`` calls, whose default keeps them)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=not special)

    def _rows(self, ids: Sequence[int]) -> list[int]:
        """``find_row_change_token``: the token index where each row starts."""
        n = len(ids)
        start = next((k for k, t in enumerate(ids) if t != self.pad), n)
        end = next((k for k in range(start, n) if ids[k] == self.pad), n)
        rows = [start]
        for idx in range(n):
            if start < idx <= end:
                c = self._text(ids[start:idx], special=True).count("\n")
                if c:
                    start = idx
                    rows.extend([idx] * c)
        return rows

    def lint(self, ids: Sequence[int], finding_rows: Sequence[tuple[int, int]]) -> np.ndarray:
        """``get_rewards`` then the ±1 map: −1 on the tokens of a flagged row range, +1 on every other token."""
        n = len(ids)
        rows = self._rows(ids)
        acc = np.zeros(n, dtype=np.float32)
        for first, last in finding_rows:
            a = min(first - 1, len(rows) - 1)
            s = rows[a]
            if last >= len(rows):
                acc[s:] -= 1.0
            else:
                acc[s:rows[last]] -= 1.0
        return np.where(acc == 0.0, 1.0, -1.0).astype(np.float32)

    def syntax(self, ids: Sequence[int]) -> np.ndarray:
        """The SynCode processor's fence state machine, and SynCode's check of every token inside a block."""
        n = len(ids)
        vals: list[float] = []
        blocks: list[tuple[int, int]] = []  # token ranges valued ±1, [first, stop)
        base, inside = 0, False
        for k in range(n):
            seen = self._text(ids[base:k], special=True)
            if not inside and OPEN in seen:
                base, inside = k, True
                vals[max(len(vals) - 2, 0):] = [2.0] * min(len(vals), 2)
                blocks.append((k, n))
            elif inside and CLOSE in seen:
                base, inside = k, False
                vals[-2:] = [2.0, 2.0]
                blocks[-1] = (blocks[-1][0], k)
            vals.append(1.0 if inside else 0.0)
        out = np.asarray(vals, dtype=np.float32)
        for first, stop in blocks:
            self._check_block(ids, first, stop, out)
        return out

    def _check_block(self, ids: Sequence[int], first: int, stop: int, out: np.ndarray) -> None:
        """SynCode's verdict on the tokens ``first..stop-1`` of one block (``first``: the token after the one that
        completed the marker). The first is judged against empty code (+1) and is never part of the code: their
        processor starts the code at ``input_ids.size(1) + 1``. Every later token ``k`` gets +1 while the code
        ``decode(ids[first + 1 : k + 1])`` is a viable prefix of a Python program (:func:`~rewardlang.runtime.code.
        validity.viable`), −1 from the first that is not; the end-of-sequence token gets +1 only when the code
        before it is a whole program (SynCode accepts EOS only where its grammar accepts the end), −1 otherwise.
        A token that ends inside a multi-byte character is judged by the whole characters before it."""
        body = [int(t) for t in ids[first + 1:stop]]
        if not body:
            return
        # each token's character end in the block's code (a token ending inside a character: the whole ones)
        text, ends = self.aligner.align(body)
        if len(text) > self.max_chars:  # not compiled: invalid from its start (the completion's own outcome)
            bad: int | None = 0
        else:
            try:
                bad = validity.shortest_nonviable_prefix(text, cuts=ends, deadline=time.monotonic() + DEFAULT_TIMEOUT)
            except validity.TooDeep:
                bad = 0
            except TimeoutError as exc:  # an overloaded machine (as the syntax component): masked, never a value
                raise _Masked(f"syntax: {exc} ({DEFAULT_TIMEOUT} s)") from exc
        eos = getattr(self.tokenizer, "eos_token_id", None)
        for j, k in enumerate(range(first + 1, stop)):
            if out[k] != 1.0:
                continue  # a fence token (2.0)
            if bad is not None and ends[j] >= bad:
                out[k] = -1.0
            elif body[j] == eos:
                out[k] = 1.0 if _whole_program(text[:ends[j]]) else -1.0

    def related(self, code: str, masked: Sequence[int], selected: Sequence[bool]) -> tuple[int, int]:
        """``get_related_indicies``: the token range that gets the tests' and the dataflow's value."""
        n = len(masked)
        first = next(k for k, s in enumerate(selected) if s)
        start, end = first, first
        found = False
        for i in range(first, n):
            if OPEN in _WS.sub("", self._text(masked[first:i], special=False)):
                start, found = max(i - 2, 0), True
                break
        if found:
            want = _WS.sub("", code)
            for i in range(start, n):
                if want in _WS.sub("", self._text(masked[start:i], special=False)):
                    end = i + 2 if self._text(masked[i:i + 2], special=False) == CLOSE else i
                    break
        return start, end

    # -- one row, then the batch -----------------------------------------------------------------------------
    def row_values(self, ids: Sequence[int], lint_spans: Sequence[Any], weights: Mapping[str, float]
                   ) -> dict[str, Any]:
        """The lint and syntax maps of one completion, the kept tokens and the masked text (``masked_text``)."""
        ids = [int(i) for i in ids]
        finding_rows = [_rows_of(sp) for sp in lint_spans]
        lint = self.lint(ids, [r for r in finding_rows if r is not None])
        syn = self.syntax(ids)
        score = float(weights["lint"]) * torch.from_numpy(lint) + float(weights["syntax"]) * torch.from_numpy(syn)
        selected = (score > 0.0).tolist()
        masked = [t if s else self.pad for t, s in zip(ids, selected)]
        return {"lint": lint.tolist(), "syntax": syn.tolist(), "score": score, "selected": selected,
                "masked": masked, "masked_text": self._text(masked, special=False)}

    def __call__(self, completion_ids: torch.Tensor, completion_mask: torch.Tensor, columns: Mapping[str, list],
                 step: int = 0) -> AuthorsBatch:
        """The batch's values (``completion_ids``/``completion_mask`` as :class:`DenseRewards
        <rewardlang.trainers.dense.DenseRewards>` takes them), as arrays."""
        B, T = completion_ids.shape
        ids_cpu = completion_ids.detach().cpu()
        mask_cpu = completion_mask.detach().cpu().bool()
        idxs = [torch.nonzero(mask_cpu[b], as_tuple=False).flatten() for b in range(B)]
        rows = [[int(t) for t in ids_cpu[b, idx].tolist()] for b, idx in enumerate(idxs)]
        texts = [self._text(r, special=False) for r in rows]
        given = {k: list(v) for k, v in columns.items() if k not in ("completion", "completions")}
        t0 = time.perf_counter()
        first = self.program.score(texts, step=step, **given)
        weights = {k: float(v) for k, v in first.weights.items()}
        per_row: list[dict[str, Any] | None] = []
        failed = np.zeros(B, dtype=bool)
        for b, r in enumerate(rows):
            try:
                per_row.append(self.row_values(r, first.spans["lint"][b] if "lint" in first.spans else [], weights)
                               if len(r) and not np.isnan(first.total[b]) else None)
            except _Masked:  # the syntax check ran out of time: an infrastructure failure, never a value
                per_row.append(None)
                failed[b] = True
        # the tests and the dataflow of the authors' code read the masked code: the spec scores that text again
        # (unchanged rows hit the sandbox's and the functions' caches)
        second = self.program.score([p["masked_text"] if p else "" for p in per_row], step=step, **given)
        self.seconds_scoring += time.perf_counter() - t0
        comps = {n: np.zeros((B, T), dtype=np.float32) for n in self.names}
        total = np.zeros((B, T), dtype=np.float32)
        masked_rows = np.isnan(first.total) | np.isnan(second.total) | failed
        for b, p in enumerate(per_row):
            if p is None or masked_rows[b]:
                continue
            n = len(rows[b])
            sel = torch.tensor(p["selected"], dtype=torch.bool)
            tests = torch.zeros(n, dtype=torch.bfloat16)
            dfg = torch.zeros(n, dtype=torch.bfloat16)
            if bool(sel.any()):
                code = extract_python_code(p["masked_text"])
                tv = float(second.components["tests"][b])
                dv = float(second.components["dfg"][b])
                # their two functions run the same search on the same tokens: one search serves both
                s, e = self.related(code, p["masked"], p["selected"]) if tv > 0 or dv > 0 else (0, 0)
                if tv > 0:
                    tests[s:e] = tv
                else:
                    tests = torch.where(sel, -0.3, tests)
                if dv > 0:
                    dfg[s:e] = dv
            extra = torch.zeros(n, dtype=torch.bfloat16)
            extra += weights["dfg"] * dfg
            extra += weights["tests"] * tests
            row_total = extra + p["score"]  # bfloat16 + float32: float32, as their score sum
            idx = idxs[b].numpy()
            total[b, idx] = row_total.numpy()
            comps["lint"][b, idx] = p["lint"]
            comps["syntax"][b, idx] = p["syntax"]
            comps["tests"][b, idx] = tests.float().numpy()
            comps["dfg"][b, idx] = dfg.float().numpy()
        return AuthorsBatch(rewards=total, components=comps, masked=np.asarray(masked_rows, dtype=bool), texts=texts,
                            totals=np.asarray(first.total, dtype=np.float64))


class _Masked(Exception):
    """A row whose value cannot be had for the machine's reasons (masked, as the spec masks)."""


def _rows_of(span: Any) -> tuple[int, int] | None:
    """The ruff rows ``FIRST-LAST`` of a ``ruff_rows`` span label."""
    label = span[3] if len(span) > 3 else ""
    m = re.match(r"(\d+)-(\d+) ", str(label))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _whole_program(code: str) -> bool:
    """True when ``code`` compiles as it is (not merely a viable prefix): where SynCode accepts the end."""
    try:
        return validity.is_valid(code)
    except validity.TooDeep:
        return False

