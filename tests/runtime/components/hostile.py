"""Hostile completions: texts a policy can write that break naive parsers, analyzers and regexes.

Shared by the tests that check the rule "a failure caused by the completion's text is the completion's
outcome, never a mask" (docs/language.md, "none, errors and masking"). Each entry is a whole completion (the
code inside one ```python block where the point is the code). Sizes are the smallest that still trigger the
failure each one stands for, so the tests stay fast.
"""

from __future__ import annotations


def fence(code: str) -> str:
    return "```python\n" + code + "\n```"


HOSTILE: dict[str, str] = {
    # not Python at all, or not finished
    "unparseable": fence("def inc(x):\n    return (x + \n"),
    "unterminated_string": fence("s = '''abc\n"),
    "continuation_at_eof": fence("x = 1 + \\"),
    "mixed_tabs": fence("def f():\n\tif x:\n        pass\n"),
    "unknown_coding": fence("# -*- coding: nonexistent -*-\nx = 1\n"),
    "too_many_parens": fence("x = " + "(" * 1000 + ")" * 1000),
    # ruff overflows its stack past ~10,000 levels of nesting (unfenced: a fence before it makes ruff's parser
    # recover shallower); a crash on the sample alone has every line flagged, never a mask
    "ruff_stack_overflow": "x = " + "[" * 12000 + "]" * 12000,
    # CodeBLEU's dataflow walks each loop body twice: 2^26 walks of the innermost body without a budget
    "loops_nested_deep": fence("def inc(x):\n" + "".join("    " * (i + 1) + f"while a{i}:\n" for i in range(26))
                               + "    " * 27 + "x = x + 1\n"),
    "too_many_indents": fence("".join("    " * i + "if x:\n" for i in range(101)) + "    " * 101 + "pass\n"),
    # parseable or nearly, but deep enough to overflow recursive parsers and tree walkers
    "deep_binop": fence("def inc(x):\n    return " + "x+" * 20000 + "1\n"),
    "deep_unary": fence("def inc(x):\n    return " + "-" * 20000 + "x\n"),
    "deep_not": fence("def inc(x):\n    return " + "not " * 5000 + "x\n"),
    "deep_subscript": fence("def inc(x):\n    return x" + "[0]" * 5000 + "\n"),
    "deep_attribute": fence("def inc(x):\n    return x" + ".a" * 5000 + "\n"),
    "deep_call": fence("def inc(x):\n    return x" + "()" * 5000 + "\n"),
    "deep_lambda": fence("f = " + "lambda: " * 2000 + "0\n"),
    "nested_lists": fence("x = " + "[" * 199 + "]" * 199),
    "nested_fstrings": fence("x = " + "f'{" * 150 + "1" + "}'" * 150),
    # bytes and characters tools choke on
    "nul_in_block": fence("def inc(x):\n    return x + 1\x00\n"),
    "nul_bare": "def inc(x):\x00\n    return x + 1\n",
    "odd_unicode": "\ufeff\u202e```python\ndef inc(x):\n    return x + 1  # \U0001F600\u0301\n```\ufffd",
    "control_chars": fence("x = 1\x0b\x0c\x1b[31m\r\ny = 2\r"),
    # size
    "long_line": fence("x = '" + "a" * 100_000 + "'\n"),
    "many_lines": fence("\n" * 20_000 + "x = 1\n"),
    "huge_int_literal": fence("x = " + "9" * 20_000 + "\n"),
    "huge_power": fence("def inc(x):\n    return 10 ** 10 ** 10\n"),
    "big_dict": fence("x = {" + ",".join(f"{i}: {i}" for i in range(5000)) + "}\n"),
    # bait for the text functions' regexes
    "many_fences": "```" * 5000,
    "many_tags": "<answer>" * 5000 + "<reasoning>" * 5000,
    "repeated_words": "a " * 20_000,
    "blank_prefix_lines": "\n" * 20_000 + "1. x",
    "spaces_before_nothing": " " * 20_000 + "x",
    # nothing at all
    "empty": "",
    "whitespace": "   \n\t\n",
    "empty_block": fence(""),
    "unclosed_block": "```python\ndef inc(x):\n    return x + 1\n",
}

NORMAL: list[str] = [
    "```python\ndef inc(x):\n    return x + 1\n```",
    "<reasoning>Step 1: add. Step 2: return. Thus done.</reasoning><answer>```python\ndef inc(x):\n    "
    "return x + 2\n```</answer>",
    "I would add one.",
]
