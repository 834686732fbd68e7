"""DPO on PRLCoder's process pairs (Eq. 4): `rewardlang prm-data`'s dpo.jsonl trains through the spec-driven DPO
trainer with specs/prlcoder_dpo.reward, whose settings are the paper's (lr 5e-6, 3 epochs, linear schedule with
warm-up) and β 0.1; epochs, not max_steps, decide the run's length."""

from __future__ import annotations

import json
import math
import os

from typer.testing import CliRunner

from rewardlang.cli import app
from rewardlang.trainers.config import resolve_config
from rewardlang.trainers.dpo import dpo_args
from rewardlang.trainers.metrics import read_metrics
from rewardlang.trainers.run import train

SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "specs", "prlcoder_dpo.reward")


def test_the_spec_sets_the_papers_dpo_settings(tmp_path) -> None:
    import rewardlang

    cfg, sources = resolve_config(rewardlang.load(SPEC).train)
    args = dpo_args(cfg, sources, str(tmp_path))
    assert (cfg.algorithm, cfg.preference_data) == ("dpo", "data/prm/dpo.jsonl")
    assert args.learning_rate == 5e-6 and args.num_train_epochs == 3 and args.max_steps == -1
    assert getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type) == "linear" and args.warmup_steps == 0.1 and args.beta == 0.1
    cfg, sources = resolve_config(rewardlang.load(SPEC).train, cli_sets={"max_steps": 5})
    assert dpo_args(cfg, sources, str(tmp_path)).max_steps == 5  # a layer that sets max_steps wins


def test_prm_data_pairs_train_through_the_dpo_trainer(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    rows = [{"task_id": "sq", "prompt": "def sq(x):\n", "reference": "    y = x * x\n    return y\n",
             "tests": ["assert sq(3) == 9", "assert sq(0) == 0"], "entry_point": "sq"},
            {"task_id": "inc", "prompt": "def inc(x):\n", "reference": "    if x > 0:\n        return x + 1\n"
             "    return x + 1\n", "tests": ["assert inc(1) == 2", "assert inc(-3) == -2"], "entry_point": "inc"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["prm-data", "--dataset", str(path), "-o", str(tmp_path / "data"), "--level", "line"])
    assert res.exit_code == 0, res.output
    pairs = [json.loads(x) for x in (tmp_path / "data" / "dpo.jsonl").read_text().splitlines()]
    assert len(pairs) >= 3 and all(p["chosen"] != p["rejected"] for p in pairs)
    # the spec as shipped, pointed at these pairs: 3 epochs of ceil(n / 2) steps (2 pairs a step)
    run = train(SPEC, sets={"train.preference_data": str(tmp_path / "data" / "dpo.jsonl")},
                flags={"output_dir": str(tmp_path / "run")}, progress=False)
    assert run.config.algorithm == "dpo" and run.global_step == 3 * math.ceil(len(pairs) / 2)
    logged = [m for m in read_metrics(run.metrics_path) if "loss" in m]
    assert logged and all(math.isfinite(m["loss"]) for m in logged) and "rewards/accuracies" in logged[0]
    lrs = [m["learning_rate"] for m in logged if "learning_rate" in m]
    assert max(lrs) <= 5e-6 + 1e-12 and lrs[-1] < max(lrs)  # warm-up to 5e-6, then the linear decay
    assert os.path.exists(tmp_path / "run" / "final" / "config.json")
