"""The PRM trainer: step-end labels (golden), the masked BCE, resume, bad data, and a learning test on
execution-labelled HumanEval steps (slow): held-out step accuracy beats the majority baseline."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from rewardlang.trainers.config import TrainConfig
from rewardlang.trainers.data import DataError
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.model import build_tokenizer
from rewardlang.trainers.prm import PRMTrainer, _Collate, build_model, read_steps, split_by_problem, tokenize_row
from rewardlang.trainers.run import train
from resume_kit import StopAt  # noqa: E402

SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "specs", "prm.reward")


def test_labels_sit_on_step_ends() -> None:
    tok = build_tokenizer(512)
    row = {"prompt": "def f(x):\n", "completions": ["    y = x\n", "    return y\n"], "labels": [True, False]}
    out = tokenize_row(row, tok)
    p = tok("def f(x):\n", add_special_tokens=False)["input_ids"]
    s1 = tok("    y = x\n", add_special_tokens=False)["input_ids"]
    s2 = tok("    return y\n", add_special_tokens=False)["input_ids"]
    assert out["input_ids"] == p + s1 + s2
    want = [-100] * len(p) + [-100] * (len(s1) - 1) + [1] + [-100] * (len(s2) - 1) + [0]
    assert out["labels"] == want
    short = tokenize_row(row, tok, max_tokens=len(s2) + 1)  # the last tokens are kept
    assert short["labels"][-1] == 0 and len(short["input_ids"]) == len(s2) + 1


def test_loss_is_bce_on_labelled_positions_only() -> None:
    cfg = TrainConfig()
    model, tok = build_model(cfg)
    assert model.config.num_labels == 1
    model.eval()  # the classifier head has dropout
    tr = PRMTrainer.__new__(PRMTrainer)
    batch = _Collate(tok.pad_token_id)([{"input_ids": [5, 6, 7], "labels": [-100, 1, -100]},
                                        {"input_ids": [8, 9], "labels": [-100, 0]}])
    assert batch["labels"].tolist() == [[-100, 1, -100], [-100, 0, -100]]
    loss = PRMTrainer.compute_loss(tr, model, dict(batch))
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[..., 0]
    want = (-math.log(torch.sigmoid(logits[0, 1]).item()) - math.log(1 - torch.sigmoid(logits[1, 1]).item())) / 2
    assert loss.item() == pytest.approx(want, rel=1e-5)


def test_bad_rows_and_split(tmp_path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"prompt": "x", "completions": ["a"], "labels": [True]}) + "\n"
                 + json.dumps({"prompt": "x", "completions": ["a", "b"], "labels": [True]}) + "\n")
    with pytest.raises(DataError, match=r"s.jsonl:2: a stepwise row needs"):
        read_steps(str(p))
    with pytest.raises(DataError, match="needs --dataset"):
        read_steps(None)
    rows = [{"task_id": f"HumanEval/{i}"} for i in range(164)]
    tr, ev = split_by_problem(rows)
    assert len(tr) + len(ev) == 164 and 20 <= len(ev) <= 45
    assert split_by_problem(rows) == (tr, ev)


def _toy_rows(n_problems: int) -> list[dict]:
    """A separable toy: a step holding `pass` is wrong, any other step right."""
    rows = []
    for i in range(n_problems):
        good = [f"    a{i} = {i}\n", f"    return a{i}\n"]
        rows.append({"task_id": f"t{i}", "prompt": f"def f{i}():\n", "completions": good, "labels": [True, True]})
        rows.append({"task_id": f"t{i}", "prompt": f"def f{i}():\n", "completions": [good[0], "    pass\n"],
                     "labels": [True, False]})
    return rows



def test_run_resume_and_metrics(tmp_path) -> None:
    data = tmp_path / "steps.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _toy_rows(30)))
    flags = {"dataset": str(data), "max_steps": 6, "batch_size": 4}
    sets = {"train.save_steps": 3, "train.learning_rate": 1e-3}
    full = train(SPEC, flags={**flags, "output_dir": str(tmp_path / "a")}, sets=sets, progress=False)
    part = train(SPEC, flags={**flags, "output_dir": str(tmp_path / "b")}, sets=sets, progress=False,
                 callbacks=[StopAt(3)])
    assert full.global_step == 6 and part.global_step == 3
    resumed = train(SPEC, flags={**flags, "output_dir": str(tmp_path / "b")}, sets=sets, progress=False,
                    resume=True)
    assert resumed.global_step == 6
    a = {k: v for k, v in full.trainer.model.state_dict().items()}
    b = resumed.trainer.model.state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    evals = [m for m in read_metrics(full.metrics_path) if "eval_step_accuracy" in m]
    assert evals and {"eval_majority_baseline", "eval_steps"} <= set(evals[-1])
    cfg = json.load(open(tmp_path / "a" / "config.json"))
    assert cfg["train"]["algorithm"] == "prm" and cfg["prm"]["held_out"] == 0.2
    assert os.path.exists(tmp_path / "a" / "final" / "config.json")


@pytest.mark.slow
def test_prm_learns_humaneval_steps(tmp_path) -> None:
    """CPU, tiny model: on held-out HumanEval problems the PRM's step accuracy beats the majority baseline."""
    from rewardlang.datasets.prm import label
    from rewardlang.datasets.humaneval import load_humaneval

    ops = ["statement_to_pass", "return_none", "zero_iteration", "comparison_flip", "negate_condition",
           "rename_local", "extract_variable", "aug_assign", "swap_if_else", "for_to_while"]
    data = label.build(load_humaneval(), operators=ops, level="block", seed=0)
    out = label.write(data, str(tmp_path / "data"))
    r = train(SPEC, flags={"dataset": out["steps.jsonl"], "output_dir": str(tmp_path / "run"), "max_steps": 150,
                           "batch_size": 16}, sets={"train.save_steps": 150}, progress=False)
    last = [m for m in read_metrics(r.metrics_path) if "eval_step_accuracy" in m][-1]
    assert last["eval_steps"] > 300
    assert last["eval_step_accuracy"] > last["eval_majority_baseline"] + 0.03, last


