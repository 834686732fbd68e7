"""What the spec's audits cost a training step, at the settings of quality_grpo's CPU job (the main job until 2026-11-29), measured in one run with and without.

    python benchmarks/bench_audits.py [--steps 10] [--model smollm2]

quality_grpo's CPU job, the README's main job until 2026-11-29 (``specs/quality_grpo.reward``, ``examples/smollm2_cpu.yaml``: SmolLM2-135M-Instruct, LoRA,
one prompt of 4 completions of up to 128 tokens per step, one torch thread; held-out evaluation off) runs
``--steps`` GRPO steps in one process, its audits switched on at every even step and off at every odd one (step 1,
the warm-up, is left out of both): on an even step the spec's audits of samples (the hidden tests: ~90 extra inputs per problem in the sandbox), its
statistics, the five hack probes and the reference answer (each scored with the whole spec: tests, quality
analyzers) and the audited samples' file; on an odd step nothing of the audits. Steps alternate, so the machine's
load hits both sides alike.

Prints the step time with and without (medians of the audited and unaudited steps), the audit's own time per
audited step (``time/audit``) as a share of an unaudited step, and that share at the spec's period (the audits run
at step 1, every 5 steps and the last step: a fifth of the steps): the acceptance is <= 10 % at their period.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "specs", "quality_grpo.reward")
CONFIG = os.path.join(ROOT, "examples", "smollm2_cpu.yaml")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=11)
    ap.add_argument("--model", default="smollm2", help="smollm2 (the main job's) or tiny (a smoke run)")
    ap.add_argument("--summarise", metavar="RUN_DIR", help="only print the figures of an earlier run of this script "
                    "(its RUN_DIR/metrics.jsonl; a run cut short gives the figures of its steps so far)")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    if args.summarise:
        from rewardlang.trainers.metrics import read_metrics

        summarise(read_metrics(os.path.join(args.summarise, "metrics.jsonl")))
        return
    from rewardlang.trainers.audit import TrainingAudits
    from rewardlang.trainers.metrics import read_metrics
    from rewardlang.trainers.run import train

    class Alternating(TrainingAudits):
        """The run's audits, on at even steps (every audit of samples and the probes) and off at odd ones."""

        def observe(self, step, *a, **kw):  # type: ignore[no-untyped-def]
            if step % 2 == 1:
                return {}
            self.every_step = True
            return super().observe(step, *a, **kw)

    from rewardlang.trainers import grpo

    grpo.TrainingAudits = Alternating  # type: ignore[misc]  # the trainer builds this run's audits with it
    out = tempfile.mkdtemp(prefix="bench_audits_")
    result = train(SPEC, config_file=CONFIG, sets={"train.max_steps": args.steps, "train.eval": 0},
                   flags={"model": args.model, "output_dir": os.path.join(out, "run")}, progress=False)
    summarise(read_metrics(result.metrics_path))


def summarise(records: list[dict]) -> None:
    """Print the figures from a run's metrics records (the audited even steps against the unaudited odd ones)."""
    recs = [r for r in records if "train_runtime" not in r and "time/step" in r]
    on = [r for r in recs if r["step"] % 2 == 0]
    off = [r for r in recs if r["step"] % 2 == 1 and r["step"] > 1]
    t_on = statistics.median(r["time/step"] for r in on)
    t_off = statistics.median(r["time/step"] for r in off)
    t_audit = statistics.median(r.get("time/audit", 0.0) for r in on)
    per_step = t_audit / t_off
    period = 5  # quality_grpo's `every 5 steps`: steps 1, 5, 10, 15 of the main job's 15
    audited = sum(1 for s in range(1, 16) if s == 1 or s % period == 0 or s == 15)
    print(f"load: {os.getloadavg()[0]:.1f}  steps: {len(recs)} ({len(on)} audited, {len(off)} not, step 1 left out)")
    print(f"step time, median: with audits {t_on:.2f} s, without {t_off:.2f} s (ratio {t_on / t_off:.3f}x)")
    print(f"the audit's own time per audited step: {t_audit:.2f} s = {100 * per_step:.1f}% of an unaudited step")
    print(f"at the spec's period ({audited} of the main job's 15 steps audited): "
          f"+{100 * per_step * audited / 15:.1f}% of a step on average (acceptance: <= 10%)")
    print(f"hidden tests in the audited steps: {[round(r.get('audit/hidden', float('nan')), 3) for r in on]}")


if __name__ == "__main__":
    main()
