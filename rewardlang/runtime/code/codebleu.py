"""CodeBLEU, computed exactly as the ``codebleu`` 0.7.0 package does it, but fast and per sample.

CodeBLEU (Ren et al., 2020) combines four similarities of a candidate program to a reference:

* **ngram** — BLEU-4 over whitespace tokens: clipped n-gram precisions p₁…p₄, a zero count smoothed to 0.1,
  ``BP · exp(Σ ¼ log pₙ)``, BP = 1 if the candidate is longer than the reference else ``exp(1 − r/c)``;
  0 when no unigram matches.
* **weighted_ngram** — the same with clipped n-gram *recalls* against the reference, where unigrams are
  weighted 1 for Python keywords and 0.2 for other tokens. As in the package, its brevity penalty takes the
  reference length to be 2 (a package bug, kept for parity): it is 1 for candidates of 3 tokens or more.
* **syntax** — the share of the reference's syntax subtrees (root + every node with children, duplicates
  counted) whose tree-sitter S-expression occurs anywhere in the candidate's tree.
* **dataflow** — the share of the reference's normalized dataflow edges found in the candidate (each
  candidate edge used once).

Both programs are ``strip()``-ed first; the syntax and dataflow parts then work on the text with comments and
docstrings removed (:mod:`~rewardlang.runtime.code.strip`). Every part equals the package's to within float
rounding (the tests check 1e-9 on a 1,312-pair HumanEval corpus).

The work that depends on one program only (tokens, n-gram counts, stripping, parsing, subtree keys, dataflow)
is done once per distinct string and cached (:class:`Features`); a pair then costs a few dictionary lookups.
Subtree matching hashes subtrees instead of the package's quadratic list scan.

Combination and the two deliberate differences from the package:

* the package adds ``θ · (dataflow or 1)``: a zero dataflow match counts as a perfect one (package issue
  #59). Here a zero is a zero.
* when the reference has **no dataflow edges** (e.g. ``def f(): return 1``), the dataflow part is undefined:
  :func:`dataflow_part` returns ``None`` and :func:`combine` drops the dataflow term and renormalizes the other
  weights, ``(α·ngram + β·weighted + γ·syntax) / (α + β + γ)`` (0 if those weights are all 0). The package
  returns 0 (then 1 through ``or 1``).

Example::

    >>> ref = "def add(a, b):\\n    return a + b\\n"
    >>> s = score(ref, ref)
    >>> (s.ngram, s.weighted_ngram, s.syntax, s.dataflow)
    (1.0, 1.0, 1.0, 1.0)
    >>> round(score("def add(x, y):\\n    return x + y\\n", ref).dataflow, 3)
    1.0
    >>> score("", ref).codebleu()
    0.0
"""

from __future__ import annotations

import gc
import math
from collections import Counter, _count_elements  # type: ignore[attr-defined]
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rewardlang.runtime.code import compiled, dataflow, strip, tree
from rewardlang.runtime.code.parse import ParseCache

__all__ = [
    "PYTHON_KEYWORDS",
    "Features",
    "PairScore",
    "bleu4",
    "clear_caches",
    "combine",
    "dataflow_part",
    "features",
    "gc_paused",
    "sanitize",
    "score",
    "score_pairs",
    "syntax_match",
    "weighted_ngram_match",
]

#: the package's ``keywords/python.txt``: ``keyword.kwlist`` plus the soft keywords match, case and type
PYTHON_KEYWORDS: frozenset[str] = frozenset((
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "match", "case", "type",
))

_MAX_N = 4


def sanitize(code: str) -> str:
    """``code`` with each lone surrogate (possible in a ``str``, never valid UTF-8) replaced by U+FFFD."""
    from rewardlang.runtime.code.parse import replace_surrogates

    return replace_surrogates(code)


class _Grams:
    """n-gram counts of one order: ``counts`` (n-gram → count, in order of first appearance), ``total``, and
    ``multi``, the n-grams seen more than once (usually few)."""

    __slots__ = ("counts", "multi", "total")

    def __init__(self, counts: dict[str, int], total: int) -> None:
        self.counts = counts
        self.total = total
        self.multi = {g: c for g, c in counts.items() if c > 1} if total != len(counts) else {}

    def matches(self, other: _Grams) -> int:
        """Σ over shared n-grams of min(count here, count there): the clipped matches, either way round.

        = |shared n-grams| + Σ (min − 1) over n-grams repeated on both sides (min − 1 = 0 otherwise).
        """
        n = len(self.counts.keys() & other.counts.keys())
        a, b = self.multi, other.multi
        if a and b:
            for g in a.keys() & b.keys():
                x, y = a[g], b[g]
                n += (x if x < y else y) - 1  # noqa: FURB136 - hot loop, no call
        return n


