"""specs/constructs.reward: it checks, it is canonical, its hand-computed examples pass, and it really uses every
construct of the language (syntax nodes, built-in text functions, language functions, regex flags, clauses).

Also: every shipped spec (``specs/*.reward``) passes ``rewardlang check``, and the known gaps of the language that
constructs.reward has to leave out are pinned as expected failures (they turn into XPASS when fixed).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rewardlang
from rewardlang import syntax as S
from rewardlang.checker import LANGUAGE_FUNCS, MATH_FUNCS
from rewardlang.cli import app
from rewardlang.diagnostics import SpecError
from rewardlang.fmt import format_source
from rewardlang.parser import parse
from rewardlang.runtime import registry

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "constructs.reward"
HELPERS = ROOT / "specs" / "lib" / "constructs_helpers.reward"
SHIPPED = sorted((ROOT / "specs").glob("*.reward"))

WELL_FORMED = "Step 1: add 1 and 2.\n<think>easy</think>\n<answer>\n```python\nprint(1 + 2)\n```\n3\n</answer>"


@pytest.fixture(scope="module")
def prog() -> rewardlang.runtime.program.Program:  # type: ignore[name-defined]
    return rewardlang.load(str(SPEC))


def _row(prog, step: int = 0, **cols):  # type: ignore[no-untyped-def]
    base = {"prompt": "Add 1 and 2.", "task": "t", "expected": "3", "reference": None, "difficulty": 2.0,
            "verified": True}
    base.update(cols)
    return prog.score(**{k: [v] for k, v in base.items()}, step=step)


# ---------------------------------------------------------------------- check, fmt, examples

def test_check_passes_on_constructs_and_every_shipped_spec() -> None:
    assert SPEC in SHIPPED
    result = CliRunner().invoke(app, ["check", *map(str, SHIPPED)])
    assert result.exit_code == 0, result.output
    for spec in SHIPPED:
        assert f"ok  {spec}" in result.output


@pytest.mark.parametrize("path", [SPEC, HELPERS], ids=lambda p: p.name)
def test_canonical_format(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    assert format_source(src, str(path)) == src
    result = CliRunner().invoke(app, ["fmt", "--check", str(path)])
    assert result.exit_code == 0, result.output


def test_examples_pass(prog) -> None:  # type: ignore[no-untyped-def]
    results = prog.run_examples()
    names = [name for name, _, _, _ in results]
    assert len(results) >= 6
    assert "advantages over task groups" in names
    failures = {name: f for name, _, _, f in results if f}
    assert failures == {}


def test_examples_are_single_and_multi_row_with_advantages(prog) -> None:  # type: ignore[no-untyped-def]
    examples = prog.spec["examples"]
    multi = [e for e in examples if len(e["rows"]) > 1]
    assert multi and any(len(e["rows"]) == 1 for e in examples)
    adv = [e for e in multi if any(name == "advantage" for name, _, _ in e["expects"])]
    assert adv, "a multi-row example must check advantages"
    groups = {r["task"] for r in adv[0]["rows"]}
    assert len(groups) >= 3
    assert any(v is None for _, vals, _ in adv[0]["expects"] for v in vals), "a masked row"
    assert any("step" in e["rows"][0] for e in examples), "an example at a later training step"


def test_the_only_warning_is_the_deliberate_w004(prog) -> None:  # type: ignore[no-untyped-def]
    assert [(w.code, "`correct`" in w.message) for w in prog.warnings] == [("W004", True)]


def test_examples_catch_a_wrong_expectation(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / HELPERS.name).write_text(HELPERS.read_text(encoding="utf-8"), encoding="utf-8")
    src = SPEC.read_text(encoding="utf-8").replace("expect length_fit = 0.05165289256198347",
                                                   "expect length_fit = 0.0516")
    (tmp_path / "c.reward").write_text(src, encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(tmp_path / "c.reward")])
    assert result.exit_code == 1
    assert "E403" in result.output and "length_fit" in result.output


# ---------------------------------------------------------------------- the spec uses every construct

def _walk(node: object):  # type: ignore[no-untyped-def]
    if isinstance(node, S.Node):
        yield node
        for f in node.__dataclass_fields__:
            yield from _walk(getattr(node, f))
    elif isinstance(node, (list, tuple)):
        for x in node:
            yield from _walk(x)


def _nodes() -> list[S.Node]:
    out: list[S.Node] = []
    for path in (SPEC, HELPERS):
        out += list(_walk(parse(path.read_text(encoding="utf-8"), str(path)).body))
    return out


def test_every_syntax_node_kind_occurs() -> None:
    kinds = {type(n).__name__ for n in _nodes()}
    every = {name for name, obj in vars(S).items()
             if isinstance(obj, type) and issubclass(obj, S.Node) and obj is not S.Node}
    assert every - kinds == set()


def test_every_statement_form_and_clause() -> None:
    nodes = _nodes()
    imports = [n for n in nodes if isinstance(n, S.Import)]
    assert any(i.names is None for i in imports) and any(i.names for i in imports)
    params = [n for n in nodes if isinstance(n, S.Param)]
    assert {p.type.text for p in params if p.type} >= {"number", "bool", "text"}
    assert all(p.doc for p in params)
    inputs = [n for n in nodes if isinstance(n, S.Input)]
    types = {i.type.text for i in inputs}
    assert {"text", "code?", "number?", "bool", "group"} <= types
    assert any(i.column for i in inputs), "an input renamed with from \"col\""
    comps = [n for n in nodes if isinstance(n, S.Component)]
    assert all(c.range is not None for c in comps)
    for clause in ("on_error", "timeout", "spans"):
        assert any(getattr(c, clause) is not None for c in comps), clause
    audits = [n for n in nodes if isinstance(n, S.Audit)]
    for clause in ("every", "window", "margin", "on_error", "timeout", "range"):
        assert any(getattr(a, clause) is not None for a in audits), clause
    assert any(isinstance(a.value, S.Call) and a.value.func == "group_collapse" for a in audits), "a statistic"
    adv = next(n for n in nodes if isinstance(n, S.Advantage))
    assert adv.each_component and any(st.scope is not None for st in adv.stages)
    assert any(isinstance(n, S.Example) and n.name for n in nodes)
    assert any(isinstance(n, S.ExampleExpect) and n.tolerance is not None for n in nodes)
    assert any(isinstance(n, S.Section) and n.kind == "train" for n in nodes)
    assert any(isinstance(n, S.Reward) for n in nodes)
    ops = {n.op for n in nodes if isinstance(n, (S.BinOp, S.Compare, S.BoolOp, S.Unary))}
    assert {"+", "-", "*", "/", "%", "**", "<", "<=", ">=", "==", "and", "or"} <= ops
    flags = "".join(n.flags for n in nodes if isinstance(n, S.Regex))
    assert set("imsx") <= set(flags)


def test_every_builtin_text_function_and_language_function_is_called() -> None:
    called = {n.func for n in _nodes() if isinstance(n, S.Call)}
    builtin = {name for name, impl in registry.load_all().items()
               if impl.module == "rewardlang.runtime.components.text"}
    assert builtin - called == set()
    # `std` is an advantage aggregate (used through `standardize(ddof=1)`), `constant_then` is not implemented
    # (see test_constant_then_schedule below)
    wanted = (LANGUAGE_FUNCS | MATH_FUNCS) - {"std", "constant_then"}
    assert wanted - called == set()
    src = SPEC.read_text(encoding="utf-8")
    assert "standardize(ddof=1)" in src and " then sum then over batch: " in src
    assert "median" in src and "then tanh" in src and "clip(-1, 1)" in src


# ---------------------------------------------------------------------- behaviour beyond the examples

def test_spans_land_on_the_completion(prog) -> None:  # type: ignore[no-untyped-def]
    text = WELL_FORMED + "\n# TODO: tidy\n# FIXME"
    out = _row(prog, completion=text)
    (code_span,) = out.spans["structure"][0]
    assert text[code_span.start:code_span.end] == "print(1 + 2)"
    assert (code_span.value, code_span.label) == (1.0, "code")
    todo = out.spans["hygiene"][0]
    assert [text[s.start:s.end] for s in todo] == ["TODO", "FIXME"]
    assert {(s.value, s.label) for s in todo} == {(-0.25, "todo")}
    assert math.isclose(out.components["hygiene"][0], -0.5)


def test_timeout_and_ranges_reach_the_program(prog) -> None:  # type: ignore[no-untyped-def]
    info = {c.name: c for c in prog.components}
    assert info["hygiene"].timeout == 2.0 and info["hygiene"].on_error == -1.0
    assert info["length_fit"].on_error == 0.0 and info["length_fit"].on_error_given
    assert info["correct"].range == (0.0, 1.0) and not info["correct"].on_error_given
    assert prog.input("task").column == "task_id" and prog.input("expected").column == "answer"
    assert prog.input("expected").nullable and not prog.input("verified").nullable


def test_weights_follow_the_schedules(prog) -> None:  # type: ignore[no-untyped-def]
    assert prog.weights(0)["brevity"] == 1.0 and prog.weights(0)["steps"] == 0.0
    assert math.isclose(prog.weights(500)["brevity"], 0.5)
    assert prog.weights(5000)["brevity"] == 0.0
    assert math.isclose(prog.weights(100)["steps"], 0.5) and prog.weights(150)["steps"] == 1.0
    assert prog.weights(0)["correct"] == 2.0 and prog.weights(0)["hygiene"] == 0.5


def test_params_can_be_overridden() -> None:
    strict = rewardlang.load(str(SPEC), params={"strict": "true"})
    assert strict.weights(0)["hygiene"] == 1.0
    bare = "Thus:\n```\nprint(1 + 2)\n```"
    assert _row(strict, completion=bare).spans["structure"][0][0].start == -1  # no python block: code is ""
    loose = rewardlang.load(str(SPEC))
    assert _row(loose, completion=bare).spans["structure"][0][0].start == bare.index("print")
    tagged = rewardlang.load(str(SPEC), params={"answer_tag": "final", "keywords": '["thus"]'})
    out = _row(tagged, completion="<final>3</final> thus")
    assert out.components["correct"][0] == 1.0 and out.components["grounded"][0] == 1.0
    with pytest.raises(SpecError) as exc:
        rewardlang.load(str(SPEC), params={"max_words": "many"})
    assert "E602" in {d.code for d in exc.value.diagnostics}


def test_train_section_resolves(prog) -> None:  # type: ignore[no-untyped-def]
    from rewardlang.trainers.config import resolve_config

    assert prog.train["num_generations"] == 2 and prog.train["max_steps"] == 1000
    cfg, sources = resolve_config(spec_train=prog.train)
    assert (cfg.num_generations, cfg.prompts_per_step, cfg.batch_size, cfg.beta) == (2, 2, 4, 0.04)
    assert sources["learning_rate"] == "spec train section"


# ---------------------------------------------------------------------- gaps constructs.reward leaves out

def test_list_input_next_to_other_inputs() -> None:
    prog = rewardlang.loads('input keywords: list[text]\n'
                            'component hit in [0, 1] = 1 if contains(completion, keywords[0]) else 0\n')
    out = prog.score(completion=["a print", "b"], keywords=[["print"], ["x"]])
    assert out.components["hit"].tolist() == [1.0, 0.0]


def test_compare_with_none() -> None:
    prog = rewardlang.loads('component has in [0, 1] = 1 if tag(completion, "a") != none else 0\n')
    assert prog.score(completion=["<a></a>", "x"]).components["has"].tolist() == [1.0, 0.0]


def test_only_linear_and_cosine_are_schedules() -> None:
    with pytest.raises(SpecError) as exc:
        rewardlang.loads("component a = 1\na.weight = constant_then(1 -> 2, steps=10)\n")
    assert [d.code for d in exc.value.diagnostics] == ["E102"]


def test_set_reaches_a_param_declared_in_spec_and_import(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "p.reward").write_text("param k: number = 1\n", encoding="utf-8")
    (tmp_path / "m.reward").write_text('import "lib/p.reward"\nparam k: number = 2\ncomponent c = k\n',
                                       encoding="utf-8")
    assert rewardlang.load(str(tmp_path / "m.reward"), params={"k": "7"}).params["k"] == 7.0


def test_chat_prompts_form_separate_groups() -> None:
    prog = rewardlang.loads("component a = len(completion)\nadvantage over group(prompt) = center\n")
    p1, p2 = [{"role": "user", "content": "write f"}], [{"role": "user", "content": "write g"}]
    out = prog.score(completion=["a", "abc", "ab", "abcd"], prompt=[p1, p1, p2, p2])
    assert out.advantages.tolist() == [-1.0, 1.0, -1.0, 1.0]


def test_any_of_one_none_item_is_false() -> None:
    prog = rewardlang.loads("input p: text?\ncomponent a = number(any(contains(completion, p)))\n")
    assert prog.score(completion=["x"], p=[None]).components["a"].tolist() == [0.0]
