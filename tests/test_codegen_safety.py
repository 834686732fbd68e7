"""Spec text never becomes code: every user string enters the generated module through repr()."""

from __future__ import annotations

from pathlib import Path

import pytest

import rewardlang
from rewardlang.diagnostics import SpecError


def payloads(marker: Path) -> list[str]:
    act = f"__import__('pathlib').Path('{marker}').touch()"
    return [
        f'\\"\\"\\" + {act} + \\"\\"\\"',          # close a triple-quoted docstring
        f"\\\\\\\" + {act} + \\\"",                 # a backslash to escape the closing quote
        f"x\\n{act}\\r{act}\\u2028{act}",           # line breaks into comments
        f"''' + {act} + '''",
    ]


@pytest.mark.parametrize("k", range(4))
def test_spec_strings_stay_strings(k: int, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = payloads(marker)[k]
    src = (f'spec evil "{payload}"\n'
           f'let t = tag(completion, "{payload}") or "{payload}"\n'
           f'component c = len(t) + count(completion, "{payload}")\n'
           f'reward = c + len("{payload}")\n'
           f'advantage over group(prompt) = x - mean\n'
           f'example "{payload}" {{ completion: "{payload}", prompt: "p", expect advantage = 0 }}\n')
    try:
        prog = rewardlang.loads(src, filename=str(tmp_path / "evil.reward"))
    except SpecError as exc:
        pytest.fail(f"the spec should compile: {exc}")
    prog.score(completion=["x"], prompt=["p"])
    assert prog.run_examples()[0][3] == []
    assert not marker.exists(), "spec text was executed"