def _count(items: Iterable[Any]) -> dict[Any, int]:
    """``dict(Counter(items))`` without Counter's Python-level constructor (insertion order kept)."""
    d: dict[Any, int] = {}
    _count_elements(d, items)
    return d


def _ngram_counts(tokens: list[str]) -> list[_Grams]:
    """1- to 4-gram counts, in order of first appearance; an n-gram is its tokens joined by one space.

    Whitespace tokens contain no whitespace, so the joined string identifies the n-gram exactly as the
    package's tuples do. Strings cache their hash and are not tracked by the cyclic collector: tuples cost
    a hash per lookup and a collector pass (to untrack them) about as long as building them.
    """
    n_tok = len(tokens)
    join = " ".join
    return [
        _Grams(_count(tokens), n_tok),
        _Grams(_count(map(join, zip(tokens, tokens[1:]))), max(0, n_tok - 1)),  # noqa: RUF007 - as 3- and 4-grams
        _Grams(_count(map(join, zip(tokens, tokens[1:], tokens[2:]))), max(0, n_tok - 2)),
        _Grams(_count(map(join, zip(tokens, tokens[1:], tokens[2:], tokens[3:]))), max(0, n_tok - 3)),
    ]


class _Tree:
    """The syntax and dataflow features of one comment-stripped program, shared by every :class:`Features` whose
    text strips to it (programs that differ only in comments or docstrings: ~2 % of a GRPO batch's programs)."""

    __slots__ = ("_flat", "dataflow", "n_subtrees", "subtrees")

    def __init__(self) -> None:
        self._flat: Any = None
        self.subtrees: Counter | None = None
        self.n_subtrees = 0
        self.dataflow: dict[str, tuple[Counter, int]] = {}

    def flat(self, stripped: str, lang: str) -> Any:
        if self._flat is None:
            from rewardlang.runtime.code.parse import parse

            self._flat = compiled.twin(tree).flatten(parse(stripped, lang), lang)
        return self._flat

    def release(self) -> None:
        # the flattened tree is only needed until both tree-based features exist
        if self.subtrees is not None and self.dataflow:
            self._flat = None


#: (lang, stripped text) -> _Tree, for the Features of the cache (FEATURES) only
TREES = ParseCache(max_entries=20_000)


@dataclass
class Features:
    """Everything about one program that CodeBLEU needs, computed lazily and once.

    ``text`` is the sanitized, ``strip()``-ed program; ``lang`` its language. The syntax and dataflow features
    depend on the text without comments and docstrings only (``stripped``): cached features share them with
    every other program that strips to the same text (``shared=False``: computed for this object alone).
    """

    text: str
    lang: str = "python"
    shared: bool = False
    _ngrams: list[_Grams] | None = field(default=None, repr=False)
    _unigram_weights: tuple[dict[str, int], float] | None = field(default=None, repr=False)
    _tree: _Tree | None = field(default=None, repr=False)
    _stripped: str | None = field(default=None, repr=False)

    @property
    def tokens(self) -> list[str]:
        return self.text.split()

    @property
    def ngrams(self) -> list[_Grams]:
        if self._ngrams is None:
            self._ngrams = _ngram_counts(self.text.split())
        return self._ngrams

    @property
    def length(self) -> int:
        return self.ngrams[0].total

    @property
    def stripped(self) -> str:
        """The text the syntax and dataflow matches parse: comments and docstrings removed."""
        if self._stripped is None:
            self._stripped = compiled.twin(strip).strip_or_keep(self.text)
        return self._stripped

    def tree(self) -> _Tree:
        """The tree-based features of ``stripped`` (shared through :data:`TREES` when ``shared``)."""
        t = self._tree
        if t is None:
            if self.shared:
                key = (self.lang, self.stripped)
                t = TREES.get(key)
                if t is None:
                    t = _Tree()
                    TREES.put(key, t)
            else:
                t = _Tree()
            self._tree = t
        return t

    def flat(self) -> Any:
        return self.tree().flat(self.stripped, self.lang)

    @property
    def subtrees(self) -> Counter:
        """Subtree key → number of occurrences (the reference's list of S-expressions, as a multiset)."""
        t = self.tree()
        if t.subtrees is None:
            keys = t.flat(self.stripped, self.lang).subtrees
            t.n_subtrees = len(keys)
            t.subtrees = Counter(_count(keys))
            t.release()
        return t.subtrees

    @property
    def n_subtrees(self) -> int:
        t = self.tree()
        if t.subtrees is None:
            _ = self.subtrees  # computes both
        return t.n_subtrees

    def dataflow(self, order: str = "seed0") -> tuple[Counter, int]:
        """(normalized edge → count, number of edges); edges are ``(var, relation, (parent vars…))``.
        ``order``: see :mod:`~rewardlang.runtime.code.dataflow`."""
        t = self.tree()
        if order not in t.dataflow:
            df = compiled.twin(dataflow)
            edges = df.normalize(df.dataflow_edges(t.flat(self.stripped, self.lang), self.stripped, order))
            t.dataflow[order] = (Counter((v, r, tuple(p)) for v, r, p in edges), len(edges))
            t.release()
        return t.dataflow[order]


