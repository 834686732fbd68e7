"""HumanEval through the sandbox: every canonical solution scores 1.0; each one with its return statements
replaced by ``return None`` scores below 1."""

from __future__ import annotations

import ast

import pytest

from rewardlang.datasets.humaneval import load_humaneval
from rewardlang.sandbox.runner import Task, get_sandbox


class _ReturnNone(ast.NodeTransformer):
    def visit_Return(self, node: ast.Return) -> ast.Return:
        return ast.copy_location(ast.Return(value=ast.Constant(None)), node)


def _broken(program: str) -> str:
    return ast.unparse(ast.fix_missing_locations(_ReturnNone().visit(ast.parse(program))))


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return load_humaneval()


def test_all_canonical_solutions_score_one(rows: list[dict[str, str]]) -> None:
    sb = get_sandbox()
    verdicts = sb.evaluate([Task(r["prompt"] + r["reference"], r["tests"], r["entry_point"], "humaneval")
                            for r in rows], use_cache=False)
    bad = [(r["task_id"], v.outcome, v.details()) for r, v in zip(rows, verdicts) if v.pass_rate != 1.0]
    assert bad == []
    assert all(v.outcome == "pass" and v.infra is None for v in verdicts)
    assert sum(v.total for v in verdicts) > 1000


@pytest.mark.slow
def test_return_none_versions_score_below_one(rows: list[dict[str, str]]) -> None:
    sb = get_sandbox()
    programs = [_broken(r["prompt"] + r["reference"]) for r in rows]
    assert all("return None" in p for p in programs)
    verdicts = sb.evaluate([Task(p, r["tests"], r["entry_point"], "humaneval") for p, r in zip(programs, rows)],
                           use_cache=False)
    too_good = [(r["task_id"], v.pass_rate) for r, v in zip(rows, verdicts) if v.pass_rate >= 1.0]
    assert too_good == []
    assert all(v.infra is None for v in verdicts)
