"""Numba kernels for n-gram statistics over whitespace words, straight from UTF-8 bytes.

``distinct_words(texts, n)`` equals ``[distinct_py(t.split(), n) for t in texts]`` exactly (property-tested):
words are split on exactly the characters Python's ``str.split()`` splits on, n-gram identity is decided by exact
byte comparison (64-bit hashes only sort; every pair of equal hashes is verified), and the ratio is the same float
division. Texts are processed in parallel on all cores (``prange``). A :class:`Tokens` value holds one batch's
tokenization so several n share it. Imported lazily: the first call compiles (cached on disk afterwards).
"""

from __future__ import annotations

from typing import Sequence

import numba as nb
import numpy as np

__all__ = ["Tokens", "tokenize", "distinct_words"]

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@nb.njit(cache=True, nogil=True)
def _ws_multibyte(buf: np.ndarray, i: int, end: int) -> int:
    """Length of a multi-byte whitespace character at ``i`` (0 if none): U+0085, U+00A0, U+1680, U+2000-U+200A,
    U+2028, U+2029, U+202F, U+205F, U+3000 — with the ASCII ones, exactly what str.isspace() accepts."""
    b = np.int64(buf[i])
    if b == 0xC2 and i + 1 < end:
        c = np.int64(buf[i + 1])
        if c == 0x85 or c == 0xA0:
            return 2
    elif b == 0xE1 and i + 2 < end:
        if np.int64(buf[i + 1]) == 0x9A and np.int64(buf[i + 2]) == 0x80:
            return 3
    elif b == 0xE2 and i + 2 < end:
        c = np.int64(buf[i + 1])
        d = np.int64(buf[i + 2])
        if c == 0x80 and ((0x80 <= d <= 0x8A) or d == 0xA8 or d == 0xA9 or d == 0xAF):
            return 3
        if c == 0x81 and d == 0x9F:
            return 3
    elif b == 0xE3 and i + 2 < end:
        if np.int64(buf[i + 1]) == 0x80 and np.int64(buf[i + 2]) == 0x80:
            return 3
    return 0


@nb.njit(cache=True, nogil=True)
def _scan(buf: np.ndarray, start: int, end: int, ws: np.ndarray, we: np.ndarray, wh: np.ndarray, k: int) -> int:
    """Words of buf[start:end] written from index k (if ws is large enough); returns the word count.

    The ASCII test is written out inline on int64 values: a helper call per byte costs ~30x more.
    """
    m = 0
    i = start
    write = ws.shape[0] > 0
    while i < end:
        b = np.int64(buf[i])
        if b == 32 or (9 <= b <= 13) or (28 <= b <= 31):
            i += 1
            continue
        if b >= 0xC2:
            step = _ws_multibyte(buf, i, end)
            if step > 0:
                i += step
                continue
        s = i
        h = _FNV_OFFSET
        while i < end:
            b = np.int64(buf[i])
            if b == 32 or (9 <= b <= 13) or (28 <= b <= 31):
                break
            if b >= 0xC2 and _ws_multibyte(buf, i, end) > 0:
                break
            h = (h ^ np.uint64(b)) * _FNV_PRIME
            i += 1
        if write:
            ws[k + m] = s
            we[k + m] = i
            wh[k + m] = h
        m += 1
    return m


@nb.njit(cache=True, parallel=True)
def _tokenize(buf: np.ndarray, offsets: np.ndarray) -> tuple:
    k = offsets.shape[0] - 1
    counts = np.zeros(k, dtype=np.int64)
    empty_i = np.empty(0, dtype=np.int64)
    empty_h = np.empty(0, dtype=np.uint64)
    for t in nb.prange(k):
        counts[t] = _scan(buf, offsets[t], offsets[t + 1], empty_i, empty_i, empty_h, 0)
    starts = np.zeros(k + 1, dtype=np.int64)
    for t in range(k):
        starts[t + 1] = starts[t] + counts[t]
    total = starts[k]
    ws = np.empty(total, dtype=np.int64)
    we = np.empty(total, dtype=np.int64)
    wh = np.empty(total, dtype=np.uint64)
    for t in nb.prange(k):
        _scan(buf, offsets[t], offsets[t + 1], ws, we, wh, starts[t])
    return ws, we, wh, starts


@nb.njit(cache=True, nogil=True, inline="always")
def _same_word(buf: np.ndarray, ws: np.ndarray, we: np.ndarray, a: int, b: int) -> bool:
    la = we[a] - ws[a]
    if la != we[b] - ws[b]:
        return False
    for j in range(la):
        if buf[ws[a] + j] != buf[ws[b] + j]:
            return False
    return True


@nb.njit(cache=True, parallel=True)
def _distinct(buf: np.ndarray, ws: np.ndarray, we: np.ndarray, wh: np.ndarray, starts: np.ndarray,
              n: int) -> np.ndarray:
    k = starts.shape[0] - 1
    out = np.empty(k, dtype=np.float64)
    for t in nb.prange(k):
        lo = starts[t]
        total = starts[t + 1] - lo - n + 1
        if total <= 0:
            out[t] = 1.0
            continue
        g = np.empty(total, dtype=np.uint64)
        for i in range(total):
            h = _FNV_OFFSET
            for j in range(n):
                h = (h ^ wh[lo + i + j]) * _FNV_PRIME
                h ^= h >> np.uint64(31)
            g[i] = h
        order = np.argsort(g)
        reps = np.empty(total, dtype=np.int64)
        unique = 0
        r = 0
        while r < total:
            s = r
            while r < total and g[order[r]] == g[order[s]]:
                r += 1
            first = unique
            for q in range(s, r):
                a = lo + order[q]
                found = False
                for c in range(first, unique):
                    b = lo + reps[c]
                    same = True
                    for j in range(n):
                        if not _same_word(buf, ws, we, a + j, b + j):
                            same = False
                            break
                    if same:
                        found = True
                        break
                if not found:
                    reps[unique] = order[q]
                    unique += 1
        out[t] = unique / total
    return out


class Tokens:
    """The whitespace words of a batch of texts (byte ranges and hashes), shared by several n."""

    def __init__(self, texts: Sequence[str | None]) -> None:
        enc = [b"" if t is None else t.encode("utf-8", "surrogatepass") for t in texts]
        lens = np.fromiter((len(e) for e in enc), dtype=np.int64, count=len(enc))
        offsets = np.zeros(len(enc) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        buf = np.frombuffer(b"".join(enc), dtype=np.uint8)
        self.buf = buf if buf.size else np.zeros(1, dtype=np.uint8)
        self.ws, self.we, self.wh, self.starts = _tokenize(self.buf, offsets)

    def distinct(self, n: int) -> np.ndarray:
        return _distinct(self.buf, self.ws, self.we, self.wh, self.starts, int(n))


def tokenize(texts: Sequence[str | None]) -> Tokens:
    return Tokens(texts)


def distinct_words(texts: Sequence[str | None], n: int) -> np.ndarray:
    """Distinct-n over the whitespace words of each text (1.0 for ``None``)."""
    return Tokens(texts).distinct(n)