# -- per-part formulas (the package's, for one candidate and one reference) --------------------------------


def _matches(cand: Features, ref: Features) -> list[int]:
    """Clipped n-gram matches for n = 1…4 (the same counts serve BLEU's precisions and the recalls)."""
    return [h.matches(r) for h, r in zip(cand.ngrams, ref.ngrams)]


def bleu4(cand: Features, ref: Features, matches: list[int] | None = None) -> float:
    """BLEU-4 of ``cand`` against ``ref`` with the package's smoothing (method 1, ε = 0.1)."""
    m = _matches(cand, ref) if matches is None else matches
    pn = [(k, max(1, h.total)) for k, h in zip(m, cand.ngrams)]
    if pn[0][0] == 0:
        return 0.0
    return _combine_bleu(pn, cand.length, ref.length)


def _combine_bleu(pn: Sequence[tuple[float, float]], hyp_len: int, ref_len: int) -> float:
    if hyp_len > ref_len:
        bp = 1.0
    elif hyp_len == 0:
        bp = 0.0
    else:
        bp = math.exp(1 - ref_len / hyp_len)
    s = math.fsum(0.25 * math.log((num if num != 0 else num + 0.1) / den) for num, den in pn)
    return bp * math.exp(s)


def _keyword_unigrams(ref: Features) -> tuple[dict[str, int], float]:
    """The reference's keyword unigrams (token → count) and Σ count·weight over all its unigrams."""
    if ref._unigram_weights is None:
        kw = {g: c for g, c in ref.ngrams[0].counts.items() if g in PYTHON_KEYWORDS}
        n_kw = sum(kw.values())
        ref._unigram_weights = (kw, n_kw + 0.2 * (ref.length - n_kw))
    return ref._unigram_weights


def weighted_ngram_match(cand: Features, ref: Features, matches: list[int] | None = None) -> float:
    """Keyword-weighted n-gram match (recall against the reference; keywords weigh 1, other tokens 0.2)."""
    m = _matches(cand, ref) if matches is None else matches
    kw, denom1 = _keyword_unigrams(ref)
    h1 = cand.ngrams[0]
    # Σ over shared unigrams of min(counts) · weight = 0.2 · (clipped matches) + 0.8 · (clipped keyword matches)
    kw_matches = 0
    hc = h1.counts
    for tok, c in kw.items():
        h = hc.get(tok)
        if h:
            kw_matches += c if c < h else h  # noqa: FURB136 - hot loop, no call
    num1 = 0.2 * (m[0] - kw_matches) + kw_matches
    pn: list[tuple[float, float]] = [(num1, max(1, denom1))]
    pn += [(k, max(1, r.total)) for k, r in zip(m[1:], ref.ngrams[1:])]
    if pn[0][0] == 0:
        return 0.0
    # The package measures the reference's length as len([tokens, weights]) == 2, so its brevity penalty
    # only bites candidates of one token (exp(-1)) or none (0). Reproduced for parity.
    return _combine_bleu(pn, cand.length, 2)


def syntax_match(cand: Features, ref: Features) -> float:
    """Share of the reference's subtrees (with multiplicity) that occur in the candidate's tree."""
    rs = ref.subtrees
    matched = sum(map(rs.__getitem__, rs.keys() & cand.subtrees.keys()))
    return matched / ref.n_subtrees