def test_prm_steps_component_scores_segment_ends(tmp_path) -> None:
    """The spec function prm_steps: one span per segment, valued with the checkpoint's P(correct) at the
    segment's last token (parity with a direct forward pass), the same batched or one by one, and a PRM that
    learned the toy rule scores a `pass` step below a real one."""
    import rewardlang
    from rewardlang.runtime.api import Context
    from rewardlang.runtime.code.segment import segments
    from rewardlang.runtime.components.prm_score import PrmParams, prm_steps

    data = tmp_path / "steps.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _toy_rows(30)))
    run = train(SPEC, flags={"dataset": str(data), "max_steps": 40, "batch_size": 8, "output_dir": str(tmp_path / "r")},
                sets={"train.save_steps": 40, "train.learning_rate": 3e-3}, progress=False)
    ck = run.final_dir
    codes = ["    a7 = 7\n    return a7\n", "    a7 = 7\n    pass\n", "def f(:\n"]
    got = prm_steps.fn(codes, ["def f7():\n"] * 3, params=PrmParams(checkpoint=ck), ctx=Context()).values
    one = [prm_steps.fn([c], ["def f7():\n"], params=PrmParams(checkpoint=ck, batch_size=1), ctx=Context()).values[0]
           for c in codes]
    assert [[(s.start, s.end) for s in v] for v in got] == [segments(c) for c in codes]
    assert got[2] == []
    for v, w in zip(got, one):
        assert [s.value for s in v] == pytest.approx([s.value for s in w], abs=1e-5)
    # parity with the model itself
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ck)
    model = AutoModelForTokenClassification.from_pretrained(ck).eval()
    ids = tokenize_row({"prompt": "def f7():\n", "completions": ["    a7 = 7\n", "    pass\n"], "labels": [True, False]},
                       tok)
    with torch.no_grad():
        p = torch.sigmoid(model(input_ids=torch.tensor([ids["input_ids"]])).logits[0, :, 0])
    ends = [i for i, lab in enumerate(ids["labels"]) if lab != -100]
    assert [s.value for s in got[1]] == pytest.approx([float(p[e]) for e in ends], abs=1e-5)
    assert got[1][1].value < 0.5 < got[0][1].value  # learned: `pass` is the wrong step
    from rewardlang.runtime.components.prm_score import PrmTotalParams, prm_total

    for reduce, f in (("sum", sum), ("mean", lambda xs: sum(xs) / len(xs)), ("last", lambda xs: xs[-1])):
        tot = prm_total.fn(codes, ["def f7():\n"] * 3, params=PrmTotalParams(checkpoint=ck, reduce=reduce),
                           ctx=Context()).values
        assert tot[:2] == pytest.approx([f([s.value for s in v]) for v in got[:2]]) and tot[2] == 0.0
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        PrmParams(batch_size=0)
    bad = prm_steps.fn(codes[:1], [""], params=PrmParams(checkpoint=str(tmp_path / "nope")), ctx=Context())
    assert bad.values == [None] and "cannot load the PRM checkpoint" in bad.errors[0]
    prog = rewardlang.loads(
        'spec s "prm"\ninput prompt: text\n'
        f'component n in [0, 9] = len(prm_steps(completion, prompt, checkpoint="{ck}"))\n'
        f'    spans prm_steps(completion, prompt, checkpoint="{ck}")\n')
    out = prog.score(completion=codes[:2], prompt=["def f7():\n"] * 2)
    assert list(out.components["n"]) == [2.0, 2.0]
    assert [s.value for s in out.spans["n"][1]] == pytest.approx([s.value for s in got[1]], abs=1e-5)
