"""Numba kernels for n-gram statistics over whitespace words, straight from UTF-8 bytes.

``distinct_words(texts, n)`` equals ``[distinct_py(t.split(), n) for t in texts]`` exactly (the property tests
check it): words are split on exactly the characters Python's ``str.split()`` splits on, word and n-gram
identity are decided by exact byte comparison (hashes only sort; every equal hash is verified), and the ratio
is the same float division. Texts are processed in parallel on all cores (``prange``). Imported lazily: the
first call compiles (cached on disk afterwards).
"""

from __future__ import annotations

from typing import Sequence

import numba as nb
import numpy as np

__all__ = ["distinct_words"]

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@nb.njit(cache=True, nogil=True, inline="always")
def _ws_len(buf: np.ndarray, i: int, end: int) -> int:
    """Length in bytes of the whitespace character at ``i`` (0 if it is not whitespace), per str.isspace()."""
    b = buf[i]
    if b == 0x20 or (0x09 <= b <= 0x0D) or (0x1C <= b <= 0x1F):
        return 1
    if b == 0xC2 and i + 1 < end:
        c = buf[i + 1]
        if c == 0x85 or c == 0xA0:
            return 2
    elif b == 0xE1 and i + 2 < end:
        if buf[i + 1] == 0x9A and buf[i + 2] == 0x80:
            return 3
    elif b == 0xE2 and i + 2 < end:
        c = buf[i + 1]
        d = buf[i + 2]
        if c == 0x80 and ((0x80 <= d <= 0x8A) or d == 0xA8 or d == 0xA9 or d == 0xAF):
            return 3
        if c == 0x81 and d == 0x9F:
            return 3
    elif b == 0xE3 and i + 2 < end:
        if buf[i + 1] == 0x80 and buf[i + 2] == 0x80:
            return 3
    return 0


@nb.njit(cache=True, nogil=True)
def _word_ids(buf: np.ndarray, start: int, end: int) -> np.ndarray:
    """Exact ids of the whitespace words of buf[start:end] (equal words ⇔ equal ids)."""
    cap = (end - start) // 2 + 1
    ws = np.empty(cap, dtype=np.int64)
    we = np.empty(cap, dtype=np.int64)
    m = 0
    i = start
    while i < end:
        k = _ws_len(buf, i, end)
        if k > 0:
            i += k
            continue
        ws[m] = i
        while i < end and _ws_len(buf, i, end) == 0:
            i += 1
        we[m] = i
        m += 1
    hashes = np.empty(m, dtype=np.uint64)
    for w in range(m):
        h = _FNV_OFFSET
        for j in range(ws[w], we[w]):
            h = (h ^ np.uint64(buf[j])) * _FNV_PRIME
        hashes[w] = h
    order = np.argsort(hashes, kind="mergesort")
    ids = np.empty(m, dtype=np.int64)
    reps = np.empty(m, dtype=np.int64)   # representative word of each id
    n_ids = 0
    r = 0
    while r < m:
        s = r
        while r < m and hashes[order[r]] == hashes[order[s]]:
            r += 1
        first_id = n_ids
        for q in range(s, r):
            w = order[q]
            found = -1
            for cand in range(first_id, n_ids):
                rw = reps[cand]
                if we[rw] - ws[rw] == we[w] - ws[w]:
                    same = True
                    for j in range(we[w] - ws[w]):
                        if buf[ws[rw] + j] != buf[ws[w] + j]:
                            same = False
                            break
                    if same:
                        found = cand
                        break
            if found < 0:
                reps[n_ids] = w
                found = n_ids
                n_ids += 1
            ids[w] = found
    return ids


@nb.njit(cache=True, nogil=True)
def _distinct_ids(ids: np.ndarray, n: int) -> float:
    m = ids.shape[0]
    total = m - n + 1
    if total <= 0:
        return 1.0
    hashes = np.empty(total, dtype=np.uint64)
    for g in range(total):
        h = _FNV_OFFSET
        for j in range(n):
            h = (h ^ np.uint64(ids[g + j])) * _FNV_PRIME
            h ^= h >> np.uint64(29)
        hashes[g] = h
    order = np.argsort(hashes, kind="mergesort")
    unique = 0
    r = 0
    reps = np.empty(total, dtype=np.int64)
    while r < total:
        s = r
        while r < total and hashes[order[r]] == hashes[order[s]]:
            r += 1
        first = unique
        for q in range(s, r):
            g = order[q]
            found = False
            for c in range(first, unique):
                rg = reps[c]
                same = True
                for j in range(n):
                    if ids[rg + j] != ids[g + j]:
                        same = False
                        break
                if same:
                    found = True
                    break
            if not found:
                reps[unique] = g
                unique += 1
    return unique / total


@nb.njit(cache=True, parallel=True)
def _distinct_batch(buf: np.ndarray, offsets: np.ndarray, n: int) -> np.ndarray:
    k = offsets.shape[0] - 1
    out = np.empty(k, dtype=np.float64)
    for t in nb.prange(k):
        out[t] = _distinct_ids(_word_ids(buf, offsets[t], offsets[t + 1]), n)
    return out


def distinct_words(texts: Sequence[str | None], n: int) -> np.ndarray:
    """Distinct-n over the whitespace words of each text (1.0 for ``None``)."""
    enc = [b"" if t is None else t.encode("utf-8", "surrogatepass") for t in texts]
    lens = np.fromiter((len(e) for e in enc), dtype=np.int64, count=len(enc))
    offsets = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    buf = np.frombuffer(b"".join(enc), dtype=np.uint8)
    if buf.size == 0:
        buf = np.zeros(1, dtype=np.uint8)
    return _distinct_batch(buf, offsets, int(n))
