"""A toy preference task for the DPO/GEPO tests: completions that `return` something pass the spec's rule, others
fail. Prompts differ, completions vary, so held-out prompts measure whether the preference generalises."""

from __future__ import annotations

import json
from pathlib import Path

SPEC = """\
spec pref_toy "returns beat passes"

component rule in [0, 1] = 1 if contains(completion, "return") else 0

preference {
    pairs = "all",
    max_pairs = 4,
    winners = rule == 1,
    max_group = 6,
}
"""

WIN = ["return x", "return x + 1", "return y", "return 0", "return x * 2", "return n"]
LOSE = ["pass", "x = 1", "print(x)", "y = x", "pass  # todo", "x += 1"]


def raw_rows(prompts: range) -> list[dict]:
    """Three winners and three losers per prompt, rotated so prompts see different completions."""
    rows = []
    for k in prompts:
        for i in range(3):
            rows.append({"prompt": f"Task {k}\n", "completion": WIN[(k + i) % len(WIN)]})
            rows.append({"prompt": f"Task {k}\n", "completion": LOSE[(k + 2 * i) % len(LOSE)]})
    return rows


def write_data(tmp: Path, train: range = range(0, 12), held_out: range = range(12, 16)) -> dict[str, Path]:
    """spec, raw rows, and pairs/groups files mined with the spec (train and held-out prompts)."""
    from rewardlang.runtime.preference import mine_file
    import rewardlang

    spec = tmp / "pref_toy.reward"
    spec.write_text(SPEC, encoding="utf-8")
    prog = rewardlang.load(str(spec))
    out = {"spec": spec}
    for name, prompts in (("train", train), ("held_out", held_out)):
        raw = tmp / f"{name}.jsonl"
        raw.write_text("".join(json.dumps(r) + "\n" for r in raw_rows(prompts)), encoding="utf-8")
        mine_file(prog, str(raw), str(tmp / f"{name}_pairs.jsonl"))
        mine_file(prog, str(raw), str(tmp / f"{name}_groups.jsonl"), groups=True)
        out[f"{name}_pairs"] = tmp / f"{name}_pairs.jsonl"
        out[f"{name}_groups"] = tmp / f"{name}_groups.jsonl"
        out[f"{name}_raw"] = raw
    return out
