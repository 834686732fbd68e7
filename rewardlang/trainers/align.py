"""Token alignment: where each generated token ends in the text the reward saw, and character spans → tokens.

A reward spec scores the decoded completion, ``tokenizer.decode(ids, skip_special_tokens=True)`` (what TRL's
``batch_decode`` gives); a trainer needs one value per *token*. :class:`TokenAligner` gives every token its
character end in that text in O(T), with the tokenizers library's streaming decoder (``DecodeStream``), and checks
that the streamed pieces join to exactly the decoded text. When they do not (a tokenizer whose whole-text decode
differs from its piecewise one, e.g. some clean-up rule), it falls back to decoding growing prefixes (O(T²), exact
by construction) and counts the event in ``fallbacks`` (the trainers log it as ``align/fallbacks``). A text with a
U+FFFD (invalid UTF-8 from the model) also takes the fallback: the stream and prefix decoding place undecodable
bytes differently, and prefix decoding is the reference.

Conventions, shared by GRPO's token advantages and the dense (B, T) rewards of PPO:

- a token covers the characters ``[end of the previous token, its own end)``; ends never decrease;
- a special token (EOS, a chat marker) has width 0, as has a byte piece that does not complete a character: the
  character goes to the token that completes it; a token holding whole characters and then the first bytes of
  another keeps its whole characters (as prefix decoding gives them; the stream alone would hold them back);
- a token gets a span's value when it overlaps the span (``start < span_end`` and ``end > span_start``, width > 0);
  overlapping spans add;
- a sequence reward goes on the last valid token (:meth:`TokenAligner.last_token`), as verl and OpenRLHF place it.

    >>> from rewardlang.trainers.model import build_tokenizer
    >>> tok = build_tokenizer(300)
    >>> aligner = TokenAligner(tok)
    >>> ids = tok("ab cd")["input_ids"] + [tok.eos_token_id]
    >>> ends = aligner.char_ends(ids)
    >>> ends[-1], ends[-1] == ends[-2]          # 5 characters; the EOS adds none
    (5, True)
    >>> aligner.spans_to_tokens([(3, 5, -1.0)], ends, default=1.0).tolist()[-2:]
    [-1.0, 0.0]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["TokenAligner", "prefix_char_ends"]


def _backend(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` behind a transformers fast tokenizer (or the object itself), else None."""
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    return backend if isinstance(backend, Tokenizer) else None


def prefix_char_ends(tokenizer: Any, ids: Sequence[int], text: str | None = None) -> list[int]:
    """Character ends by decoding growing prefixes: the O(T²) reference (and the fallback of :class:`TokenAligner`).

    A prefix's end is how much of it agrees with the whole decoded ``text``: an incomplete multi-byte character
    (decoded as U+FFFD) does not count until the token completing it, while a real U+FFFD in the text does.

    >>> from rewardlang.trainers.model import build_tokenizer
    >>> tok = build_tokenizer(300)
    >>> prefix_char_ends(tok, tok("ab")["input_ids"] + [tok.eos_token_id])[-1]
    2
    """
    ids = list(ids)
    if text is None:
        text = tokenizer.decode(ids, skip_special_tokens=True)
    ends, prev = [], 0
    for i in range(len(ids)):
        piece = tokenizer.decode(ids[: i + 1], skip_special_tokens=True)
        agree = len(os.path.commonprefix([piece, text]))
        prev = max(prev, agree)
        ends.append(prev)
    if ends:
        ends[-1] = len(text)  # the whole sequence decodes to the text itself
    return ends


