"""What the resume tests of every trainer share: stopping a run after step k, and killing a CLI run right after its
first checkpoint then resuming it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from transformers import TrainerCallback

from rewardlang.trainers.run import last_checkpoint


class StopAt(TrainerCallback):
    """Ends training after optimizer step ``k`` (after that step's checkpoint is written)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == self.k:
            control.should_training_stop = True


def kill_and_resume(base: list[str], tmp_path: os.PathLike[str]) -> tuple[str, str]:
    """Run the CLI command ``base`` to the end in ``full/``; in ``killed/`` SIGKILL it right after its first
    checkpoint, then finish it with ``--resume``. Returns ``(full, killed)`` for the caller to compare."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    full = os.path.join(tmp_path, "full")
    subprocess.run(base + ["--output", full], check=True, env=env, capture_output=True)
    killed = os.path.join(tmp_path, "killed")
    proc = subprocess.Popen(base + ["--output", killed], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while last_checkpoint(killed) is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not os.path.exists(os.path.join(killed, "final")), "the run finished before it could be killed"
    done = subprocess.run(base + ["--output", killed, "--resume"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return full, killed