def dataflow_part(cand: Features, ref: Features, order: str = "seed0") -> float | None:
    """Share of the reference's normalized dataflow edges found in the candidate (each used once);
    ``None`` when the reference has no dataflow edges."""
    rd, rn = ref.dataflow(order)
    if rn == 0:
        return None
    cd, _ = cand.dataflow(order)
    matched = sum(min(c, cd[e]) for e, c in rd.items() if e in cd)
    return matched / rn


@dataclass(frozen=True)
class PairScore:
    """The four parts for one (candidate, reference) pair; ``dataflow`` is ``None`` when the reference has
    no dataflow edges."""

    ngram: float
    weighted_ngram: float
    syntax: float
    dataflow: float | None

    def codebleu(self, weights: Sequence[float] = (0.25, 0.25, 0.25, 0.25)) -> float:
        return combine(self, weights)


def combine(s: PairScore, weights: Sequence[float] = (0.25, 0.25, 0.25, 0.25)) -> float:
    """``α·ngram + β·weighted + γ·syntax + θ·dataflow``; without reference dataflow the dataflow term is
    dropped and ``α, β, γ`` are renormalized to their sum (0 when that sum is 0)."""
    a, b, g, t = weights
    if s.dataflow is not None:
        return a * s.ngram + b * s.weighted_ngram + g * s.syntax + t * s.dataflow
    total = a + b + g
    if total == 0:
        return 0.0
    return (a * s.ngram + b * s.weighted_ngram + g * s.syntax) / total


# -- caching and batching -----------------------------------------------------------------------------


FEATURES = ParseCache(max_entries=20_000)  # (lang, text) -> Features


def clear_caches() -> None:
    """Forget all cached features and parse trees (benchmarks use it to time cold runs)."""
    from rewardlang.runtime.code.parse import clear_cache

    FEATURES.clear()
    TREES.clear()
    clear_cache()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a batch (restored afterwards).

    The analysis allocates many small containers and no reference cycles (reference counting frees them), yet
    the collector's generation-0 passes cost about a sixth of the time. Pausing is process-wide, so it is
    kept to one batch.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def features(code: str, lang: str = "python", *, cache: bool = True) -> Features:
    """The :class:`Features` of ``code`` (sanitized and stripped as the package does)."""
    text = sanitize(code).strip()
    if not cache:
        return Features(text, lang)
    key = (lang, text)
    f = FEATURES.get(key)
    if f is None:  # built outside the cache's lock: other threads keep reading it meanwhile
        f = Features(text, lang, shared=True)
        FEATURES.put(key, f)
    return f


def score(code: str, reference: str, lang: str = "python", *, dataflow_order: str = "seed0",
          cache: bool = True) -> PairScore:
    """All four parts for one pair."""
    return score_pairs([code], [reference], lang, dataflow_order=dataflow_order, cache=cache)[0]


_PARTS = ("ngram", "weighted_ngram", "syntax", "dataflow")


def score_pairs(codes: Sequence[str], references: Sequence[str], lang: str = "python", *,
                parts: Iterable[str] = _PARTS, dataflow_order: str = "seed0",
                cache: bool = True) -> list[PairScore]:
    """Score many pairs; each distinct program is analysed once. Parts left out of ``parts`` are 0."""
    if len(codes) != len(references):
        raise ValueError("codes and references differ in length")
    want = set(parts)
    local: dict[str, Features] = {}

    def feat(code: str) -> Features:
        f = local.get(code)
        if f is None:
            f = local[code] = features(code, lang, cache=cache)
        return f

    out = []
    lexical = "ngram" in want or "weighted_ngram" in want
    with gc_paused():
        _score_into(out, codes, references, feat, want, lexical, dataflow_order)
    return out


def _score_into(out: list[PairScore], codes: Sequence[str], references: Sequence[str], feat: Any,
                want: set[str], lexical: bool, dataflow_order: str) -> None:
    for code, ref in zip(codes, references):
        c, r = feat(code), feat(ref)
        m = _matches(c, r) if lexical else None
        out.append(PairScore(
            bleu4(c, r, m) if "ngram" in want else 0.0,
            weighted_ngram_match(c, r, m) if "weighted_ngram" in want else 0.0,
            syntax_match(c, r) if "syntax" in want else 0.0,
            dataflow_part(c, r, dataflow_order) if "dataflow" in want else 0.0,
        ))
