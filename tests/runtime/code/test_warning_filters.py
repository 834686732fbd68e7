"""A reward never depends on the host's warning filters (rewardlang.pycompile.compile_quietly,
runtime/tools/runner.tool_environ).

CPython's compiler warns about some valid code: ``re.compile("\\d+")`` (an invalid escape sequence) and
``1if x else 2`` (an invalid decimal literal), both common in model output. Under ``PYTHONWARNINGS=error`` those
warnings were syntax errors wherever rewardlang parsed a program in its own process or a Python tool parsed it,
so valid code scored as unparseable (a quality_grpo completion: quality 0.86 -> 0, reward 0.80 -> 0.37); without
it, every new such warning was a line on the run's stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from rewardlang.domains.robot import inside
from rewardlang.runtime.code import segment, validity
from rewardlang.sandbox import convert
from rewardlang.pycompile import PROGRAM_FILENAME, compile_quietly

ROOT = Path(__file__).resolve().parents[3]
#: valid Python that CPython warns about twice (each a SyntaxError under -W error)
WARNED = 'import re\n\ndef f(s):\n    pat = re.compile("\\d+")\n    return 1if pat.match(s) else 2\n'


def _names_programs(f: tuple) -> bool:
    m = f[3]
    return m is not None and bool(m.match(PROGRAM_FILENAME) if hasattr(m, "match") else m == PROGRAM_FILENAME)


def test_the_code_compiles_and_the_compiler_warns_about_it() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(WARNED, "x.py", "exec")  # valid
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SyntaxError):
            compile(WARNED, "x.py", "exec")


@pytest.mark.parametrize("action", ["error", "always"])
def test_in_process_parsing_ignores_the_hosts_filters(action: str) -> None:
    """Under "error" nothing raises; under "always" nothing is shown (recorded here: pytest catches what would be
    printed)."""
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter(action)
        assert validity.is_valid(WARNED)
        assert validity.first_violation(WARNED) is None
        assert segment.parse_program(WARNED) is not None
        assert type(compile_quietly(WARNED)).__name__ == "Module"
        # the robot domain's harness takes a program's own trailing task_program() call out before it is sent
        robot = 'import re\ndef task_program():\n    say(re.sub("\\d", "", "a1"))\ntask_program()\n'
        assert inside.prepare_program(robot).splitlines()[-1].strip() == "pass"
        # the sandbox's trusted side reads a prompt's helpers (HumanEval's prompts keep regexes in helpers)
        assert len(convert.prelude_statements(WARNED + "def g():\n    pass\n", {"g"})[0]) == 2
    assert [str(w.message) for w in shown] == []


def test_the_filter_is_put_back_first_and_only_names_programs() -> None:
    """catch_warnings restores its copy of the filters on exit: the next parse puts the filter first again; a
    warning of any other file still goes by the host's filters."""
    compile_quietly("x = 1")
    saved = list(warnings.filters)
    try:
        warnings.filters[:] = [f for f in warnings.filters if not _names_programs(f)]
        warnings.simplefilter("error")
        compile_quietly(WARNED)
        assert _names_programs(warnings.filters[0])
        with pytest.raises(SyntaxError):
            compile(WARNED, "other.py", "exec")
    finally:
        warnings.filters[:] = saved
        warnings._filters_mutated()


def test_threads_parsing_at_once_leave_the_hosts_filters_as_they_were() -> None:
    """A catch_warnings around each parse (what validity did) saved and restored the whole list: two threads
    interleaving could leave the process ignoring every warning. The filter is inserted once instead."""
    compile_quietly("x = 1")
    before = list(warnings.filters)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(1500):
                validity.is_valid(WARNED)
                segment.parse_program(WARNED)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert warnings.filters == before


def _score(spec: str, rows: list[dict], tmp_path: Path, warnings_env: str | None) -> tuple[list[dict], str]:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / f"out-{warnings_env}.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    if warnings_env is not None:
        env["PYTHONWARNINGS"] = warnings_env
    r = subprocess.run([sys.executable, "-m", "rewardlang", "score", spec, "-i", str(data), "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600, env={**env, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in out.read_text().splitlines()], r.stderr


def test_scores_are_the_same_under_pythonwarnings_error(tmp_path: Path) -> None:
    """quality_grpo (the in-process parse check, pylint, bandit, the in-Python analysers) and dense_ppo (syntax
    viability, segments, the tests' statements) score the warned-about program the same with and without
    PYTHONWARNINGS=error, and print no compiler warning."""
    row = json.loads((ROOT / "examples" / "code_samples.jsonl").read_text().splitlines()[0])
    body = WARNED.replace("def f(s)", f"def {row['entry_point']}(numbers, threshold)").replace(
        "pat.match(s)", "pat.match(str(threshold))")
    row["completion"] = "```python\n" + body + "```"
    for spec in ("specs/quality_grpo.reward", "specs/dense_ppo.reward"):
        plain, err_plain = _score(spec, [row], tmp_path, None)
        strict, err_strict = _score(spec, [row], tmp_path, "error")
        assert [r["reward"] for r in strict] == [r["reward"] for r in plain], spec
        assert strict[0]["components"] == plain[0]["components"], spec
        assert "Warning" not in err_plain and "Warning" not in err_strict, (spec, err_plain, err_strict)
        if spec.endswith("quality_grpo.reward"):
            assert plain[0]["components"]["quality"] > 0.5  # analysed, not "unparseable"
