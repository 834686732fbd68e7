"""The `tokens` clause: each form's placement in completion characters (what `score` writes, no tokenizer),
misuse as located E216 errors, and fmt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rewardlang
from rewardlang.checker import check_source
from rewardlang.fmt import format_source
from rewardlang.runtime import registry

SIGS = registry.signatures()

FORMS = (Path(__file__).parents[1] / "fixtures" / "token_forms.reward").read_text(encoding="utf-8")


def test_placements_in_completion_characters() -> None:
    prog = rewardlang.loads(FORMS)
    text = "A TODO\n```python\nx = 1\ny = (\n```"
    #       0123456 7890123456 789012 3456789 0123
    res = prog.score([text])
    got = {k: v[0].as_json() for k, v in res.attribution.items()}
    assert got == {
        "acc": {"ranges": [], "last": 3.0},
        "tests": {"ranges": [[17, 28, 0.5]]},                    # the code "x = 1\ny = (" is [17, 28)
        "todo": {"ranges": [[2, 6, -1.0]], "uncovered": 0.25},
        "lines": {"ranges": [[21, 22, 2.0], [27, 28, 2.0]]},     # the last character of each line
        # before the unfinished line "y = (" (starts at 23), from it on, then the fences "```python\n", "\n```"
        "syntax": {"ranges": [[17, 23, 1.0], [23, 28, -1.0], [7, 17, 2.0], [28, 32, 2.0]]},
    }
    assert "plain" not in got  # no clause: a sequence reward, unchanged output
    assert res.record(0)["tokens"] == got


def _cli(*args: str) -> str:
    """The command's standard output, run in this process (typer's runner); it must succeed."""
    from typer.testing import CliRunner

    from rewardlang.cli import app

    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0 and r.exception is None, (r.stderr, r.exception)
    return r.stdout


def test_score_cli_writes_the_placements(tmp_path) -> None:
    spec = tmp_path / "t.reward"
    spec.write_text(FORMS)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"completion": "no code TODO"}) + "\n")
    out = _cli("score", str(spec), "-i", str(data))
    rec = json.loads(out)
    # no python block: over/split place nothing, the TODO span and the uncovered value remain
    assert rec["tokens"]["tests"] == {"ranges": []}
    assert rec["tokens"]["syntax"] == {"ranges": []}
    assert rec["tokens"]["todo"] == {"ranges": [[8, 12, -1.0]], "uncovered": 0.25}


@pytest.mark.parametrize("src, message, where", [
    ("component c = 1\n    tokens first", "`tokens` names how the value reaches tokens", (2, 12)),
    ("component c = 1\n    tokens 3", "`tokens` names how the value reaches tokens", (2, 12)),
    ("component c = 1\n    tokens spans", "`tokens spans` places the component's spans, but it has no `spans` clause",
     (2, 12)),
    ("component c = 1\n    tokens ends", "`tokens ends` places the component's spans, but it has no `spans` clause",
     (2, 12)),
    ("component c = 1\n    spans span(completion)\n    tokens over(completion)",
     "`tokens over(...)` makes the component's spans; it cannot have a `spans` clause too", (2, 5)),
    ("component c = 1\n    tokens over(3)", "`tokens over` needs a piece of the completion (text), not `number`",
     (2, 17)),
    ("component c = 1\n    tokens over()", "`tokens over` takes one text argument", (2, 12)),
    ("component c = 1\n    tokens last(completion)", "`tokens last` takes no plain arguments", (2, 12)),
    ("component c = 1\n    tokens split(completion)", ("`tokens split` needs `at=POS`: the character of TEXT "
                                                          "where `after` starts"), (2, 12)),
    ("component c = 1\n    tokens split(completion, at=1, middle=2)", "`tokens split` has no option `middle`",
     (2, 36)),
    ("component c = 1\n    tokens split(completion, at=completion)",
     "`at` is a character position (a number, none: nowhere), not `text`", (2, 33)),
    ("component c = 1\n    tokens split(completion, at=1, before=none)", "`before` is a constant number", (2, 43)),
    ("component c = 1\n    spans span(completion)\n    tokens spans(uncovered=\"x\")",
     "`uncovered` is a constant number", (3, 28)),
    ("component c = 1\n    spans span(completion)\n    tokens spans(overlap=\"max\")",
     '`overlap` is "add" (overlapping spans add) or "last" (a token takes the value of the last span it overlaps)',
     (3, 26)),
    ("component c = 1\n    tokens last\nreward = c * 2",
     "`c` has token attribution, so the reward must be the weighted sum of the components", (2, 5)),
])
def test_misuse_is_a_located_E216(src: str, message: str, where: tuple[int, int]) -> None:
    prog, diags, _ = check_source(src, "t.reward", SIGS, None)
    assert prog is None
    assert [(d.code, d.message) for d in diags] == [("E216", message)]
    assert (diags[0].loc.line, diags[0].loc.column) == where


def test_params_are_constants_for_values_and_fmt_keeps_the_clause() -> None:
    src = ("param fence: number = 3\ncomponent c = 1\n    tokens split(completion, at=len(completion) - 1, "
           "after=-2, edges=fence)\n")
    prog = rewardlang.loads(src)
    assert prog.spec["components"][0]["tokens"] == {"mode": "split", "edges": 3.0}
    assert prog.score(["abcd"]).attribution["c"][0].ranges == ((0, 3, 1.0), (3, 4, -2.0))
    assert format_source(src) == src
    assert format_source(FORMS.lstrip()) == FORMS.lstrip()


def test_explain_tokens_prints_each_token(tmp_path) -> None:
    spec = tmp_path / "t.reward"
    spec.write_text(FORMS)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"completion": "A TODO\n```python\nx = 1\ny = (\n```"}) + "\n")
    out = _cli("explain", str(spec), "-i", str(data), "--tokens").splitlines()
    assert out[0].split() == ["#", "token", "acc", "tests", "todo", "lines", "syntax", "plain", "reward"]
    # token 1 " T" of "TODO": todo -1, nothing else; reward = the weighted sum (weights 1)
    assert out[2].split() == ["1", "T", "0", "0", "-1", "0", "0", "0", "-1"]
    # the last token "`" of the closing fence: acc 3 and plain 7 (sequence rewards), todo's uncovered 0.25, fence 2
    assert out[25].split() == ["24", "`", "3", "0", "0.25", "0", "2", "7", "12.25"]
    assert out[-1].startswith("sum of per-token rewards: ")


def test_attribution_module_examples() -> None:
    import doctest

    from rewardlang.runtime import attribution

    result = doctest.testmod(attribution)
    assert result.failed == 0 and result.attempted > 0


def test_overlap_last_counts_a_token_once() -> None:
    """issue 22 (a): `overlap="last"` gives a token that overlaps two spans one span's value, not their sum."""
    from rewardlang.runtime.attribution import to_tokens

    src = ('component c = 1\n    spans matches(completion, /[^\\n]+\\n/, value=-1)\n'
           '    tokens spans(uncovered=1, overlap="last")\n')
    prog = rewardlang.loads(src)
    assert prog.spec["components"][0]["tokens"] == {"mode": "spans", "uncovered": 1.0, "overlap": "last"}
    p = prog.score(["ab\ncd\nef"]).attribution["c"][0]
    # tokens "a" | "b\nc" (both lines) | "d\n" | "ef" (no span)
    assert to_tokens(p, [1, 4, 6, 8]).tolist() == [-1.0, -1.0, -1.0, 1.0]
    added = rewardlang.loads(src.replace(', overlap="last"', ""))
    assert "overlap" not in added.spec["components"][0]["tokens"]
    got = to_tokens(added.score(["ab\ncd\nef"]).attribution["c"][0], [1, 4, 6, 8]).tolist()
    assert got == [-1.0, -2.0, -1.0, 1.0]
    assert format_source(src) == src