class TokenAligner:
    """Exact character ends of generated tokens in the text the reward saw
    (``tokenizer.decode(ids, skip_special_tokens=True)``), O(T) with tokenizers' ``DecodeStream``, prefix-decoding
    fallback (counted in ``fallbacks``).

    ``tokenizer`` is a transformers tokenizer or a ``tokenizers.Tokenizer``. A slow (pure Python) tokenizer has no
    streaming decoder: it always decodes prefixes (``streaming`` is False; that is not counted as a fallback).

    >>> from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    >>> t = Tokenizer(models.BPE()); t.pre_tokenizer = pre_tokenizers.ByteLevel(); t.decoder = decoders.ByteLevel()
    >>> ids = [t.add_tokens([c]) and t.token_to_id(c) for c in "hi"]
    >>> TokenAligner(t).char_ends(ids)
    [1, 2]
    """

    fallbacks: int

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.backend = _backend(tokenizer)
        self.streaming = self.backend is not None
        self.fallbacks = 0

    def decode(self, ids: Sequence[int]) -> str:
        """The completion text exactly as TRL (``batch_decode(..., skip_special_tokens=True)``) and the spec see it."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def align(self, ids: Sequence[int]) -> tuple[str, list[int]]:
        """``(decode(ids), char_ends(ids))`` with one whole-text decode."""
        from tokenizers.decoders import DecodeStream

        ids = [int(i) for i in ids]
        text = self.decode(ids)
        if not self.streaming:
            return text, prefix_char_ends(self.tokenizer, ids, text)
        if "\ufffd" in text:
            # Invalid UTF-8 (or a real U+FFFD): the stream holds undecodable bytes back and emits the replacement
            # character with a later token, prefix decoding puts it on the byte's own token. Rare; take the latter.
            self.fallbacks += 1
            return text, prefix_char_ends(self.tokenizer, ids, text)
        stream = DecodeStream(skip_special_tokens=True)
        ends, pieces, n = [], [], 0
        last = -1  # the last token whose step emitted text
        for k, i in enumerate(ids):
            chunk = stream.step(self.backend, i)
            if chunk:  # None: a byte piece waiting for the rest of its character, or a skipped special token
                if k > last + 1:
                    self._split_held(ids, last, k, n, len(chunk), ends)
                pieces.append(chunk)
                n += len(chunk)
                last = k
            ends.append(n)
        if "".join(pieces) != text:
            self.fallbacks += 1
            return text, prefix_char_ends(self.tokenizer, ids, text)
        return text, ends

    def _split_held(self, ids: list[int], last: int, k: int, n: int, width: int, ends: list[int]) -> None:
        """Give the tokens the stream held back (``last + 1 .. k - 1``, then ``k`` emitted ``width`` characters)
        the complete characters each of them holds.

        The stream emits nothing for a token whose text ends with the first bytes of a multi-byte character, even
        when whole characters come before them (``"a"`` + the first byte of ``"é"``): those characters belong to
        that token, as in the prefix-decoding reference. Each held token's end is how far the decode of a short
        window ending at it agrees with the window's decode through ``k`` (both start at token ``last``, a clean
        boundary, so a tokenizer's leading-space rule treats them alike); a few decodes per held run."""
        w = max(last, 0)
        base = len(self.decode(ids[w:last + 1])) if last >= 0 else 0
        full = self.decode(ids[w:k + 1])
        prev = n
        for h in range(last + 1, k):
            piece = self.decode(ids[w:h + 1])
            agree = len(os.path.commonprefix([piece, full]))
            end = min(max(n + agree - base, prev), n + width)
            ends[h] = end
            prev = end

    def char_ends(self, ids: Sequence[int]) -> list[int]:
        """For each token, the length of the decoded text up to and including it (``len == len(ids)``, never
        decreasing, the last equal to ``len(decode(ids))``; special tokens add 0)."""
        return self.align(ids)[1]

    @staticmethod
    def spans_to_tokens(values_per_char_range: Iterable[Sequence[Any]], ends: Sequence[int], *,
                        default: float | None = None) -> np.ndarray:
        """Per-token values (float64, ``len(ends)``) from ``(start, end, value, ...)`` character ranges.

        A token gets each range's value when it overlaps the range (overlapping ranges add); a range with a
        negative start (not a piece of the completion) is skipped. With ``default``, every token of non-zero width
        that no range overlaps gets ``default`` (the dense-reward paper's lint map: −1 on flagged lines, +1 on
        every other token). O(T + S·log T).

        >>> TokenAligner.spans_to_tokens([(4, 6, -2.0), (9, 10, 0.5)], [3, 5, 9, 10]).tolist()
        [0.0, -2.0, -2.0, 0.5]
        >>> TokenAligner.spans_to_tokens([(4, 6, -1.0)], [3, 5, 5, 9], default=1.0).tolist()
        [1.0, -1.0, 0.0, -1.0]
        """
        from rewardlang.runtime.attribution import Placement, to_tokens

        ranges = tuple((int(sp[0]), int(sp[1]), float(sp[2])) for sp in values_per_char_range if int(sp[0]) >= 0)
        return to_tokens(Placement(ranges, None if default is None else float(default)), ends)

    @staticmethod
    def last_token(length: int) -> int:
        """Index where a sequence reward goes: the last valid token of a completion of ``length`` tokens (verl's
        ``valid_len - 1``, OpenRLHF's last action token); -1 for an empty completion (nowhere).

        >>> TokenAligner.last_token(7), TokenAligner.last_token(0)
        (6, -1)
        """
        return int(length) - 1
