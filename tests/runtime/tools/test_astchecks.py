"""The AST analyzers of the quality score: each rule of codequal_analyzer, on hand-written programs."""

from __future__ import annotations

import ast
import textwrap

from rewardlang.runtime.tools.astchecks import data_structure, exception_handling, resource_use, string_concat


def _run(fn, src: str) -> list[tuple[str, int, str]]:
    return sorted((f["severity"], f["line"], f["message"].split(" ")[0]) for f in fn(ast.parse(textwrap.dedent(src))))


def test_exception_rules() -> None:
    src = """
    try:
        a()
    except:
        pass
    try:
        b()
    except Exception:
        log()
    except ValueError:
        pass
    try:
        c()
    finally:
        d()
    """
    got = _run(exception_handling, src)
    assert got == [
        ("high", 4, "Bare"), ("high", 4, "Empty"),          # bare except + pass body
        ("high", 10, "Empty"),                             # except ValueError: pass
        ("low", 12, "No"),                                 # try/finally without handlers
        ("medium", 8, "Catching"),                         # except Exception
    ]


def test_resources_opened_in_try_without_finally() -> None:
    src = """
    try:
        f = open("x")
        conn = db.connect()
    except OSError as e:
        raise
    try:
        g = open("y")
    except OSError:
        raise RuntimeError("bad") from None
    finally:
        g.close()
    """
    findings = exception_handling(ast.parse(textwrap.dedent(src)))
    res = [f for f in findings if f["message"].startswith("Resources")]
    assert len(res) == 1 and res[0]["line"] == 2 and res[0]["severity"] == "medium"
    assert res[0]["message"].endswith("connect, file") and res[0]["with_only"] is False
    # a bare raise and a raise ... from are fine
    assert not [f for f in findings if f["message"].startswith("Raising")]


def test_raise_rule_and_its_quirk_flags() -> None:
    src = """
    try:
        if x:
            raise ValueError("in the body")
    except KeyError:
        raise TypeError("in the handler")
    """
    raises = [f for f in exception_handling(ast.parse(textwrap.dedent(src))) if f["message"].startswith("Raising")]
    # the library flags both; only the one in the handler loses an exception's context
    assert [(f["line"], f["outside_handler"]) for f in raises] == [(4, True), (6, False)]


def test_with_open_inside_try_is_flagged_as_quirk_only() -> None:
    src = """
    try:
        with open("x") as fh:
            data = fh.read()
    except OSError:
        data = ""
    """
    res = [f for f in exception_handling(ast.parse(textwrap.dedent(src))) if f["message"].startswith("Resources")]
    assert len(res) == 1 and res[0]["with_only"] is True


def test_data_structure_rules() -> None:
    attrs = "\n".join(f"        self.a{i} = {i}" for i in range(11))
    src = (
        "class Big:\n    def __init__(self):\n" + attrs + "\n"
        "d = {" + ", ".join(f"'k{i}': {i}" for i in range(11)) + "}\n"
        "lst = [" + ", ".join(str(i) for i in range(21)) + "]\n"
        "deep = [[[[[[1]]]]]]\n"
        "obj = Thing(" + ", ".join(str(i) for i in range(11)) + ")\n"
        "ok = [[1], {'a': [2]}]\n"
    )
    got = [(f["severity"], f["line"], f["message"].split(" ")[0]) for f in data_structure(ast.parse(src))]
    assert sorted(got) == sorted([
        ("medium", 1, "Class"),                               # 11 attributes > 10
        ("low", 14, "Dictionary"), ("medium", 14, "Dictionary"),  # 11 pairs, 11 constant keys
        ("low", 15, "List"),                                  # 21 elements > 20
        ("medium", 16, "List"),                               # 6th nested level > 5
        ("medium", 17, "Object"),                             # 11 positional arguments
    ])


def test_resource_use_in_loops() -> None:
    src = """
    import time
    import os
    total = 0
    for i in range(3):
        time.sleep(1)
        total += i
        items = items + [i]
        sq = [j * j for j in range(i)]
        p = Point(1, 2, 3)
        while True:
            data = open("f").read()
            os.path.join("a")
    time.sleep(1)
    """
    got = _run(resource_use, src)
    assert got == [
        ("high", 12, "Resource-intensive"),      # open() at loop depth 2
        ("low", 9, "Comprehension"),
        ("medium", 6, "Resource-intensive"),     # time.sleep in a loop (time is imported)
        ("medium", 7, "Growing"),                # total += i
        ("medium", 8, "Growing"),                # items = items + [i]
        ("medium", 10, "Complex"),               # constructor with 3 arguments
    ]


def test_string_concatenation_in_loops() -> None:
    src = """
    s = ""
    for w in words:
        s += "x"
        s = s + str(w)
        for c in w:
            s += c.upper
        n += 1
    s += "outside"
    """
    got = _run(string_concat, src)
    assert got == [("high", 7, "String"), ("medium", 4, "String"), ("medium", 5, "String")]


def test_positions_are_ast_positions() -> None:
    f = exception_handling(ast.parse("try:\n    x()\nexcept:\n    y()\n"))[0]
    assert (f["line"], f["col"], f["end_line"]) == (3, 0, 4)
