"""Flattened tree-sitter trees with linear-time subtree signatures.

:func:`flatten` walks a tree once with a cursor and stores it as parallel lists in pre-order (index 0 is the
root; the subtree of ``i`` is ``i..last[i]``), which later passes (dataflow) read without touching tree-sitter
again. The same walk gives every node a **key** such that two nodes have equal keys exactly when their
tree-sitter S-expressions (``str(node)``, which CodeBLEU's syntax match compares) are equal. A key is built
from the children's keys when the walk leaves a node, so the whole pass is linear in the size of the tree,
where the S-expressions themselves would cost size × depth. Keys longer than :data:`DIGEST_OVER` characters
are replaced by a BLAKE2b digest (128 bits) of the key text: equal texts give equal digests; two different
texts collide with probability about 2⁻¹²⁸.

What the reference compares is ``str(node)`` of the nodes it reaches through ``node.children``, and two
quirks of tree-sitter 0.22 / py-tree-sitter 0.22 make that differ from the plain S-expressions; both are
reproduced. A MISSING node of a hidden symbol (``"1{'"`` ends in ``(MISSING _newline)``) is printed but never
visited: when an error tree's S-expression holds more MISSING nodes than the walk saw, the keys are taken from
``str(node)`` itself (slow, rare). And ``node.children`` can give an *extra* node (a comment, a line
continuation, an ERROR node of the error recovery) the alias of the child slot it sits in (an ERROR node
read as ``block``); the parents of extra nodes are re-read through ``node.children``, the types set to what it
reports (the dataflow pass uses them), and when a node with children was misread the subtree list is built
the reference's way.

Example::

    >>> from rewardlang.runtime.code.parse import parse
    >>> tree = parse("x = f(1)\\n")
    >>> flat = flatten(tree)
    >>> flat.types[:4]
    ['module', 'expression_statement', 'assignment', 'identifier']
    >>> exact = flatten(tree, digest_over=None)   # keys = the S-expressions themselves
    >>> str(tree.root_node) in exact.subtrees
    True
    >>> list(flat.children(2))   # assignment: identifier, "=", call
    [3, 4, 5]
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from rewardlang.runtime.code.parse import language

__all__ = ["DIGEST_OVER", "ERROR_KIND", "Flat", "flatten"]

ERROR_KIND = 65535  # tree-sitter's builtin error symbol
#: keys longer than this are replaced by their digest (keeps the walk linear on huge or deeply nested code)
DIGEST_OVER = 96
#: node types whose tree-sitter node the dataflow pass needs (field lookups)
KEEP_NODES = frozenset(("assignment", "augmented_assignment", "for_in_clause", "default_parameter",
                        "for_statement"))
#: node types that the dataflow pass treats as one token (their extent is recorded)
TOKEN_TYPES = frozenset(("string_literal", "string", "character_literal"))


@dataclass
class _Tables:
    names: dict[int, str]
    heads: dict[int, str]      # "(type" for named kinds and ERROR
    named: dict[int, bool]
    leaf_key: dict[int, str | None]
    prefix: list[str]          # " " or " field: " by field id
    keep: frozenset[int]       # kinds in KEEP_NODES
    token: frozenset[int]      # kinds in TOKEN_TYPES
    comment: frozenset[int]
    extra: frozenset[int]      # kinds that occur as extras (anywhere in the tree), ERROR included
    special: frozenset[int]    # keep | extra: one test per node for the rare cases
    inner_special: frozenset[int]  # token kinds and anonymous kinds: one test per node with children


_TABLES: dict[str, _Tables] = {}


def _tables(lang: str) -> _Tables:
    if lang not in _TABLES:
        lg = language(lang)
        names = {i: lg.node_kind_for_id(i) or "" for i in range(lg.node_kind_count)}
        named = {i: bool(lg.node_kind_is_named(i)) for i in range(lg.node_kind_count)}
        names[ERROR_KIND], named[ERROR_KIND] = "ERROR", True
        fields = [""] + [lg.field_name_for_id(i) or "" for i in range(1, lg.field_count + 1)]
        keep = frozenset(k for k, v in names.items() if v in KEEP_NODES)
        token = frozenset(k for k, v in names.items() if v in TOKEN_TYPES)
        extra = frozenset(k for k, v in names.items() if v in ("comment", "line_continuation", "ERROR"))
        _TABLES[lang] = _Tables(
            names=names,
            heads={k: "(" + v for k, v in names.items()},
            named=named,
            leaf_key={k: (f"({v})" if named[k] else None) for k, v in names.items()},
            prefix=[" "] + [f" {f}: " for f in fields[1:]],
            keep=keep,
            token=token,
            comment=frozenset(k for k, v in names.items() if v == "comment"),
            extra=extra,
            special=keep | extra,
            inner_special=token | frozenset(k for k, v in named.items() if not v),
        )
    return _TABLES[lang]


@dataclass
class Flat:
    """A tree in pre-order.

    ``kind[i]`` tree-sitter symbol id, ``types[i]`` its name as ``node.children`` reports it (module
    docstring), ``last[i]`` the last index of ``i``'s subtree,
    ``subtrees`` the keys CodeBLEU's syntax match compares (the root and every node with children),
    ``tokens`` CodeBLEU's dataflow tokens in document order (leaves other than comments, and string literals
    as single tokens), ``spans`` byte ranges of leaves and string literals, ``nodes`` the tree-sitter nodes
    kept for later lookups (:data:`KEEP_NODES`), ``keys`` (only with ``keep_keys=True``) every node's key,
    ``None`` for anonymous nodes, which S-expressions leave out.
    """

    lang: str
    kind: list[int]
    types: list[str]
    last: list[int]
    subtrees: list[str]
    tokens: list[int]
    spans: dict[int, tuple[int, int]]
    nodes: dict[int, Any]
    max_depth: int
    keys: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.kind)

    def children(self, i: int) -> list[int]:
        """Indices of the children of ``i``, in order."""
        last = self.last
        out = []
        c, end = i + 1, last[i]
        while c <= end:
            out.append(c)
            c = last[c] + 1
        return out


def _digest(text: str) -> str:
    # "\x00" never occurs in an S-expression, so a digest cannot equal a literal key
    return "\x00" + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def flatten(tree: Any, lang: str = "python", digest_over: int | None = DIGEST_OVER,
            keep_keys: bool = False) -> Flat:
    """Walk ``tree`` once into a :class:`Flat` (pre-order arrays, S-expression keys, syntax subtrees).

    With ``digest_over=None`` every key *is* the node's S-expression (quadratic on deep trees; the tests use it
    with ``keep_keys=True`` to check the construction against ``str(node)``).
    """
    t = _tables(lang)
    heads, named, leaf_key, prefix, keep, token = t.heads, t.named, t.leaf_key, t.prefix, t.keep, t.token
    comment, extra, special, inner_special = t.comment, t.extra, t.special, t.inner_special
    cur = tree.walk()
    kind: list[int] = []
    last: list[int] = []
    keys: list[str | None] | None = [] if keep_keys else None
    subtrees: list[str] = []
    tokens: list[int] = []
    spans: dict[int, tuple[int, int]] = {}
    nodes: dict[int, Any] = {}
    # open ancestors: (index, pieces of their S-expression so far); a node's field id is read when the cursor
    # is on it (for an inner node: right after goto_parent() has come back to it)
    stack: list[tuple[int, list[str]]] = []
    in_token = -1  # the open string literal, whose insides are not dataflow tokens
    max_depth = 0
    anonymous = False  # an anonymous node with children (no Python construct makes one)
    goto_first_child, goto_next_sibling, goto_parent = cur.goto_first_child, cur.goto_next_sibling, cur.goto_parent
    kind_append, last_append, tokens_append, sub_append = kind.append, last.append, tokens.append, subtrees.append
    i = -1
    n_missing = 0  # MISSING nodes the walk saw
    misread: set[int] = set()  # parents of extra nodes
    key: str | None = None
    top: list[str] | None = None  # the pieces of the innermost open node (stack[-1][1]), None at the root
    depth = 0  # len(stack)
    while True:
        node = cur.node
        i += 1
        k = node.kind_id
        kind_append(k)
        last_append(i)
        if keys is not None:
            keys.append(None)
        if k in special:
            if k in keep:
                nodes[i] = node
            if k in extra and stack and in_token < 0:
                # py-tree-sitter 0.22's node.children (what the reference walks) can give an extra node — a
                # comment, a line continuation, an ERROR node of the error recovery — the alias of the child
                # slot it sits in ("block" for one inside an aliased _simple_statements); the cursor reports
                # the real kind. Remember the parent, to re-read its children the reference's way
                # (_apparent_types).
                misread.add(stack[-1][0])
        if goto_first_child():
            if k in inner_special:
                if k in token:
                    spans[i] = node.byte_range
                    if in_token < 0:
                        tokens_append(i)
                        in_token = i
                if not named[k]:
                    anonymous = True
            top = [heads[k]]
            stack.append((i, top))
            depth += 1
            if depth > max_depth:  # noqa: PLR1730 - hot loop, no call
                max_depth = depth
            continue
        span = spans[i] = node.byte_range
        if in_token < 0 and k not in comment:
            tokens_append(i)
        if k == ERROR_KIND or (span[0] == span[1] and node.is_missing):
            key = str(node)  # "(UNEXPECTED 'x')", "(MISSING identifier)", "(MISSING \")\")"
            if k != ERROR_KIND:
                n_missing += 1
        else:
            key = leaf_key[k]
        if key is not None:
            if keys is not None:
                keys[i] = key
            if top is not None:
                top.append(prefix[cur.field_id or 0] + key)
        while not goto_next_sibling():
            if not goto_parent():
                if last[0] == 0:  # a root without children is a subtree too
                    sub_append(str(node) if key is None else key)
                # Two things the walk cannot see: an anonymous node with children (left out of S-expressions,
                # its children are not; no Python construct makes one) and a MISSING *hidden* node (the
                # cursor skips hidden nodes, S-expressions show missing ones: "1{'" has a
                # "(MISSING _newline)"). Both need an error tree or an odd grammar, so in an error tree the
                # root's S-expression is searched for MISSING nodes the walk did not see; if there is one, the
                # slow exact route.
                if anonymous or (tree.root_node.has_error
                                 and str(tree.root_node).count("(MISSING ") != n_missing):
                    subtrees, keys = _exact(tree, digest_over, keys is not None)
                flat = Flat(lang, kind, [t.names[x] for x in kind], last, subtrees, tokens, spans, nodes,
                            max_depth, keys)
                if misread and _apparent_types(tree, flat, misread):
                    # a node with children was misread: the reference keys it by its misread name
                    flat.subtrees = _children_subtrees(tree, digest_over)
                return flat
            j, pieces = stack.pop()
            depth -= 1
            top = stack[-1][1] if depth else None
            last[j] = i
            if j == in_token:
                in_token = -1
            pieces.append(")")
            key = "".join(pieces)
            if digest_over is not None and len(key) > digest_over:
                key = _digest(key)
            if keys is not None:
                keys[j] = key
            sub_append(key)
            if top is not None:
                top.append(prefix[cur.field_id or 0] + key)


def _apparent_types(tree: Any, flat: Flat, misread: set[int]) -> bool:
    """Give nodes the types the reference sees: ``node.children`` from the root down, which in py-tree-sitter
    0.22 can give an extra node (and then its children) the alias of the slot it sits in. Starts from the
    parents of extra nodes, re-reads the children of every node whose type changed, then recomputes the
    dataflow tokens with these types. True when a node with children changed type."""
    last, types = flat.last, flat.types
    pkg: dict[int, Any] = {0: tree.root_node}  # index -> node as the reference reaches it

    def reach(i: int) -> Any:
        chain = [i]
        while chain[-1] not in pkg:  # climb to the nearest ancestor already reached
            j = chain[-1]
            p = j - 1
            while last[p] < j:
                p -= 1
            chain.append(p)
        for p in reversed(chain[1:]):  # then come down through .children, caching the siblings too
            if chain[0] in pkg:
                break
            for k, node in zip(flat.children(p), pkg[p].children):
                pkg[k] = node
        return pkg[i]

    inner = False
    work = sorted(misread, reverse=True)
    done: set[int] = set()
    while work:
        p = work.pop()
        if p in done:
            continue
        done.add(p)
        node = reach(p)
        kids = flat.children(p)
        children = node.children
        if len(children) != len(kids):  # cannot happen: both enumerate the visible children
            continue
        for k, child in zip(kids, children):
            pkg[k] = child
            ty = child.type
            if ty != types[k]:
                types[k] = ty
                if last[k] != k:
                    inner = True
                    work.append(k)
                if ty in TOKEN_TYPES:
                    flat.spans[k] = child.byte_range
    # the reference's tokens (tree_to_token_index) under these types
    tokens = []
    i, n = 0, len(types)
    while i < n:
        t = types[i]
        if (last[i] == i or t in TOKEN_TYPES) and t != "comment":
            tokens.append(i)
            i = last[i] + 1
        else:
            i += 1
    flat.tokens = tokens
    return inner


def _composed_key(full: str, inner: list[tuple[str, str]], digest_over: int | None) -> str:
    """A node's key by the rule of the fast walk in :func:`flatten`: its S-expression with every child's
    S-expression replaced by that child's key, digested when longer than ``digest_over``.

    ``full`` is ``str(node)``; ``inner`` holds (``str(child)``, key of the child) for its children in order.
    Keys built this way are equal exactly when the S-expressions are (up to the digest), whichever route built
    them, so a broken candidate (exact route) and a clean reference (fast route) match as the reference
    implementation's ``str(node)`` comparison does, long children included.
    """
    if digest_over is None:
        return full
    pieces: list[str] = []
    pos = 0
    for child_full, child_key in inner:
        if child_key == child_full:
            continue
        at = full.find(child_full, pos)
        if at < 0:  # pragma: no cover - str(parent) always contains str(child)
            continue
        pieces.append(full[pos:at])
        pieces.append(child_key)
        pos = at + len(child_full)
    if pieces:
        pieces.append(full[pos:])
        key = "".join(pieces)
    else:
        key = full
    return _digest(key) if len(key) > digest_over else key


def _children_subtrees(tree: Any, digest_over: int | None) -> list[str]:
    """The reference's own subtree list: the root and, through ``node.children``, every node with children,
    as ``str(node)`` (a misread node prints its misread name), keyed by :func:`_composed_key`."""
    out: list[str] = []
    # iterative post-order: (node, its str, its children's (str, key) so far, children left to visit)
    root = tree.root_node
    stack: list[tuple[Any, str, list[tuple[str, str]], list[Any]]] = [(root, str(root), [], list(root.children))]
    while stack:
        node, full, inner, todo = stack[-1]
        if todo:
            child = todo.pop(0)
            cfull = str(child)
            if child.child_count:
                stack.append((child, cfull, [], list(child.children)))
            else:
                inner.append((cfull, cfull))
            continue
        stack.pop()
        key = _composed_key(full, inner, digest_over)
        if node.child_count or not stack:
            out.append(key)
        if stack:
            stack[-1][2].append((full, key))
    return out


def _exact(tree: Any, digest_over: int | None, keep_keys: bool) -> tuple[list[str], list[str | None] | None]:
    """Subtrees (and per-node keys) from ``str(node)`` itself (size × depth): the slow, exact route, for trees
    whose S-expressions hold nodes the cursor does not visit (hidden MISSING nodes). Keys follow the fast
    walk's rule (:func:`_composed_key`), so they equal the fast route's keys of the same subtrees."""
    out: list[str] = []
    keys: list[str | None] | None = [] if keep_keys else None
    cur = tree.walk()
    # open nodes: (pre-order index, str(node), children's (str, key), whether it is kept as a subtree)
    stack: list[tuple[int, str, list[tuple[str, str]], bool]] = []
    i = -1
    first = True

    def close(entry: tuple[int, str, list[tuple[str, str]], bool], slot: int | None) -> str:
        idx, full, inner, _ = entry
        key = _composed_key(full, inner, digest_over)
        if slot is not None:
            out[slot] = key
        if keys is not None and keys[idx] is not None:
            keys[idx] = key
        return key

    open_slots: list[int | None] = []
    while True:
        node = cur.node
        i += 1
        full = str(node)
        if keys is not None:
            keys.append(full if node.is_named or node.is_missing else None)
        subtree = first or node.child_count > 0
        first = False
        if cur.goto_first_child():
            slot = None
            if subtree:
                slot = len(out)
                out.append("")
            stack.append((i, full, [], subtree))
            open_slots.append(slot)
            continue
        if subtree:  # a root without children
            out.append(full)
        if stack:
            stack[-1][2].append((full, full))
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                return out, keys
            entry = stack.pop()
            key = close(entry, open_slots.pop())
            if stack:
                stack[-1][2].append((entry[1], key))
