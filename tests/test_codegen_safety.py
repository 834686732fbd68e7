"""Spec text never becomes code: every user string enters the generated module through repr()."""

from __future__ import annotations

import pytest

import rewardlang

PAYLOADS = [
    '\\"\\"\\" + __import__(\'os\').system(\'exit 3\') + \\"\\"\\"',   # close a triple-quoted docstring
    "ends with a backslash \\\\",                                        # escape the closing quote
    "line\\nbreak \\r carriage \\u2028 separator",                        # newlines inside comments
    "\\x00 nul and ''' quotes",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_spec_strings_stay_strings(payload: str, tmp_path) -> None:
    src = (f'spec evil "{payload}"\n'
           f'let t = tag(completion, "{payload}") or "{payload}"\n'
           f'component c = len(t) + count(completion, "{payload}", /{payload.replace("/", "")}x/)\n'
           f'reward = c + len("{payload}")\n'
           f'advantage over group(prompt) = x - mean\n'
           f'example "{payload}" {{ completion: "{payload}", expect c = none +- 1 }}\n')
    try:
        prog = rewardlang.loads(src, filename=str(tmp_path / "evil.reward"))
    except rewardlang.diagnostics.SpecError:  # an invalid regex is a fine outcome; code execution is not
        return
    compile(prog.python_source, "evil", "exec")
    assert "exit 3" not in prog.python_source.replace(repr(payload), "") or "__import__" in repr(prog.spec)
    out = prog.score(completion=["x"], prompt=["p"])
    assert out.total.shape == (1,)
