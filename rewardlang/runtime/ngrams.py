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

__all__ = ["Tokens", "tokenize", "distinct_words", "warm"]

#: the kernels' machine code is loaded in this process (after the first call, or warm())
READY = False

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


@nb.njit(cache=True, nogil=True)
def _same_word(buf: np.ndarray, ws: np.ndarray, we: np.ndarray, a: int, b: int) -> bool:
    la = we[a] - ws[a]
    if la != we[b] - ws[b]:
        return False
    for j in range(la):
        if buf[ws[a] + j] != buf[ws[b] + j]:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _unique_ratio(buf: np.ndarray, ws: np.ndarray, we: np.ndarray, wh: np.ndarray, m: int, n: int) -> float:
    """Distinct-n of the m words described by ws/we/wh: an open-addressing table of n-gram start indices."""
    total = m - n + 1
    if total <= 0:
        return 1.0
    size = 1
    while size < 2 * total:
        size *= 2
    mask = size - 1
    table = np.full(size, -1, dtype=np.int64)
    keys = np.empty(total, dtype=np.uint64)
    unique = 0
    for i in range(total):
        h = _FNV_OFFSET
        for j in range(n):
            h = (h ^ wh[i + j]) * _FNV_PRIME
            h ^= h >> np.uint64(31)
        keys[i] = h
        slot = np.int64(h & np.uint64(mask))
        while True:
            other = table[slot]
            if other < 0:
                table[slot] = i
                unique += 1
                break
            if keys[other] == h:
                same = True
                for j in range(n):
                    if not _same_word(buf, ws, we, i + j, other + j):
                        same = False
                        break
                if same:
                    break
            slot = (slot + 1) & mask
    return unique / total


@nb.njit(cache=True, parallel=True)
def _distinct_many(buf: np.ndarray, offsets: np.ndarray, ns: np.ndarray) -> np.ndarray:
    k = offsets.shape[0] - 1
    out = np.empty((k, ns.shape[0]), dtype=np.float64)
    for t in nb.prange(k):
        start, end = offsets[t], offsets[t + 1]
        cap = (end - start) // 2 + 1
        ws = np.empty(cap, dtype=np.int64)
        we = np.empty(cap, dtype=np.int64)
        wh = np.empty(cap, dtype=np.uint64)
        m = _scan(buf, start, end, ws, we, wh, 0)
        for q in range(ns.shape[0]):
            out[t, q] = _unique_ratio(buf, ws, we, wh, m, ns[q])
    return out


class Tokens:
    """A batch of texts as UTF-8 bytes; distinct-n for several n is computed in one pass and kept."""

    def __init__(self, texts: Sequence[str | None]) -> None:
        enc = [b"" if t is None else t.encode("utf-8", "surrogatepass") for t in texts]
        lens = np.fromiter((len(e) for e in enc), dtype=np.int64, count=len(enc))
        self.offsets = np.zeros(len(enc) + 1, dtype=np.int64)
        np.cumsum(lens, out=self.offsets[1:])
        buf = np.frombuffer(b"".join(enc), dtype=np.uint8)
        self.buf = buf if buf.size else np.zeros(1, dtype=np.uint8)
        self._done: dict[int, np.ndarray] = {}

    def distinct(self, n: int) -> np.ndarray:
        n = int(n)
        if n not in self._done:
            # the first request also computes n + 1 and n + 2 in the same pass (specs ask for 2, 3, 4 in turn)
            ns = np.array([n, n + 1, n + 2] if not self._done else [n], dtype=np.int64)
            out = _distinct_many(self.buf, self.offsets, ns)
            _loaded()
            for q, v in enumerate(ns):
                self._done[int(v)] = out[:, q].copy()
        return self._done[n]


def tokenize(texts: Sequence[str | None]) -> Tokens:
    return Tokens(texts)


def distinct_words(texts: Sequence[str | None], n: int) -> np.ndarray:
    """Distinct-n over the whitespace words of each text (1.0 for ``None``)."""
    return Tokens(texts).distinct(n)


def warm() -> None:
    """Load the kernels' machine code now (from Numba's on-disk cache, compiling on the very first run)."""
    _distinct_many(np.zeros(1, dtype=np.uint8), np.zeros(2, dtype=np.int64), np.array([2], dtype=np.int64))
    _loaded()


def _loaded() -> None:
    global READY
    READY = True
