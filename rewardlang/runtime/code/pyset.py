"""``list(set(strings))`` as CPython 3.11 orders it with ``PYTHONHASHSEED=0``, in any process.

CodeBLEU's dataflow extraction orders merged variable names with ``list(set(...))``. The order of a set of
strings follows their hashes, and CPython randomizes string hashes per process, so the reference's dataflow
match changes from one process to the next (worker processes started by spawn each draw their own seed). To be
both deterministic and equal to a well-defined run of the reference, rewardlang reproduces the order the
reference gets under ``PYTHONHASHSEED=0``: string hashes are SipHash-1-3 with a zero key over the string's
PEP 393 storage, and the set is CPython's open-addressing table (8 slots to start, 9 linear probes, perturbed
probing, growth to 4× the entries when 3/5 full), iterated slot by slot. The tests compare this with a real
``PYTHONHASHSEED=0`` interpreter.

Example::

    >>> str_hash0("a")   # hash("a") under PYTHONHASHSEED=0
    4644417185603328019
    >>> sorted(set_order0(["x", "y", "x", "z"]))
    ['x', 'y', 'z']
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

__all__ = ["set_order0", "str_hash0"]

_MASK64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK64


def _siphash13_zero_key(data: bytes) -> int:
    """CPython's ``siphash13`` (Python/pyhash.c) with k0 = k1 = 0."""
    v0 = 0x736F6D6570736575
    v1 = 0x646F72616E646F6D
    v2 = 0x6C7967656E657261
    v3 = 0x7465646279746573
    n = len(data)
    b = (n << 56) & _MASK64

    def rnd(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
        # HALF_ROUND(v0, v1, v2, v3, 13, 16)
        v0 = (v0 + v1) & _MASK64
        v2 = (v2 + v3) & _MASK64
        v1 = _rotl(v1, 13) ^ v0
        v3 = _rotl(v3, 16) ^ v2
        v0 = _rotl(v0, 32)
        # HALF_ROUND(v2, v1, v0, v3, 17, 21)
        v2 = (v2 + v1) & _MASK64
        v0 = (v0 + v3) & _MASK64
        v1 = _rotl(v1, 17) ^ v2
        v3 = _rotl(v3, 21) ^ v0
        v2 = _rotl(v2, 32)
        return v0, v1, v2, v3

    end = n - n % 8
    for off in range(0, end, 8):
        mi = int.from_bytes(data[off:off + 8], "little")
        v3 ^= mi
        v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
        v0 ^= mi
    b |= int.from_bytes(data[end:], "little")
    v3 ^= b
    v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= 0xFF
    for _ in range(3):
        v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
    return (v0 ^ v1) ^ (v2 ^ v3)


@lru_cache(maxsize=65536)
def str_hash0(s: str) -> int:
    """``hash(s)`` in a CPython 3.11 started with ``PYTHONHASHSEED=0`` (64-bit build)."""
    if not s:
        return 0
    top = max(map(ord, s))
    # PEP 393: the string is stored with 1, 2 or 4 bytes per character, little-endian on x86-64/arm64
    if top < 0x100:
        data = s.encode("latin-1")
    elif top < 0x10000:
        data = s.encode("utf-16-le", "surrogatepass")
    else:
        data = s.encode("utf-32-le", "surrogatepass")
    x = _siphash13_zero_key(data)
    if x >= 1 << 63:
        x -= 1 << 64
    return -2 if x == -1 else x


_LINEAR_PROBES = 9
_PERTURB_SHIFT = 5


def _insert_clean(table: list[tuple[str, int] | None], mask: int, key: str, h: int) -> None:
    perturb = h & _MASK64
    i = perturb & mask
    while True:
        if table[i] is None:
            table[i] = (key, h)
            return
        if i + _LINEAR_PROBES <= mask:
            for j in range(i + 1, i + _LINEAR_PROBES + 1):
                if table[j] is None:
                    table[j] = (key, h)
                    return
        perturb >>= _PERTURB_SHIFT
        i = (i * 5 + 1 + perturb) & mask


def set_order0(items: Sequence[str]) -> list[str]:
    """``list(set(items))`` as ordered by CPython 3.11 with ``PYTHONHASHSEED=0`` (Objects/setobject.c)."""
    mask = 7
    table: list[tuple[str, int] | None] = [None] * 8
    fill = used = 0
    for key in items:
        h = str_hash0(key)
        perturb = h & _MASK64
        i = perturb & mask
        placed = False
        while not placed:
            probes = _LINEAR_PROBES if i + _LINEAR_PROBES <= mask else 0
            j = i
            for _ in range(probes + 1):
                e = table[j]
                if e is None:
                    table[j] = (key, h)
                    fill += 1
                    used += 1
                    if fill * 5 >= mask * 3:
                        minused = used * 2 if used > 50000 else used * 4
                        size = 8
                        while size <= minused:
                            size <<= 1
                        old = table
                        mask = size - 1
                        table = [None] * size
                        for entry in old:
                            if entry is not None:
                                _insert_clean(table, mask, entry[0], entry[1])
                    placed = True
                    break
                if e[1] == h and e[0] == key:
                    placed = True
                    break
                j += 1
            if not placed:
                perturb >>= _PERTURB_SHIFT
                i = (i * 5 + 1 + perturb) & mask
    return [e[0] for e in table if e is not None]
