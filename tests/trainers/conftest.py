"""Fixtures the trainer tests share."""

from __future__ import annotations

import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOY_DIGITS = os.path.join(HERE, "toy_digits.reward")
# 5 prompts, 2 per step: an epoch is 2 steps, so the 6-step runs cross epochs and resume mid-epoch (after step 3)
GRPO_RESUME_SETS = {"train.max_steps": 6, "train.save_steps": 3, "train.max_completion_length": 8,
                    "train.prompts_per_step": 2}


@pytest.fixture(scope="session")
def grpo_resume_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A 6-step toy GRPO run (checkpoints at steps 3 and 6), and the same run stopped after step 3 and resumed; the
    stopped run was writing step 4's record when it ended (half a line, as a killed run leaves it). Trained once for
    the session: tests/trainers/test_grpo_resume.py and test_resume_faults.py read it (copy it to change it)."""
    from resume_kit import StopAt

    from rewardlang.trainers.grpo import last_checkpoint, train

    tmp = tmp_path_factory.mktemp("grpo_resume")
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Task {i}: say it."}) + "\n" for i in range(5)))
    flags = {"dataset": str(prompts), "seed": 3}
    sets = GRPO_RESUME_SETS
    full = train(TOY_DIGITS, sets=sets, flags={**flags, "output_dir": str(tmp / "full")}, progress=False)
    part = train(TOY_DIGITS, sets=sets, flags={**flags, "output_dir": str(tmp / "part")}, progress=False,
                 callbacks=[StopAt(3)])
    part_step, part_last = part.global_step, last_checkpoint(part.run_dir)
    with open(tmp / "part" / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 4, "reward": 0.1, "lo')
    resumed = train(TOY_DIGITS, sets=sets, flags={**flags, "output_dir": str(tmp / "part")}, progress=False,
                    resume=True)
    return {"full": full, "part_step": part_step, "part_last": part_last, "resumed": resumed, "flags": flags, "sets": sets,
            "spec": TOY_DIGITS}
