"""Flattened trees: every key equals tree-sitter's S-expression, the syntax subtrees are the package's list,
and the parse layer caches."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlang.runtime.code import parse as parse_mod
from rewardlang.runtime.code.parse import byte_to_char, encode, parse, replace_surrogates
from rewardlang.runtime.code.strip import strip_or_keep
from rewardlang.runtime.code.tree import flatten





def sexps(tree: Any) -> tuple[list[str | None], list[str]]:
    """Per node in pre-order (cursor walk): str(node) for nodes S-expressions show (named or MISSING), else
    None; and the package's syntax-subtree list, built as the package builds it (get_all_sub_trees: the root,
    then through node.children every node with children, as str(node))."""
    cur = tree.walk()
    keys: list[str | None] = []
    while True:
        n = cur.node
        keys.append(str(n) if (n.is_named or n.is_missing) else None)
        if cur.goto_first_child():
            continue
        done = False
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                done = True
                break
        if done:
            break
    sub: list[str] = []
    stack = [tree.root_node]
    while stack:
        n = stack.pop()
        sub.append(str(n))
        stack.extend(c for c in n.children if len(c.children) != 0)
    return keys, sub


def check(code: str) -> None:
    tree = parse(code, cache=False)
    flat = flatten(tree, digest_over=None, keep_keys=True)
    keys, sub = sexps(tree)
    assert flat.keys == keys
    assert Counter(flat.subtrees) == Counter(sub)
    # with digests, equal keys stay equal and different ones stay different
    digested = flatten(tree)
    pairs = dict(zip(flat.subtrees, digested.subtrees))
    assert len(set(pairs.values())) == len(pairs)
    assert len(flat) == len(digested) == len(keys)


def test_keys_golden() -> None:
    flat = flatten(parse("x = f(1)\n"), digest_over=None, keep_keys=True)
    assert flat.types == ["module", "expression_statement", "assignment", "identifier", "=", "call",
                          "identifier", "argument_list", "(", "integer", ")"]
    assert flat.keys[2] == "(assignment left: (identifier) right: (call function: (identifier) " \
                           "arguments: (argument_list (integer))))"
    assert flat.keys[4] is None  # "=" is anonymous
    assert flat.children(2) == [3, 4, 5]
    assert flat.last == [10, 10, 10, 3, 4, 10, 6, 10, 8, 9, 10]
    assert flat.tokens == [3, 4, 6, 8, 9, 10]
    # the package's subtrees: root and nodes with children (argument_list has "(" ... ")")
    assert len(flat.subtrees) == 5


def test_error_and_missing_nodes() -> None:
    for code in ["def f(:\n  $ x = 1\n", "x = (1,\ny = [\n", "print 'x'\n", "f(a b c)", "if x\n  pass\n",
                 "class (:\n", "x = '''", "é = ç(", "\ud800 = 1", "\x00\x01\x02", "for in :\n"]:
        check(code)


def test_hidden_missing_node() -> None:
    """"1{'" has a (MISSING _newline): a hidden node the cursor never visits, which str(node) prints."""
    tree = parse("1{'", cache=False)
    assert "(MISSING _newline)" in str(tree.root_node)
    check("1{'")


def test_misread_nodes_keyed_as_the_package_reads_them() -> None:
    """py-tree-sitter's node.children gives this ERROR node (an extra) the alias of its slot, "block"; the
    package keys it "(block ...)", so must we (the parent's S-expression still says ERROR)."""
    code = "with )\n,x, y(btry:'return with try:\nelif class \nif x, y.def   = "
    tree = parse(code, cache=False)
    flat = flatten(tree, digest_over=None)
    assert "(block (identifier))" in flat.subtrees  # the S-expression of no node in the tree
    assert "(block (identifier))" not in str(tree.root_node)
    check(code)  # and the whole list equals the package's


def test_corpus_keys_equal_sexps(corpus_module) -> None:
    rows = corpus_module.load_corpus()
    texts = sorted({r.candidate for r in rows} | {r.reference for r in rows})
    for t in texts[::3]:
        check(t)
        check(strip_or_keep(t.strip()))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abxy1 \n\t:()[]{}=+-*,.'\"#@\\lambdifor")), max_size=60))
def test_fuzz_keys_equal_sexps(code: str) -> None:
    check(code)


def test_deep_nesting_is_linear_and_digested() -> None:
    code = "x = " + "(" * 3000 + "1" + ")" * 3000 + "\n"
    flat = flatten(parse(code, cache=False))
    assert flat.max_depth > 3000
    assert max(len(k) for k in flat.subtrees) <= 96 + 1  # digests keep every key short


def test_parse_cache_and_surrogates() -> None:
    parse_mod.clear_cache()
    t1 = parse("x = 1\n")
    assert parse("x = 1\n") is t1
    assert parse("x = 1\n", cache=False) is not t1
    assert encode("a\ud800b") == "a\ufffdb".encode()
    assert replace_surrogates("ok") == "ok"
    # the cache is bounded by total characters
    small = parse_mod.ParseCache(max_entries=10, max_chars=10)
    small.put(("python", "aaaa"), 1)
    small.put(("python", "bbbbbbb"), 2)
    assert small.get(("python", "aaaa")) is None and small.get(("python", "bbbbbbb")) == 2
    small.put(("python", "c" * 11), 3)  # larger than the whole budget: not kept
    assert len(small) == 1


def test_byte_to_char() -> None:
    code = "é=中\ud800𝔘!"
    data = encode(code)
    # every character's first byte maps to its index; bytes inside a character map to that character
    starts = [len(encode(code[:i])) for i in range(len(code) + 1)]
    assert byte_to_char(code, starts) == list(range(len(code) + 1))
    assert byte_to_char(code, [1, 4, 5]) == [0, 2, 2]  # inside "é" (bytes 0-1) and "中" (bytes 3-5)
    assert len(data) == starts[-1]
    assert byte_to_char("abc", [0, 3]) == [0, 3]


def test_parse_timeout() -> None:
    import pytest

    with pytest.raises(parse_mod.ParseTimeout):
        parse("x = [" + "1, " * 300_000 + "]\n", cache=False, timeout=1e-6)
    assert parse("x = 1\n", cache=False).root_node.type == "module"  # the parser is usable afterwards
