"""The spec's per-token reward: completions in, one (B, T) tensor out (what PPO adds ``−β·KL`` to).

:class:`DenseRewards` decodes each completion as TRL does (``skip_special_tokens=True``), scores the batch with the
compiled spec, places each component's value on tokens as its ``tokens`` clause says (no clause: a sequence reward
on the last valid token, where verl and OpenRLHF put it; see :mod:`rewardlang.runtime.attribution`), and combines
the components with the spec's weights at ``step`` (schedules included)::

    R[b, t] = Σ_c  weight_c(step) · a_c[b, t]

Per-token attribution needs the reward to be that weighted sum (a spec without a ``reward`` statement; the checker
enforces it). A spec whose components are all sequence rewards may have any ``reward``: its total goes on the last
valid token. A row whose total is masked (an error without ``on_error``, an infrastructure failure) gets 0
everywhere and ``masked[b] = True``: the trainer must not train on it.

    >>> import torch, rewardlang
    >>> from rewardlang.trainers.model import build_tokenizer
    >>> prog = rewardlang.loads('''
    ... component short = 1 if len(completion) < 4 else 0
    ... component bad = count(completion, "x")
    ...     spans matches(completion, /x/, value=-1)
    ...     tokens spans
    ... bad.weight = 0.5
    ... ''')
    >>> tok = build_tokenizer(300)
    >>> ids = torch.tensor([tok.convert_tokens_to_ids(["a", "x", "b"])])
    >>> out = DenseRewards(prog, tok)(ids, torch.ones_like(ids), {})
    >>> out.texts, out.rewards.tolist()
    (['axb'], [[0.0, -0.5, 1.0]])
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rewardlang.runtime.attribution import place, to_tokens
from rewardlang.runtime.program import Program, chat_to_text
from rewardlang.trainers.align import TokenAligner
from rewardlang.trainers.authors import AuthorsMapping, uses_authors_mapping
from rewardlang.trainers.model import build_tokenizer, model_cache_dir, smollm2_gguf

__all__ = ["DenseBatch", "DenseRewards", "load_tokenizer", "token_table"]


@dataclass
class DenseBatch:
    """One batch's per-token rewards.

    ``rewards``: (B, T) float32, the spec's per-token reward, components × weights × schedules combined; KL not
    included (the trainer subtracts β·KL itself); 0 where ``completion_mask`` is 0 and on masked rows.
    ``components``: (B, T) float32 per component, unweighted (for metrics). ``masked``: (B,) bool, rows whose
    reward is masked (never trained on). ``texts``: the decoded completions the spec scored. ``totals``: (B,) the
    spec's sequence total per row (NaN where masked), as ``rewardlang score`` reports it.
    """

    rewards: torch.Tensor
    components: dict[str, torch.Tensor]
    masked: torch.Tensor
    texts: list[str]
    totals: np.ndarray | None = None
    #: (B,) sequence value per component, NaN where masked (the step's reward metrics read them)
    scores: dict[str, np.ndarray] | None = None


class DenseRewards:
    """The spec → (B, T) reward tensor (see the module docstring). One instance per run: it keeps the aligner
    (whose ``fallbacks`` count is the metric ``align/fallbacks``) and the time spent (``seconds_scoring``,
    ``seconds_aligning``)."""

    def __init__(self, program: Program, tokenizer: Any, *, aligner: TokenAligner | None = None) -> None:
        self.program = program
        self.tokenizer = tokenizer
        self.aligner = aligner or TokenAligner(tokenizer)
        self.names = [c.name for c in program.components]
        self.tokens = {c.name: program.spec["components"][i].get("tokens")
                       for i, c in enumerate(program.components)}
        self.dense = any(t is not None for t in self.tokens.values())
        if self.dense and not program.spec["reward_is_weighted_sum"]:
            raise ValueError(f"spec {program.name!r}: per-token attribution needs the reward to be the weighted sum "
                             "of the components; drop the `reward` statement and set weights instead")
        self.seconds_scoring = 0.0
        self.seconds_aligning = 0.0
        # mapping = "authors" (specs/dense_ppo.reward): the authors' code places the values, token by token
        self.authors = AuthorsMapping(program, tokenizer) if uses_authors_mapping(program) else None

    @property
    def fallbacks(self) -> int:
        """Aligner fallbacks so far (metric ``align/fallbacks``)."""
        return self.aligner.fallbacks

    def __call__(self, completion_ids: torch.Tensor, completion_mask: torch.Tensor, columns: Mapping[str, list],
                 step: int = 0) -> DenseBatch:
        """Per-token rewards of a batch: ``completion_ids`` (B, T) right-padded, ``completion_mask`` (B, T) 1 on
        the completion's tokens, ``columns`` the other inputs of the spec by input name (prompt, tests, ...)."""
        if self.authors is not None:
            got = self.authors(completion_ids, completion_mask, columns, step)
            self.seconds_scoring += self.authors.seconds_scoring
            self.authors.seconds_scoring = 0.0
            dev = completion_ids.device
            return DenseBatch(
                rewards=torch.as_tensor(got.rewards, dtype=torch.float32, device=dev),
                components={n: torch.as_tensor(v, dtype=torch.float32, device=dev) for n, v in got.components.items()},
                masked=torch.as_tensor(got.masked, dtype=torch.bool, device=dev), texts=got.texts, totals=got.totals)
        B, T = completion_ids.shape
        ids_cpu = completion_ids.detach().cpu()
        mask_cpu = completion_mask.detach().cpu().bool()
        t0 = time.perf_counter()
        rows = []
        for b in range(B):
            idx = torch.nonzero(mask_cpu[b], as_tuple=False).flatten()
            text, ends = self.aligner.align(ids_cpu[b, idx].tolist())
            rows.append((idx.numpy(), text, ends))
        t1 = time.perf_counter()
        texts = [r[1] for r in rows]
        given = {k: list(v) for k, v in columns.items() if k not in ("completion", "completions")}
        result = self.program.score(texts, step=step, **given)
        t2 = time.perf_counter()
        weights = result.weights
        comps = {n: np.zeros((B, T), dtype=np.float64) for n in self.names}
        total = np.zeros((B, T), dtype=np.float64)
        masked = np.isnan(result.total)
        for b, (idx, text, ends) in enumerate(rows):
            if masked[b] or len(idx) == 0:
                continue
            if not self.dense:  # any reward expression: its total on the last token
                total[b, idx[-1]] = result.total[b]
            for name in self.names:
                if result.masked[name][b]:
                    continue  # a component outside the reward may be masked alone: it contributes nothing
                value = float(result.components[name][b])
                spans = result.spans.get(name, [[]] * B)[b] if name in result.spans else None
                per_token = to_tokens(place(self.tokens[name], value, spans, text), ends)
                comps[name][b, idx] = per_token
                if self.dense:
                    w = float(weights[name])
                    if w != 0.0 and not math.isnan(w):
                        total[b, idx] += w * per_token
        t3 = time.perf_counter()
        self.seconds_scoring += t2 - t1
        self.seconds_aligning += (t1 - t0) + (t3 - t2)
        device = completion_ids.device
        return DenseBatch(
            rewards=torch.as_tensor(total, dtype=torch.float32, device=device),
            components={n: torch.as_tensor(v, dtype=torch.float32, device=device) for n, v in comps.items()},
            masked=torch.as_tensor(masked, dtype=torch.bool, device=device),
            texts=texts, totals=np.asarray(result.total, dtype=np.float64),
            scores={n: np.asarray(v, dtype=np.float64) for n, v in result.components.items()})


