"""The adapters' own contract, without verl or OpenRLHF installed: the same keys on every sample (masked and
erroring ones included), finite scores, the spec's totals, rows mapped as documented, concurrent calls batched."""

from __future__ import annotations

import doctest
import json
import logging
import math
import threading
from pathlib import Path

import pytest

from rewardlang.integrations import batching, openrlhf, server, verl
from rewardlang.integrations.batching import Batcher, Overloaded, SpecScorer
from rewardlang.compiler import load_program

ROOT = Path(__file__).resolve().parents[2]
QUALITY = str(ROOT / "specs" / "quality_grpo.reward")
TEXT = str(ROOT / "specs" / "codepo_text.reward")
KEYS = ["score", "rl_masked", "rl_format", "rl_correct", "rl_quality"]


def _rows() -> list[dict]:
    return [json.loads(x) for x in (ROOT / "examples" / "code_samples.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def reference() -> list[dict]:
    """The spec's own scores of the sample rows (Program.score), to compare the adapters with."""
    rows = _rows()
    prog = load_program(QUALITY)
    res = prog.score([r["completion"] for r in rows], tests=[r["tests"] for r in rows],
                     entry_point=[r["entry_point"] for r in rows], prompt=[r["prompt"] for r in rows])
    prog.close()
    return [res.record(i) for i in range(len(rows))]


def test_verl_compute_score_keys_and_values(reference: list[dict]) -> None:
    rows = _rows()
    outs = [verl.compute_score("humaneval", r["completion"], r["tests"],
                               {"entry_point": r["entry_point"], "prompt": r["prompt"], "num_turns": 1},
                               spec=QUALITY) for r in rows]
    for out, ref in zip(outs, reference):
        assert list(out) == KEYS  # the same keys, in the same order, on every sample
        assert all(math.isfinite(v) for v in out.values())
        if ref["reward"] is None:
            assert out["rl_masked"] == 1.0 and out["score"] == 0.0
        else:
            assert out["rl_masked"] == 0.0
            assert out["score"] == pytest.approx(ref["reward"])
            for c in ("format", "correct", "quality"):
                assert out[f"rl_{c}"] == pytest.approx(ref["components"][c])
    # the sample file holds a row rewardlang masks (design/scale.md §1.3): it stays masked, finite, same keys
    assert any(ref["reward"] is None for ref in reference) or all(o["rl_masked"] == 0.0 for o in outs)
    assert any(o["score"] > 0.9 for o in outs) and any(o["score"] < 0.3 for o in outs)


def test_verl_bad_row_is_masked_with_the_same_keys() -> None:
    # no prompt/entry_point in extra_info: a bad row, masked and counted, never an exception or a missing key
    s = batching.scorer_for(QUALITY)
    before = s.stats["bad_rows"]
    out = verl.compute_score("humaneval", "```python\ndef f():\n    return 1\n```", {"tests": "assert f() == 1"},
                             None, spec=QUALITY)
    assert list(out) == KEYS and out["rl_masked"] == 1.0 and out["score"] == 0.0
    assert s.stats["bad_rows"] == before + 1


def test_verl_ground_truth_mapping() -> None:
    s = batching.scorer_for(QUALITY)
    row = verl.verl_row(s, "he", "x", "assert True", {"entry_point": "f", "prompt": "p"})
    assert row["tests"] == "assert True" and row["completion"] == "x"
    row = verl.verl_row(s, "he", "x", {"tests": "t", "entry_point": "e", "prompt": "p"}, None)
    assert (row["tests"], row["entry_point"]) == ("t", "e")
    # extra_info cannot replace the completion
    assert verl.verl_row(s, "he", "mine", None, {"completion": "injected", "tests": "t"})["completion"] == "mine"
    # two inputs left open: ambiguous, so the row lacks them (masked as a bad row) and a warning says how to fix it
    row = verl.verl_row(s, "he", "x", "assert True", {"prompt": "p"})
    assert "tests" not in row and "entry_point" not in row
    out = verl.compute_score("he", "x", "assert True", {"prompt": "p"}, spec=QUALITY)
    assert list(out) == KEYS and out["rl_masked"] == 1.0
    row = verl.verl_row(s, "he", "x", "assert True", {"prompt": "p"}, ground_truth_input="tests")
    assert row["tests"] == "assert True"


def test_concurrent_calls_are_scored_as_one_batch() -> None:
    b = Batcher(SpecScorer(TEXT), window_s=5.0, max_batch=16)  # the 16th row closes the batch, not the window
    outs: list = [None] * 16
    done = threading.Barrier(16)

    def call(i: int) -> None:
        done.wait()
        outs[i] = b.score([{"prompt": "p", "completion": f"```python\nx = {i}\n```"}])[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    b.close()
    assert dict(b.batch_sizes) == {16: 1}
    assert all(o is not None and list(o) == list(outs[0]) and o["rl_masked"] == 0.0 for o in outs)


def test_the_window_runs_from_the_last_answer_and_ends_when_its_callers_are_back() -> None:
    b = Batcher(SpecScorer(TEXT), window_s=60.0, max_batch=4)
    first = b.submit([{"prompt": "p", "completion": f"```python\nx = {i}\n```"} for i in range(4)])
    assert len(first.result(timeout=60)) == 4  # closed by max_batch, not the window
    # the previous batch answered one request: one request waiting is a batch at once (the 60 s window would
    # otherwise hold it), and it is scored alone
    nxt = b.submit([{"prompt": "p", "completion": "```python\ny = 1\n```"}])
    assert len(nxt.result(timeout=30)) == 1
    b.close()
    assert dict(b.batch_sizes) == {4: 1, 1: 1}


def test_bounded_queue_and_close_finishes_accepted() -> None:
    b = Batcher(SpecScorer(TEXT), window_s=0.5, max_batch=100, max_pending=3)
    fut = b.submit([{"completion": "a"}, {"completion": "b"}])
    with pytest.raises(Overloaded, match="limit 3"):
        b.submit([{"completion": "c"}, {"completion": "d"}])
    b.close()  # closes before the window ends: the accepted request is still scored
    assert len(fut.result(timeout=1)) == 2
    with pytest.raises(Overloaded, match="shutting down"):
        b.submit([{"completion": "e"}])


def test_infrastructure_failure_masks_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    s = SpecScorer(TEXT)

    def boom(*a, **k):
        raise OSError("sandbox slot died")

    monkeypatch.setattr(s.program, "score_columns", boom)
    outs = s.score_rows([{"prompt": "p", "completion": "x"}, {"prompt": "p", "completion": "y"}])
    assert [o["rl_masked"] for o in outs] == [1.0, 1.0] and s.stats["infra_failures"] == 2
    assert all(list(o) == s.keys and o["score"] == 0.0 for o in outs)


def test_a_row_whose_scoring_raises_masks_only_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    s = SpecScorer(TEXT)
    real = s.program.score_columns
    calls = []

    def hostile(cols, n, **kw):  # a row that makes the whole call raise (whatever the runtime's own isolation)
        calls.append(n)
        if any("EVIL" in c for c in cols["completion"]):
            raise RuntimeError("boom")
        return real(cols, n, **kw)

    monkeypatch.setattr(s.program, "score_columns", hostile)
    rows = [{"prompt": "p", "completion": f"<think>a</think> row {i}" + (" EVIL" if i == 5 else "")}
            for i in range(8)]
    outs = s.score_rows(rows)
    assert [o["rl_masked"] for o in outs] == [1.0 if i == 5 else 0.0 for i in range(8)]
    assert s.stats["infra_failures"] == 1 and len(calls) <= 2 * 4 + 1  # halving, not one call per row
    want = SpecScorer(TEXT).score_rows([r for i, r in enumerate(rows) if i != 5])
    assert [o for i, o in enumerate(outs) if i != 5] == want


def test_openrlhf_reward_func(monkeypatch: pytest.MonkeyPatch, reference: list[dict]) -> None:
    monkeypatch.setenv("REWARDLANG_SPEC", QUALITY)
    rows = _rows()
    for r, ref in zip(rows, reference):
        label = {"tests": r["tests"], "entry_point": r["entry_point"]}
        out = openrlhf.reward_func([r["prompt"] + r["completion"] + "<|im_end|>"], [r["prompt"]],
                                   [json.dumps(label)])
        assert set(out) == {"rewards", "scores", "extra_logs"}
        assert list(out["extra_logs"]) == KEYS[1:]
        want = 0.0 if ref["reward"] is None else ref["reward"]
        assert out["rewards"] == pytest.approx(want) and out["scores"] == pytest.approx(want)
    # a query that does not start with its prompt, a label that is not the spec's columns: masked, same keys
    out = openrlhf.reward_func(["other text"], ["prompt"], [{}])
    assert out["extra_logs"]["rl_masked"] == 1.0 and out["rewards"] == 0.0
    assert list(out["extra_logs"]) == KEYS[1:]
    out = openrlhf.reward_func(["p```python\nx=1\n```"], ["p"], ["not json, two inputs open"])
    assert out["extra_logs"]["rl_masked"] == 1.0


def test_openrlhf_strips_end_of_sequence_texts() -> None:
    assert openrlhf._strip_eos("code</s>") == "code"
    assert openrlhf._strip_eos("code<|im_end|>\n<|endoftext|>") == "code"
    assert openrlhf._strip_eos("code </s> more") == "code </s> more"  # only trailing ones


def test_docstring_examples() -> None:
    for mod in (batching, verl, openrlhf, server):
        assert doctest.testmod(mod).failed == 0, mod.__name__


def test_every_mask_has_its_reason_and_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 37 item 14: a missing column is called missing (it was called "null"), a null one null, a wrong type
    named, a component's none and an infrastructure failure named; the reason rides on the result (never as a key:
    verl and OpenRLHF take every key as a metric) and every mask is logged."""
    spec = tmp_path / "m.reward"
    spec.write_text("input n: number\ninput k: number?\ncomponent c in [0, 10] = n + k if k != none else none\n"
                    "reward = c\n")
    s = SpecScorer(str(spec))
    with caplog.at_level(logging.WARNING, logger="rewardlang.integrations"):
        rows = [{"completion": "a", "n": 1, "k": 2}, {"completion": "a"}, {"completion": "a", "n": None},
                {"completion": "a", "n": "x"}, {"completion": "a", "n": 1}, "not a row"]
        outs = s.score_rows(rows)  # type: ignore[arg-type]
    assert [o["rl_masked"] for o in outs] == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert all(list(o) == s.keys for o in outs)  # the reason is not a key
    why = [getattr(o, "reason", None) for o in outs]
    assert why[0] is None
    assert why[1] == "column `n` missing (the spec's input `n` reads it)"
    assert why[2].startswith("column `n` is null, but `n` is `number`")
    assert why[3] == "column `n` expected number, got str"
    assert why[4] == "component `c`: none"
    assert why[5] == "a row must be an object of the spec's columns, not str"
    assert s.stats["bad_rows"] == 4 and s.stats["masked"] == 1
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "5 of 6 row(s) of a batch masked" in logged and "row 1: column `n` missing" in logged
    assert "row 4: component `c`: none" in logged


def test_infrastructure_failure_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    s = SpecScorer(TEXT)
    monkeypatch.setattr(s.program, "score_columns", lambda *a, **k: (_ for _ in ()).throw(OSError("slot died")))
    out = s.score_rows([{"prompt": "p", "completion": "x"}])[0]
    assert out.reason == "an infrastructure failure: scoring raised OSError: slot died"  # type: ignore[attr-defined]


def test_openrlhf_unreadable_samples_are_masked_with_a_reason_and_logged(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Before: a query that does not start with its prompt, or a label the spec cannot map, was masked and logged
    nowhere."""
    monkeypatch.setenv("REWARDLANG_SPEC", QUALITY)
    r = _rows()[0]
    label = {"tests": r["tests"], "entry_point": r["entry_point"]}
    rows, why = openrlhf.read_samples(batching.scorer_for(QUALITY), ["other" + r["completion"], "q"],
                                      [r["prompt"], "q"], [label, 7])
    assert rows == [None, None]
    assert why[0] == "the query does not start with its prompt (the response is the query after the prompt)"
    assert why[1].startswith("the label cannot be mapped: a label must be a dict or a JSON object")
    with caplog.at_level(logging.WARNING, logger="rewardlang.integrations"):
        out = openrlhf.reward_func(["other" + r["completion"]], [r["prompt"]], [label])
    assert out["extra_logs"]["rl_masked"] == 1.0 and "errors" not in out  # OpenRLHF's keys only, numbers only
    assert "does not start with its prompt" in " ".join(x.getMessage() for x in caplog.records)
