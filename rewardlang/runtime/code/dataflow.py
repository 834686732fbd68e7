"""Python dataflow graphs as CodeBLEU computes them (GraphCodeBERT's ``DFG_python``), on flattened trees.

An edge ``(name, position, "comesFrom" | "computedFrom", parent names, parent positions)`` says that the value
of a variable occurrence comes from other occurrences. :func:`dataflow_edges` reproduces the reference
(``codebleu`` 0.7.0, ``parser/DFG.py`` and ``dataflow_match.get_data_flow``) rule by rule, including its
failure mode: when the reference's extraction raises on a malformed tree it yields no edges at all, and so does
this one. :func:`normalize` renames variables to ``var_0, var_1, …`` in order of first appearance, so that
renamed but otherwise equal programs match.

Where two edges of one variable occurrence are merged, the reference orders the merged parent names with
``list(set(...))``, i.e. by Python's per-process string hash. The same program can then normalize differently
in two processes, and its dataflow match against a renamed candidate changes (88 of the 1,312 pairs of the
HumanEval corpus differ between PYTHONHASHSEED 0, 1 and 2). ``order="seed0"`` (the default) reproduces the
order a ``PYTHONHASHSEED=0`` interpreter gets (:mod:`~rewardlang.runtime.code.pyset`): deterministic in every
process, and equal to the reference run with ``PYTHONHASHSEED=0``. ``order="process"`` uses this process's
own ``set`` (equal to the reference run in the same process, whatever its seed).

Example::

    >>> from rewardlang.runtime.code.parse import parse
    >>> from rewardlang.runtime.code.tree import flatten
    >>> code = "def f(a):\\n    b = a + 1\\n    return b\\n"
    >>> edges = dataflow_edges(flatten(parse(code)), code)
    >>> [(e[0], e[2], e[3]) for e in edges]  # literals count as sources, as in the reference
    [('a', 'comesFrom', []), ('b', 'computedFrom', ['a', '1']), ('a', 'comesFrom', ['a']), ('1', 'comesFrom', []), \
('b', 'comesFrom', ['b'])]
    >>> normalize(edges)[:2]
    [('var_0', 'comesFrom', []), ('var_2', 'computedFrom', ['var_0', 'var_1'])]
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from typing import Any

from rewardlang.runtime.code.pyset import set_order0
from rewardlang.runtime.code.tree import Flat

__all__ = ["MAX_DEPTH", "MAX_LOOP_NODES", "dataflow_edges", "normalize"]

#: deeper trees get no edges. The reference recurses once per tree level and also ends with no edges when
#: Python's recursion limit stops it (at a depth that depends on the caller's stack, about 900-1000);
#: real code stays far below this bound.
MAX_DEPTH = 300
#: the most nodes the loops' passes may walk, all together: the reference walks a loop's body twice, so loops nested
#: d deep walk the innermost body 2^d times (26 ``while`` loops in 1.3 KB of code took 629 s of a scoring process
#: that no signal stopped). Past it the program has no dataflow (as past MAX_DEPTH): its own outcome, in bounded
#: time. A million nodes is ~1 s; HumanEval's 164 canonical solutions walk at most a few thousand.
MAX_LOOP_NODES = 1_000_000

_STRINGY = frozenset(("string_literal", "string", "character_literal"))
_ASSIGNMENT = frozenset(("assignment", "augmented_assignment", "for_in_clause"))
_SPECIAL = _ASSIGNMENT | {"default_parameter", "if_statement", "for_statement", "while_statement"}
_FIELD_TYPES = frozenset(("assignment", "augmented_assignment", "for_in_clause", "default_parameter",
                          "for_statement"))

Edge = tuple[str, int, str, list[str], list[int]]


class _Fail(Exception):
    """Where the reference raises (and so returns no edges at all)."""


def _by_idx(e: Edge) -> int:
    return e[1]


def _by_key_idx(item: tuple[tuple[str, int, str], Any]) -> int:
    return item[0][1]


_SKIP = None  # token entry of a keyword or punctuation token (its type is its text): no variable


class _DFG:
    def __init__(self, flat: Flat, code: str, order: str) -> None:
        self.types = types = flat.types
        self.flat = flat
        self.last = last = flat.last
        self.seed0 = order == "seed0"
        self.loop_budget = MAX_LOOP_NODES  # spent by each loop pass, by the size of what it walks
        n = len(types)
        # The reference's tokens (tree_to_token_index), in document order: leaves other than comments, and
        # string literals as single tokens (see flatten)
        self.order = order = flat.tokens
        spans = [flat.spans[i] for i in order]
        texts = _token_texts(code, spans)
        # index_to_code: position → (token index, text); a later token at the same position (zero-width
        # MISSING nodes) replaces an earlier one, as in the reference's dict
        index_to_code: dict[tuple[int, int], tuple[int, str]] = dict(zip(spans, enumerate(texts)))
        # per node: None for non-tokens; for tokens (idx, text, is identifier) or _SKIP when type == text.
        # Per token (in ``order``): its (idx, text) where it is a variable token, else None (var_tokens' slices)
        tok: list[Any] = [None] * n
        self.is_tok = is_tok = [False] * n
        self.var = var = [None] * len(order)
        entry = index_to_code.__getitem__
        for pos, (i, sp) in enumerate(zip(order, spans)):
            e = entry(sp)
            t = types[i]
            if t != e[1]:
                tok[i] = (e[0], e[1], t == "identifier")
                var[pos] = e
            is_tok[i] = True
        self.tok = tok
        self.kids = flat.children  # the bound method: one call level less on a hot path
        self.index_to_code = index_to_code
        # nodes with a for_in_clause child (comprehensions; anything in an ERROR node): the reference walks
        # that child first. The parent is the nearest earlier node whose subtree reaches the child.
        self.loop_first: set[int] = set()
        if "for_in_clause" in types:
            for j, t in enumerate(types):
                if t == "for_in_clause":
                    p = j - 1
                    while last[p] < j:
                        p -= 1
                    self.loop_first.add(p)
        self._fields: dict[tuple[int, str], int | None] = {}
        self.out: list[Edge] = []

    # -- tree access -------------------------------------------------------------------------------------
    def field_child(self, i: int, name: str) -> int | None:
        """``node.child_by_field_name(name)`` as an index (tree-sitter's own lookup, for exactness)."""
        key = (i, name)
        cache = self._fields
        if key in cache:
            return cache[key]
        node = self.flat.nodes[i]
        found = node.child_by_field_name(name)
        index = None
        if found is not None:
            kids = self.kids(i)
            try:  # the first child equal to it, compared in C
                pos = node.children.index(found)
            except ValueError:  # not a direct child: cannot happen with tree-sitter's visible-node semantics
                raise _Fail(f"field {name} of node {i} is not a child") from None
            if pos >= len(kids):  # pragma: no cover - both enumerate the visible children
                raise _Fail(f"field {name} of node {i} is not a child")
            index = kids[pos]
        cache[key] = index
        return index

    def children_of(self, i: int | None) -> list[int]:
        if i is None:
            raise _Fail("no such child")  # the reference calls .children on None
        return self.kids(i)

    def var_tokens(self, i: int | None) -> list[tuple[int, str]]:
        """``tree_to_variable_index`` then ``index_to_code``: (index, text) of the non-keyword tokens."""
        if i is None:
            raise _Fail("no such child")  # the reference calls .children on None
        order = self.order
        lo = bisect.bisect_left(order, i)
        if lo and self.last[order[lo - 1]] >= i and not self.is_tok[i]:
            return self._var_tokens_inside(i)
        hi = bisect.bisect_right(order, self.last[i], lo)
        return [e for e in self.var[lo:hi] if e is not None]

    def _leaf_entry(self, i: int) -> tuple[int, str]:
        """The reference's ``index_to_code`` lookup for a node its leaf test accepts but that is no token (it
        lies inside a string literal): its KeyError, unless another token has the very same extent."""
        sp = self.flat.spans.get(i)
        found = self.index_to_code.get(sp) if sp is not None else None
        if found is None:
            raise _Fail("no token at this position")
        return found

    def _is_leafy(self, i: int) -> bool:
        t = self.types[i]
        return (self.last[i] == i or t in _STRINGY) and t != "comment"

    def _var_tokens_inside(self, i: int) -> list[tuple[int, str]]:
        """``tree_to_variable_index`` below a string literal's top (rare: a field inside an f-string)."""
        out = []
        stack = [i]
        while stack:
            j = stack.pop()
            if self._is_leafy(j):
                idx, text = self._leaf_entry(j)
                if self.types[j] != text:
                    out.append((idx, text))
            else:
                stack.extend(reversed(self.kids(j)))
        return out

    def merge_names(self, a: list[str], b: list[str]) -> list[str]:
        return _merge_names(a, b, self.seed0)

    # -- DFG_python -----------------------------------------------------------------------------------------
    # The reference returns (edges, states) from every call, copies ``states`` on entry and re-sorts the edges
    # by position at every level. Here edges are appended to ``self.out`` in the order the reference emits
    # them and sorted once at the end: nested stable sorts by one key equal a single stable sort. ``states``
    # is copied only where the reference's caller keeps using its own dict (the branches of an ``if``); every
    # other caller replaces its dict by the returned one, so sharing it changes nothing.
    def run(self, i: int, states: dict[str, list[int]]) -> dict[str, list[int]]:
        out = self.out
        tok = self.tok
        if self.is_tok[i]:
            e = tok[i]
            if e is _SKIP:
                return states
            idx, code, ident = e
            if code in states:
                out.append((code, idx, "comesFrom", [code], states[code].copy()))
                return states
            if ident:
                states[code] = [idx]
            out.append((code, idx, "comesFrom", [], []))
            return states
        t = self.types[i]
        if (self.last[i] == i or t in _STRINGY) and t != "comment":  # _is_leafy: a leaf inside a string literal
            idx, code = self._leaf_entry(i)
            if t == code:
                return states
            if code in states:
                out.append((code, idx, "comesFrom", [code], states[code].copy()))
                return states
            if t == "identifier":
                states[code] = [idx]
            out.append((code, idx, "comesFrom", [], []))
            return states
        if t not in _SPECIAL:
            if i in self.loop_first:  # comprehensions: the for_in_clause children go first
                types = self.types
                children = self.kids(i)
                for child in children:
                    if types[child] == "for_in_clause":
                        states = self.run(child, states)
                for child in children:
                    if types[child] != "for_in_clause":
                        states = self.run(child, states)
                return states
            is_tok, run, last = self.is_tok, self.run, self.last
            child, end = i + 1, last[i]
            while child <= end:
                if is_tok[child]:  # the token case above, inlined: most children are tokens
                    e = tok[child]
                    if e is not _SKIP:
                        idx, code, ident = e
                        if code in states:
                            out.append((code, idx, "comesFrom", [code], states[code].copy()))
                        else:
                            if ident:
                                states[code] = [idx]
                            out.append((code, idx, "comesFrom", [], []))
                else:
                    states = run(child, states)
                child = last[child] + 1
            return states
        kids = self.kids
        if t == "default_parameter":
            name = self.field_child(i, "name")
            value = self.field_child(i, "value")
            if value is None:
                for idx, code in self.var_tokens(name):
                    out.append((code, idx, "comesFrom", [], []))
                    states[code] = [idx]
                return states
            name_tokens = self.var_tokens(name)
            value_tokens = self.var_tokens(value)
            states = self.run(value, states)
            for idx1, code1 in name_tokens:
                for idx2, code2 in value_tokens:
                    out.append((code1, idx1, "comesFrom", [code2], [idx2]))
                states[code1] = [idx1]
            return states
        if t in _ASSIGNMENT:
            if t == "for_in_clause":
                if not kids(i):
                    raise _Fail("empty for_in_clause")
                right_nodes: list[Any] = [kids(i)[-1]]
                left_nodes: list[Any] = [self.field_child(i, "left")]
            else:
                right = self.field_child(i, "right")
                if right is None:
                    return states
                left = self.field_child(i, "left")
                left_nodes, right_nodes = self._pair_up(left, right)
            for node in right_nodes:
                states = self.run(node, states)
            self._computed_from(left_nodes, right_nodes, states)
            return states
        if t == "if_statement":
            current_states = states.copy()
            others_states = []
            tag = False
            for child in kids(i):
                ct = self.types[child]
                if "else" in ct:
                    tag = True
                if ct not in ("elif_clause", "else_clause"):
                    current_states = self.run(child, current_states)
                else:
                    others_states.append(self.run(child, states.copy()))
            others_states.append(current_states)
            if not tag:
                others_states.append(states)
            # The reference concatenates each name's positions over the branches and sorts the set. Every list
            # in ``states`` is already sorted and duplicate-free (a fresh [idx] or such a merge), so a name
            # whose branches all hold the same list keeps that list.
            merged: dict[str, list[int]] = {}
            vals: dict[str, list[list[int]]] = {}
            for dic in others_states:
                for key, v in dic.items():
                    seen = vals.get(key)
                    if seen is None:
                        vals[key] = [v]
                        merged[key] = v
                    elif v is not seen[0]:
                        seen.append(v)
            for key, vs in vals.items():
                if len(vs) > 1:
                    merged[key] = sorted(set().union(*vs))
            return merged
        if t == "for_statement":
            start = len(out)
            # the same in both passes (the tree does not change), so looked up once
            left_nodes, right_nodes = self._pair_up(self.field_child(i, "left"), self.field_child(i, "right"))
            children = kids(i)
            self._spend(i)
            for _ in range(2):
                for node in right_nodes:
                    states = self.run(node, states)
                self._computed_from(left_nodes, right_nodes, states)
                if not children:
                    raise _Fail("empty for_statement")
                if self.types[children[-1]] == "block":
                    states = self.run(children[-1], states)
            out[start:] = self._merge_loop(out[start:])
            return states
        if t == "while_statement":
            start = len(out)
            self._spend(i)
            for _ in range(2):
                for child in kids(i):
                    states = self.run(child, states)
            out[start:] = self._merge_loop(out[start:])
            return states
        raise AssertionError(t)  # every special type returned above

    def _spend(self, i: int) -> None:
        """A loop at node ``i`` walks its subtree twice: that many nodes off the budget (MAX_LOOP_NODES)."""
        self.loop_budget -= 2 * (self.last[i] - i + 1)
        if self.loop_budget < 0:
            raise _Fail("loops nested too deep to follow (MAX_LOOP_NODES)")

    def _pair_up(self, left: int | None, right: int | None) -> tuple[list[Any], list[Any]]:
        types = self.types
        right_nodes: list[Any] = [x for x in self.children_of(right) if types[x] != ","]
        left_nodes: list[Any] = [x for x in self.children_of(left) if types[x] != ","]
        if len(right_nodes) != len(left_nodes):
            left_nodes = [left]
            right_nodes = [right]
        if not left_nodes:
            left_nodes = [left]
        if not right_nodes:
            right_nodes = [right]
        return left_nodes, right_nodes

    def _computed_from(self, left_nodes: list[Any], right_nodes: list[Any], states: dict[str, list[int]]) -> None:
        out = self.out
        for left_node, right_node in zip(left_nodes, right_nodes):
            left_tokens = self.var_tokens(left_node)
            right_tokens = self.var_tokens(right_node)
            names = [c for _, c in right_tokens]
            idxs = [x for x, _ in right_tokens]
            for idx1, code1 in left_tokens:
                out.append((code1, idx1, "computedFrom", list(names), list(idxs)))
                states[code1] = [idx1]

    def _merge_loop(self, dfg: list[Edge]) -> list[Edge]:
        """A loop's edges (its body is walked twice) merged per (name, position, relation). Entries of one
        key share a position, so their relative order — all the merge depends on — is the same as in the
        reference's position-sorted lists."""
        dic: dict[tuple[str, int, str], list[Any]] = {}
        seed0 = self.seed0
        for x in dfg:
            key = x[:3]
            d = dic.get(key)
            if d is None:
                dic[key] = [x[3], x[4]]
            else:
                d[0] = _merge_names(d[0], x[3], seed0)
                d[1] = sorted(set(d[1] + x[4]))
        return [(x[0], x[1], x[2], y[0], y[1]) for x, y in sorted(dic.items(), key=_by_key_idx)]


def _token_texts(code: str, spans: list[tuple[int, int]]) -> list[str]:
    """The reference's ``index_to_code_token``: the token's text from ``code.split("\\n")`` sliced with
    tree-sitter's *byte* columns (so non-ASCII lines give shifted slices, as in the reference), newlines
    dropped between the lines of a multi-line token."""
    if code.isascii():
        out = [code[s:e] for s, e in spans]
        if "\n" in code:
            out = [t.replace("\n", "") if "\n" in t else t for t in out]
        return out
    import bisect

    from rewardlang.runtime.code.parse import encode

    data = encode(code)
    line_starts = [0]
    pos = data.find(b"\n")
    while pos >= 0:
        line_starts.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    lines = code.split("\n")
    out = []
    for s, e in spans:
        sr = bisect.bisect_right(line_starts, s) - 1
        er = bisect.bisect_right(line_starts, e) - 1
        sc, ec = s - line_starts[sr], e - line_starts[er]
        if sr == er:
            out.append(lines[sr][sc:ec])
        else:
            out.append(lines[sr][sc:] + "".join(lines[sr + 1:er]) + lines[er][:ec])
    return out


def _merge_names(a: list[str], b: list[str], seed0: bool) -> list[str]:
    """The reference's ``list(set(a + b))`` (see the module docstring for the order)."""
    c = a + b
    if len(c) < 2:
        return c
    if not seed0:
        return list(set(c))
    first = c[0]
    for x in c:
        if x != first:
            return list(_set_order0_cached(tuple(c)))
    return [first]  # the common case: a loop's two passes merge the same name


@lru_cache(maxsize=65536)
def _set_order0_cached(c: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(set_order0(c))


def dataflow_edges(flat: Flat, code: str, order: str = "seed0") -> list[Edge]:
    """The reference's ``get_data_flow`` for the parsed ``code``: edges sorted by position, occurrences
    without any relation dropped, edges of one occurrence merged. ``order``: ``"seed0"`` or ``"process"``
    (module docstring)."""
    if order not in ("seed0", "process"):
        raise ValueError(f"order must be 'seed0' or 'process', not {order!r}")
    if flat.max_depth > MAX_DEPTH:
        return []
    try:
        d = _DFG(flat, code, order)
        d.run(0, {})
        dfg = sorted(d.out, key=_by_idx)
    except (_Fail, AttributeError, TypeError, IndexError, KeyError):
        dfg = []
    used: set[int] = set()
    for e in dfg:
        if e[4]:
            used.add(e[1])
        used.update(e[4])
    merged: dict[int, Edge] = {}
    for e in dfg:
        if e[1] not in used:
            continue
        prev = merged.get(e[1])
        if prev is None:
            merged[e[1]] = e
        else:
            names = _merge_names(prev[3], e[3], order == "seed0")
            merged[e[1]] = (e[0], e[1], e[2], names, list(set(prev[4] + e[4])))  # ints: same order everywhere
    return list(merged.values())


def normalize(edges: list[Edge]) -> list[tuple[str, str, list[str]]]:
    """The reference's ``normalize_dataflow``: variable names become ``var_<n>`` in order of appearance."""
    names: dict[str, str] = {}
    out = []
    for var, _, rel, parents, _ in edges:
        for p in parents:
            if p not in names:
                names[p] = f"var_{len(names)}"
        if var not in names:
            names[var] = f"var_{len(names)}"
        out.append((names[var], rel, [names[p] for p in parents]))
    return out
