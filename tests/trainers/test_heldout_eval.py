"""`train.eval` holds problems out and evaluates them before and after with every generating algorithm (PPO, OORL,
GEPO and DPO online, DPO offline), never training on them; `train.train_problems` trains on a seeded subset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.trainers.config import ConfigError
from rewardlang.trainers.data import DataError, build_dataset, leaked_rows, split_heldout
from rewardlang.trainers.model import build_tokenizer
from rewardlang.trainers.report import drop_leaked

HELD = 2
SMALL = {"train.eval": HELD, "train.eval_max_new_tokens": 4, "train.num_generations": 2, "train.prompts_per_step": 2,
         "train.max_completion_length": 6, "train.save_steps": 100}


def _held_ids() -> set[str]:
    return {r["task_id"] for r in split_heldout(load_humaneval(), HELD)[1]}


def _check_run(run: Path, rewards: bool = True) -> None:
    doc = json.loads((run / "eval.json").read_text())
    assert set(doc["before"]["task_ids"]) == _held_ids() == set(doc["after"]["task_ids"])
    for when in ("before", "after"):
        rows = [json.loads(line) for line in (run / f"eval-{when}.jsonl").read_text().splitlines()]
        assert {r["task_id"] for r in rows} == _held_ids() and all(r["n"] == 1 for r in rows)
    readme = (run / "README.md").read_text()
    assert "held-out pass@1" in readme and ("mean reward: first" in readme) == rewards  # offline DPO scores nothing
    # the run's spec scores the held-out answers too, before and after, and the paired change has its interval
    for when in ("before", "after"):
        reward = doc[when]["reward"]
        assert reward["n"] + reward["masked"] == HELD and len(reward["ci95"]) == 2
        assert set(doc[when]["components"]) and len(doc[when]["pass@1_ci95"]) == 2
    assert set(doc["change"]) >= {"reward", "pass@1", "components"} and len(doc["change"]["reward"]["ci95"]) == 2
    assert "held-out reward (spec `" in readme


@pytest.mark.slow
@pytest.mark.parametrize("spec,algorithm", [("specs/dense_ppo.reward", "ppo"), ("specs/oorl_python.reward", "oorl"),
                                            ("specs/oorl_python.reward", "gepo"), ("specs/dpo_tests.reward", "dpo")])
def test_every_online_algorithm_evaluates_heldout_before_and_after(spec: str, algorithm: str, tmp_path: Path) -> None:
    from rewardlang.trainers.run import train

    run = tmp_path / "run"
    res = train(spec, sets={**SMALL, "train.algorithm": algorithm},
                flags={"model": "tiny", "output_dir": str(run), "max_steps": 1}, progress=False)
    assert res.global_step == 1
    _check_run(run)
    if algorithm in ("ppo", "oorl"):
        trained = {r["task_id"] for r in res.trainer.dataset}
    else:  # GEPO / online DPO: the prompts as the model saw them, with the spec's presentation
        trained = {r["task_id"] for r in res.trainer.train_dataset}
        first = res.trainer.train_dataset[0]
        assert first["_prompt_text"] != first["prompt"] and first["prompt"] in first["_prompt_text"]
    assert not trained & _held_ids() and len(trained) == 164 - HELD


@pytest.mark.slow
def test_offline_dpo_leaves_heldout_problems_out_of_its_pairs(tmp_path: Path, capsys) -> None:
    from rewardlang.trainers.run import train

    rows = load_humaneval()
    held = split_heldout(rows, HELD)[1]
    others = [r for r in rows if r["task_id"] not in _held_ids()][:4]
    pairs = tmp_path / "pairs.jsonl"
    with open(pairs, "w", encoding="utf-8") as fh:
        for r in [held[0], *others, held[1]]:  # mined from the whole dataset: two rows are held-out problems
            fh.write(json.dumps({"prompt": r["prompt"], "chosen": " return 1\n", "rejected": " pass\n"}) + "\n")
    run = tmp_path / "run"
    res = train("specs/dpo_tests.reward", sets={**SMALL, "train.preference_data": str(pairs)},
                flags={"model": "tiny", "output_dir": str(run), "max_steps": 1}, progress=False)
    assert "2 of 6 rows left out of training" in capsys.readouterr().err
    assert len(res.trainer.train_dataset) == 4
    # the spec's presentation reached the pairs' prompts, as online DPO and train.eval show them
    first = res.trainer.train_dataset[0]["prompt"]
    assert "exactly one ```python code block" in first and "Complete this Python function:" in first
    assert others[0]["prompt"] in first
    _check_run(run, rewards=False)


def test_drop_leaked_counts_and_refuses_an_all_heldout_file(capsys) -> None:
    held = [{"prompt": "def f(x):\n    pass\n"}]
    rows = [{"prompt": "Complete:\ndef f(x):\n    pass\n"}, {"prompt": "def g(): pass"},
            {"prompt": [{"role": "user", "content": "def f(x):\n    pass\n"}]}]
    assert leaked_rows([r["prompt"] for r in rows], held) == [0, 2]
    assert drop_leaked(rows, held, "pairs.jsonl") == [rows[1]]
    assert "pairs.jsonl: 2 of 3 rows left out of training" in capsys.readouterr().err
    assert drop_leaked(rows, [], "pairs.jsonl") == rows
    with pytest.raises(DataError, match="every row is a problem train.eval holds out"):
        drop_leaked([rows[0]], held, "pairs.jsonl")


def test_train_problems_keeps_a_seeded_subset_after_the_length_filter() -> None:
    tok = build_tokenizer(512)
    rows = [{"prompt": f"def f{i}():" + (" x" * (300 if i % 4 == 0 else 1)), "k": i} for i in range(40)]
    full, s_full = build_dataset(rows, ["prompt", "k"], tok, "text", max_prompt_length=64)
    assert s_full["rows"] == s_full["available_rows"] == 30 and s_full["dropped_long_prompts"] == 10
    sub, s = build_dataset(rows, ["prompt", "k"], tok, "text", max_prompt_length=64, limit=5, seed=3)
    again, _ = build_dataset(rows, ["prompt", "k"], tok, "text", max_prompt_length=64, limit=5, seed=3)
    other, _ = build_dataset(rows, ["prompt", "k"], tok, "text", max_prompt_length=64, limit=5, seed=4)
    assert s["rows"] == 5 and s["available_rows"] == 30 and "subset" not in s_full
    assert s["subset"] == list(range(5))  # rows without a task_id are named by their position in the subset
    assert sub["k"] == again["k"] and sub["k"] != other["k"]  # deterministic per seed
    assert set(sub["k"]) <= set(full["k"]) and sub["k"] == sorted(sub["k"])  # only kept prompts, in dataset order
    assert build_dataset(rows, ["prompt", "k"], tok, "text", max_prompt_length=64, limit=100)[1]["rows"] == 30


def test_prm_refuses_train_eval(tmp_path: Path) -> None:
    from rewardlang.trainers.run import train

    with pytest.raises(ConfigError, match="train.eval measures a generating policy"):
        train("specs/prm.reward", sets={"train.eval": 3}, flags={"model": "tiny", "output_dir": str(tmp_path / "r")},
              progress=False)


@pytest.mark.slow
def test_grpo_train_problems_trains_on_the_subset_and_the_readme_lists_it(tmp_path: Path) -> None:
    from rewardlang.trainers.run import train

    run = tmp_path / "run"
    res = train("specs/quality_grpo.reward", sets={**SMALL, "train.train_problems": 3, "train.prompts_per_step": 1},
                flags={"model": "tiny", "output_dir": str(run), "max_steps": 1}, progress=False)
    ids = list(res.trainer.train_dataset["task_id"])
    assert len(ids) == 3 and not set(ids) & _held_ids()
    assert json.loads((run / "train-problems.json").read_text()) == {"train_problems": ids, "available": 162}
    assert f"trained on 3 of 162 problems (train.train_problems): {', '.join(ids)}" in (run / "README.md").read_text()
    _check_run(run)


def test_save_train_problems_makes_the_run_directory(tmp_path: Path) -> None:
    from rewardlang.trainers.report import save_train_problems

    run = tmp_path / "not" / "yet"  # a pretrained model saves no initial_model/ first: nothing made the directory
    save_train_problems(str(run), {"subset": ["HumanEval/1"], "available_rows": 9})
    assert json.loads((run / "train-problems.json").read_text()) == {"train_problems": ["HumanEval/1"], "available": 9}
    save_train_problems(str(tmp_path / "none"), {"rows": 3})  # no subset: nothing written
    assert not (tmp_path / "none").exists()


def test_present_rows_online_always_offline_only_with_a_presentation() -> None:
    from rewardlang.trainers.config import TrainConfig
    from rewardlang.trainers.data import render_prompt
    from rewardlang.trainers.gepo import PROMPT_TEXT, present_rows

    tok = build_tokenizer(512)
    plain = TrainConfig()
    rows = [{"prompt": "def f():\n"}]
    present_rows(rows, tok, plain, offline=True)  # a file without a presentation is taken as written
    assert PROMPT_TEXT not in rows[0]
    present_rows(rows, tok, plain, offline=False)  # online prompts always go through the chat template
    assert rows[0][PROMPT_TEXT] == render_prompt("def f():\n", tok, True) != "def f():\n"
    shown = TrainConfig(system_prompt="Answer in one block.", prompt_template="Task:\n{prompt}")
    present_rows(rows, tok, shown, offline=True)
    assert rows[0][PROMPT_TEXT] == render_prompt("def f():\n", tok, True, "Answer in one block.", "Task:\n{prompt}")
    assert "Answer in one block." in rows[0][PROMPT_TEXT] and "Task:\ndef f():" in rows[0][PROMPT_TEXT]


def test_plot_draws_smoothed_reward_per_component_and_the_before_after_pass_at_1(tmp_path: Path, monkeypatch) -> None:
    from matplotlib.figure import Figure

    from rewardlang.trainers.plot import SMOOTH, plot_run, smooth

    reward = [0.1 * (s % 4) for s in range(12)]
    fmt = [1.0 - 0.05 * s for s in range(12)]
    with open(tmp_path / "metrics.jsonl", "w", encoding="utf-8") as fh:
        for s in range(12):
            fh.write(json.dumps({"step": s + 1, "reward": reward[s], "reward_std": 0.1,
                                 "rewards/format/mean": fmt[s], "rewards/correct/mean": 0.5}) + "\n")
    (tmp_path / "eval.json").write_text(json.dumps({"before": {"pass@1": 0.1}, "after": {"pass@1": 0.3}}))
    figures: list[Figure] = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (figures.append(self), real(self, *a, **k))[1])
    assert plot_run(str(tmp_path)).endswith("curves.png") and (tmp_path / "curves.png").exists()
    axes = {ax.get_title(): ax for ax in figures[0].axes}
    # the reward panel: the raw steps and their SMOOTH-step moving average
    lines = axes["reward (mean ± std)"].get_lines()
    assert [list(ln.get_ydata()) for ln in lines] == [reward, smooth(reward, SMOOTH)]
    # one raw + one smoothed line per component
    comp = [list(ln.get_ydata()) for ln in axes["component rewards (mean)"].get_lines()]
    assert fmt in comp and smooth(fmt) in comp and len(comp) == 4
    bars = axes["held-out problems, greedy: before / after (95% CI)"].patches
    assert [b.get_height() for b in bars] == [0.1, 0.3]
    # with the spec's reward scored: pass@1 and reward, before then after, each with its interval
    side = {"pass@1": 0.1, "pass@1_ci95": [0.0, 0.2], "reward": {"mean": 0.4, "ci95": [0.3, 0.5]}}
    (tmp_path / "eval.json").write_text(json.dumps({
        "before": side, "after": {**side, "pass@1": 0.3, "pass@1_ci95": [0.1, 0.5], "reward": {"mean": 0.6, "ci95": [0.5, 0.7]}},
        "change": {"pass@1": {"mean": 0.2, "ci95": [0.1, 0.3]}}}))
    figures.clear()
    plot_run(str(tmp_path))
    bars = {ax.get_title(): ax for ax in figures[0].axes}["held-out problems, greedy: before / after (95% CI)"].patches
    ax = {ax.get_title(): ax for ax in figures[0].axes}["held-out problems, greedy: before / after (95% CI)"]
    bars = ax.patches
    assert [round(b.get_height(), 6) for b in bars] == [0.1, 0.4, 0.3, 0.6]
    # each bar's interval is drawn at the bar's centre from its ci95's low to its high end
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]
    drawn = sorted((round(float(s[0][0]), 6), round(float(min(s[0][1], s[1][1])), 6), round(float(max(s[0][1], s[1][1])), 6))
                   for s in segments)
    centres = [round(b.get_x() + b.get_width() / 2, 6) for b in bars]
    assert drawn == sorted(zip(centres, [0.0, 0.3, 0.1, 0.5], [0.2, 0.5, 0.5, 0.7]))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["before", "after"]


@pytest.mark.slow
def test_oorl_translation_run_records_heldout_eval_per_target(tmp_path: Path) -> None:
    """specs/oorl.reward on the translation data with train.eval = 2: the held-out split's problems (never in the
    train split) are evaluated in every target before and after, judged as the rule reward judges them, with
    pass@1 per target language and overall in eval.json and the run's README."""
    from rewardlang.trainers.data import load_rows, translation_heldout
    from rewardlang.trainers.run import train

    dataset = "translate:sh,js"
    held = translation_heldout(dataset, HELD)
    ids = {r["task_id"] for r in held}
    run = tmp_path / "run"
    res = train("specs/oorl.reward", sets={**SMALL, "train.eval_max_new_tokens": 8},
                flags={"model": "tiny", "output_dir": str(run), "max_steps": 1, "dataset": dataset}, progress=False)
    assert res.global_step == 1
    trained = {r["task_id"] for r in res.trainer.dataset}
    train_ids = {r["task_id"] for r in load_rows(dataset)[0]}
    assert trained == train_ids and not trained & ids  # nothing taken out of training, nothing held out trained on
    doc = json.loads((run / "eval.json").read_text())
    for when in ("before", "after"):
        s = doc[when]
        assert s["dataset"] == "translation" and set(s["by_language"]) == {"sh", "js"}
        assert s["scored"] == 2 * HELD and all(v["scored"] == HELD for v in s["by_language"].values())
        rows = [json.loads(line) for line in (run / f"eval-{when}.jsonl").read_text().splitlines()]
        assert sorted((r["language"], r["task_id"]) for r in rows) == sorted((r["language"], r["task_id"])
                                                                             for r in held)
        # the pass@1 figures are those of the per-answer outcomes (8 tokens of a random model: no fenced block)
        for lang in ("sh", "js"):
            mine = [r for r in rows if r["language"] == lang]
            assert s["by_language"][lang]["pass@1"] == sum(r["correct"] for r in mine) / len(mine)
        assert all(o == "format_error" for r in rows for o in r["outcomes"])
    readme = (run / "README.md").read_text()
    assert "translation problems never trained on" in readme and "per target language: sh" in readme
    assert readme.count(sorted(ids)[0]) == 1