def load_tokenizer(path: str | None) -> Any:
    """A tokenizer for ``rewardlang explain --tokens``: a ``tokenizer.json`` file, a local model directory (or
    Hugging Face cache name, offline), ``smollm2`` (the default model of ``train`` and ``eval``: its converted
    cache's tokenizer, else the one in the package's GGUF file), or None / ``tiny`` for the tiny default model's
    byte-level BPE."""
    if path is None or path == "tiny":
        return build_tokenizer()
    if path == "smollm2" and not os.path.exists(path):
        from transformers import AutoTokenizer

        cache = model_cache_dir()
        if os.path.exists(os.path.join(cache, "tokenizer.json")):
            return AutoTokenizer.from_pretrained(cache, local_files_only=True)
        folder, name = os.path.split(smollm2_gguf())
        return AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)

    if os.path.isfile(path):
        from tokenizers import Tokenizer

        return Tokenizer.from_file(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def token_table(program: Program, row: Mapping[str, Any], tokenizer: Any, step: int = 0
                ) -> tuple[list[str], list[str], dict[str, list[float]], list[float]]:
    """One data row's completion as tokens: ``(pieces, component names, per-component values, reward)`` per
    token, the values :class:`DenseRewards` gives a trainer (used by ``rewardlang explain --tokens``).

    >>> import rewardlang
    >>> from rewardlang.trainers.model import build_tokenizer
    >>> prog = rewardlang.loads('component c = 1\\n    spans matches(completion, /b/, value=-1)\\n    tokens spans')
    >>> pieces, names, values, total = token_table(prog, {"completion": "ab"}, build_tokenizer(300))
    >>> pieces, values["c"], total
    (['a', 'b'], [0.0, -1.0], [0.0, -1.0])
    """
    text = chat_to_text(row.get("completion", ""), "assistant")
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):  # a bare tokenizer.json
        ids = tokenizer.encode(text, add_special_tokens=False).ids
    else:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    aligner = TokenAligner(tokenizer)
    pieces = [tokenizer.decode([i], skip_special_tokens=False) for i in ids]
    out = DenseRewards(program, tokenizer, aligner=aligner)(
        torch.tensor([ids], dtype=torch.long), torch.ones(1, len(ids), dtype=torch.long),
        {k: [v] for k, v in row.items() if k != "completion"}, step=step)
    values = {n: out.components[n][0].tolist() for n in out.components}
    return pieces, list(out.components), values, out.rewards[0].tolist()
