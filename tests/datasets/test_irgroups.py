"""GEPO's IR groups: normalisation, mutation operators, execution-verified winners and losers, the command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from rewardlang.datasets import cfuncs, irgroups
from rewardlang.datasets.irgroups import build_group, mutants, normalize_ir


def _need_clang() -> None:
    if shutil.which("clang") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("clang is missing (CI=true: scripts/install.sh installs it)")
        pytest.skip("clang is not installed")


GCD_O0 = """; ModuleID = 'f.c'
source_filename = "f.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; Function Attrs: noinline nounwind optnone uwtable
define dso_local i32 @gcd(i32 noundef %0, i32 noundef %1) #0 {
  %3 = alloca i32, align 4
  store i32 %0, i32* %3, align 4
  br label %4

4:                                                ; preds = %2
  %5 = load i32, i32* %3, align 4, !tbaa !3
  br label %4, !llvm.loop !6
}

attributes #0 = { noinline nounwind optnone uwtable "frame-pointer"="all" }

!llvm.module.flags = !{!0, !1}
!0 = !{i32 1, !"wchar_size", i32 4}
!6 = distinct !{!6, !7}
"""


def test_normalize_golden() -> None:
    assert normalize_ir(GCD_O0) == (
        "define i32 @gcd(i32 %0, i32 %1) {\n"
        "  %3 = alloca i32, align 4\n"
        "  store i32 %0, i32* %3, align 4\n"
        "  br label %4\n"
        "\n"
        "4:\n"
        "  %5 = load i32, i32* %3, align 4\n"
        "  br label %4\n"
        "}\n")


def test_normalize_keeps_semicolons_in_strings() -> None:
    ir = '@.str = private unnamed_addr constant [4 x i8] c"a;b\\00", align 1 ; comment\n'
    assert normalize_ir(ir) == '@.str = private constant [4 x i8] c"a;b\\00", align 1\n'


def test_normalize_is_idempotent_on_real_output(tmp_path) -> None:
    _need_clang()
    (tmp_path / "f.c").write_text(cfuncs.corpus()[0].source)
    for lv in irgroups.LEVELS:
        subprocess.run(["clang", lv, "-S", "-emit-llvm", "f.c", "-o", "f.ll"], cwd=tmp_path, check=True)
        once = normalize_ir((tmp_path / "f.ll").read_text())
        assert normalize_ir(once) == once
        assert "!" not in once.replace("!=", "") and "#0" not in once and "target" not in once


SMALL = ("define i32 @f(i32 %0, i32 %1) {\n"
         "  %3 = icmp slt i32 %0, %1\n"
         "  br i1 %3, label %4, label %6\n"
         "\n"
         "4:\n"
         "  %5 = sub nsw i32 %1, %0\n"
         "  ret i32 %5\n"
         "\n"
         "6:\n"
         "  %7 = add nsw i32 %0, 7\n"
         "  %8 = select i1 %3, i32 %7, i32 %1\n"
         "  ret i32 %8\n"
         "}\n")


def test_each_operator_rewrites_one_site() -> None:
    got: dict[str, list[str]] = {}
    for op, text in mutants(SMALL):
        diff = [(a, b) for a, b in zip(SMALL.split("\n"), text.split("\n")) if a != b]
        got.setdefault(op, []).append(diff[0][1].strip() if diff else "")
    assert got["icmp_flip"] == ["%3 = icmp sge i32 %0, %1"]
    assert got["branch_swap"] == ["br i1 %3, label %6, label %4"]
    assert got["operand_swap"] == ["%5 = sub nsw i32 %0, %1"]
    assert sorted(got["opcode_swap"]) == ["%5 = add nsw i32 %1, %0", "%7 = sub nsw i32 %0, 7"]
    assert got["constant"] == ["%7 = add nsw i32 %0, 8"]
    assert got["select_swap"] == ["%8 = select i1 %3, i32 %1, i32 %7"]
    assert "drop_store" not in got  # no store in SSA form


def test_mutants_are_deterministic_and_distinct_from_the_original() -> None:
    a, b = list(mutants(SMALL)), list(mutants(SMALL))
    assert a == b and all(t != SMALL for _, t in a)


def _run_with(harness_obj: str, ir: str, tmp) -> int:
    (tmp / "x.ll").write_text(ir)
    subprocess.run(["clang", "-O0", "-w", harness_obj, "x.ll", "-o", "x", "-lm"], cwd=tmp, check=True)
    return subprocess.run([str(tmp / "x")], cwd=tmp, timeout=30).returncode


# The check (every winner and loser linked again against the harness) is the same for every function: integer code
# (gcd) and pointer/float code (dot) in the default run; count_vowels (a char pointer walk, 3-4 s: the most mutants)
# in the slow run.
@pytest.mark.parametrize("name", ["gcd", pytest.param("count_vowels", marks=pytest.mark.slow), "dot"])
def test_group_members_verified_independently(name: str, tmp_path) -> None:
    """Every winner passes the harness and every loser fails it, checked here by linking each text again."""
    _need_clang()
    fn = next(f for f in cfuncs.corpus() if f.name == name)
    row = cfuncs.rows([fn])[0]
    res = build_group(row, losers=3, seed=1)
    assert res.error is None, res.error
    g = res.group
    assert g["id"] == name and row["source"] in g["prompt"] and "LLVM IR" in g["prompt"]
    assert 2 <= len(g["winners"]) <= 6 and len(set(g["winners"])) == len(g["winners"])
    assert res.distinct == len(g["winners"]) + res.winners_failed and res.levels == 6
    assert 1 <= len(g["losers"]) <= 3 and not set(g["losers"]) & set(g["winners"])
    (tmp_path / "h.c").write_text(row["harness"])
    subprocess.run(["clang", "-O0", "-w", "-c", "h.c", "-o", "h.o"], cwd=tmp_path, check=True)
    for w in g["winners"]:
        assert _run_with("h.o", w, tmp_path) == 0
    for loser in g["losers"]:
        assert _run_with("h.o", loser, tmp_path) != 0
    assert sum(res.killed.values()) == len(g["losers"])


def test_harness_that_fails_on_the_source_is_named() -> None:
    _need_clang()
    row = {"id": "bad", "source": "int f(int x) { return x + 1; }\n",
           "harness": "int f(int);\nint main(void) { return f(1) != 3; }\n"}
    res = build_group(row)
    assert res.group is None and "no IR of the source passes its harness" in res.error


def test_uncompilable_rows_are_named() -> None:
    _need_clang()
    res = build_group({"id": "x", "source": "int f(int x) { return x +; }\n", "harness": "int main(void){}\n"})
    assert res.group is None and "does not compile at -O0" in res.error
    res = build_group({"id": "x", "source": "int f(int x) { return x; }\n", "harness": "int main(void) { oops }"})
    assert res.group is None and "harness does not compile" in res.error
    assert build_group({"id": "x", "source": "", "harness": "int main(void){}"}).error == \
        "`source` must be a non-empty string"


def test_harnesses_record_the_source_behaviour(tmp_path) -> None:
    """The recorded harness passes on its own source and fails when one recorded value is changed."""
    _need_clang()
    fn = next(f for f in cfuncs.corpus() if f.name == "horner")
    row = cfuncs.rows([fn])[0]
    (tmp_path / "f.c").write_text(row["source"])
    (tmp_path / "h.c").write_text(row["harness"])
    subprocess.run(["clang", "-w", "f.c", "h.c", "-o", "ok"], cwd=tmp_path, check=True)
    assert subprocess.run([str(tmp_path / "ok")]).returncode == 0
    (tmp_path / "g.c").write_text(row["source"].replace("0.25", "0.5"))
    subprocess.run(["clang", "-w", "g.c", "h.c", "-o", "bad"], cwd=tmp_path, check=True)
    assert subprocess.run([str(tmp_path / "bad")]).returncode != 0


def test_corpus_is_large_and_named_uniquely() -> None:
    fns = cfuncs.corpus()
    assert len(fns) >= 100 and len({f.name for f in fns}) == len(fns)
    assert all(f.inputs for f in fns)


def _cli(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlang", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_command_writes_groups_gepo_reads(tmp_path) -> None:
    _need_clang()
    rows = cfuncs.rows([f for f in cfuncs.corpus() if f.name in ("fib", "is_sorted")])
    rows.append({"id": "never", "source": "int g(int x) { return x; }\n",
                 "harness": "int g(int);\nint main(void) { return g(2) != 3; }\n"})
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = _cli("ir-groups", "-i", "f.jsonl", "-o", "g.jsonl", "--losers", "2", "--workers", "2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "wrote 2 group(s) of 3 function(s)" in p.stderr and "skipped never: no IR" in p.stderr
    assert "survived" in p.stderr and "hung" in p.stderr
    groups = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert [g["id"] for g in groups] == ["fib", "is_sorted"]
    from rewardlang.trainers.gepo import load_groups  # the reader `rewardlang train` uses for GEPO

    read = load_groups(str(tmp_path / "g.jsonl"), "groups")
    assert [len(r["winners"]) for r in read] == [len(g["winners"]) for g in groups]


def test_command_bad_rows_are_located_and_nothing_is_written(tmp_path) -> None:
    (tmp_path / "f.jsonl").write_text('{"id": "a", "source": "int f(void){return 1;}", "harness": "x"}\n'
                                      '{"id": "b", "source": 5}\nnot json\n')
    p = _cli("ir-groups", "-i", "f.jsonl", "-o", "g.jsonl", cwd=tmp_path)
    assert p.returncode == 1
    assert "f.jsonl:2: `source`, `harness` must be non-empty strings" in p.stderr
    assert "f.jsonl:3: invalid JSON" in p.stderr and "2 bad row(s)" in p.stderr
    assert not (tmp_path / "g.jsonl").exists() and "Traceback" not in p.stderr
