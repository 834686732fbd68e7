"""Run-time semantics of compiled specs: none, `or` defaults, conditionals, per-sample errors and the
component policies (on_error, masking, declared ranges), weights and schedules, overrides, imports, chat
completions, data errors, spans in completion coordinates and TRL reward functions."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import rewardlang
from rewardlang.runtime.api import Span
from rewardlang.runtime.program import DataError


def vals(a: np.ndarray) -> list:
    """Array values with NaN as None (masked)."""
    return [None if x != x else float(x) for x in a]


# ---------------------------------------------------------------- none and `or`


def test_none_propagates_through_functions_and_arithmetic_and_masks_the_sample() -> None:
    p = rewardlang.loads('''
let a = tag(completion, "a")
component length = len(a)
component twice = len(a) * 2 + 1
component stripped = len(strip(a))
''')
    out = p.score(completion=["<a> xy </a>", "no tag", "<a></a>"])
    assert vals(out.components["length"]) == [4.0, None, 0.0]
    assert vals(out.components["twice"]) == [9.0, None, 1.0]
    assert vals(out.components["stripped"]) == [2.0, None, 0.0]
    assert out.masked["length"].tolist() == [False, True, False]
    assert out.errors["length"] == [None, None, None]  # none is not an error
    assert vals(out.total) == [15.0, None, 1.0]  # a masked component masks the total
    assert out.stats["masked_total"] == 1


def test_or_gives_a_default_for_none_only() -> None:
    p = rewardlang.loads('''
let a = tag(completion, "a")
component n = len(a) or -1
component m = count(a or "zz", "z")
component k = min(len(a), 5) or 0
''')
    out = p.score(completion=["<a>xy</a>", "nothing", "<a>abcdefgh</a>", "<a></a>"])
    assert vals(out.components["n"]) == [2.0, -1.0, 8.0, 0.0]   # 0 is a value, not none
    assert vals(out.components["m"]) == [0.0, 2.0, 0.0, 0.0]    # "" is a value, not none
    assert vals(out.components["k"]) == [2.0, 0.0, 5.0, 0.0]
    assert not any(out.masked[c].any() for c in ("n", "m", "k"))


def test_none_in_conditions_counts_as_false() -> None:
    p = rewardlang.loads('component c = 1 if len(tag(completion, "a")) > 1 else 0')
    out = p.score(completion=["<a>xyz</a>", "none here"])
    assert vals(out.components["c"]) == [1.0, 0.0]


def test_comparing_with_none_tests_presence() -> None:
    p = rewardlang.loads('component c = 1 if tag(completion, "a") != none else 0')
    out = p.score(completion=["<a>x</a>", "nothing"])
    assert vals(out.components["c"]) == [1.0, 0.0]


# ---------------------------------------------------------------- errors, conditionals, policies


def test_division_by_zero_is_a_per_sample_error_that_masks() -> None:
    p = rewardlang.loads("component d = 1 / (len(completion) - 3)\ncomponent ok = 1")
    out = p.score(completion=["abcd", "abc", "a"])
    assert vals(out.components["d"]) == [1.0, None, -0.5]
    assert out.errors["d"] == [None, "division by zero", None]
    assert out.masked["d"].tolist() == [False, True, False]
    assert out.errors["ok"] == [None, None, None] and vals(out.components["ok"]) == [1.0, 1.0, 1.0]
    assert vals(out.total) == [2.0, None, 0.5]
    assert out.stats["errors:d"] == 1


def test_on_error_replaces_a_failed_sample() -> None:
    p = rewardlang.loads("component d = 1 / (len(completion) - 3)\n    on_error -5")
    out = p.score(completion=["abcd", "abc"])
    assert vals(out.components["d"]) == [1.0, -5.0]
    assert out.masked["d"].tolist() == [False, False]
    assert out.errors["d"] == [None, "division by zero"]  # still reported
    p = rewardlang.loads("component d = 1 / (len(completion) - 3)\n    on_error none")
    assert vals(p.score(completion=["abc"]).components["d"]) == [None]


def test_other_per_sample_errors() -> None:
    p = rewardlang.loads("component l = log(len(completion))\ncomponent s = sqrt(len(completion) - 2)")
    out = p.score(completion=["", "abc"])
    assert out.errors["l"] == ["log of a number that is not positive", None]
    assert out.errors["s"] == ["square root of a negative number", None]
    assert vals(out.components["l"]) == [None, pytest.approx(math.log(3))]


def test_untaken_branches_raise_no_errors() -> None:
    p = rewardlang.loads('''
let zero = len(completion) * 0
component a = 1 if len(completion) == 3 else 1 / (len(completion) - 3)
component b = number(len(completion) > 3 and 1 / (len(completion) - 3) > 0)
component c = number(len(completion) == 3 or 1 / (len(completion) - 3) > 0)
component d = step(len(completion), <= 2: 1 / zero, else: 7)
component e = len(tag(completion, "x") or "default") / (len(completion) - 3)
''')
    out = p.score(completion=["abc", "abcde", "a"])
    assert vals(out.components["a"]) == [1.0, 0.5, -0.5]
    assert vals(out.components["b"]) == [0.0, 1.0, 0.0]
    assert vals(out.components["c"]) == [1.0, 1.0, 0.0]
    assert vals(out.components["d"]) == [7.0, 7.0, None]       # the taken arm's error counts
    assert out.errors["d"] == [None, None, "division by zero"]
    assert out.errors["a"] == out.errors["b"] == out.errors["c"] == [None, None, None]
    assert vals(out.components["e"]) == [None, 3.5, -3.5]


def test_taken_branch_errors_do_propagate() -> None:
    p = rewardlang.loads("component a = 1 if len(completion) != 3 else 1 / (len(completion) - 3)")
    out = p.score(completion=["abc", "ab"])
    assert out.errors["a"] == ["division by zero", None] and vals(out.components["a"]) == [None, 1.0]


def test_declared_range_violation_is_an_error_not_clipped() -> None:
    p = rewardlang.loads("component g in [0, 3] = len(completion)\ncomponent h in [0, 3] = len(completion)\n"
                         "    on_error 0")
    out = p.score(completion=["ab", "abcd", "abc"])
    assert vals(out.components["g"]) == [2.0, None, 3.0]   # masked, not clipped to 3
    assert out.errors["g"] == [None, "value 4 outside the declared range [0, 3]", None]
    assert vals(out.components["h"]) == [2.0, 0.0, 3.0]   # on_error, not 3
    assert out.errors["h"][1] == "value 4 outside the declared range [0, 3]"
    assert out.stats["errors:g"] == 1


def test_function_errors_follow_on_error() -> None:
    p = rewardlang.loads('component c = len(extract(completion, /(a)/, group=2) or "")\n    on_error 9')
    out = p.score(completion=["xay"])
    # the pattern has no group 2: the call fails for the sample that matched
    assert vals(out.components["c"]) == [9.0]
    assert out.errors["c"][0] is not None and "no group 2" in out.errors["c"][0]


def test_one_samples_function_error_does_not_fail_the_others() -> None:
    # a group the pattern lacks is a mistake of the spec: every sample fails alike, in any batch
    p = rewardlang.loads('component c = len(extract(completion, /(a)/, group=2) or "")\n    on_error 9')
    assert vals(p.score(completion=["xyz"]).components["c"]) == [9.0]
    assert vals(p.score(completion=["xay", "xyz"]).components["c"]) == [9.0, 9.0]
    q = rewardlang.loads('component c = len(extract(completion, /(a)|(b)/, group=2) or "")\n    on_error 9')
    assert vals(q.score(completion=["xay", "xby", "xyz"]).components["c"]) == [0.0, 1.0, 0.0]


# ---------------------------------------------------------------- weights and schedules


def test_linear_schedule_at_several_steps() -> None:
    p = rewardlang.loads("component acc = len(completion)\nacc.weight = linear(2.0 -> 1.0, steps=10)\n"
                         "component one = 1")
    for step, w in [(0, 2.0), (1, 1.9), (5, 1.5), (10, 1.0), (11, 1.0), (1000, 1.0)]:
        assert p.weights(step)["acc"] == pytest.approx(w)
        out = p.score(completion=["abc"], step=step)
        assert out.weights["acc"] == pytest.approx(w)
        assert out.total.tolist() == pytest.approx([w * 3 + 1])


def test_cosine_schedule_with_start_and_param() -> None:
    p = rewardlang.loads("param k = 2\ncomponent b = 1\nb.weight = cosine(0 -> 1, steps=4, start=2) * k")
    for step in (0, 2, 3, 4, 5, 6, 9):
        t = min(max((step - 2) / 4, 0.0), 1.0)
        assert p.weights(step)["b"] == pytest.approx(2 * (1 - math.cos(math.pi * t)) / 2)


def test_constant_weights_and_explicit_reward() -> None:
    p = rewardlang.loads("component a = len(completion)\ncomponent b = 1\na.weight = 0.5\nb.weight = 3\n"
                         "reward = a.weight * a - b.weight * b + step")
    out = p.score(completion=["abcd"], step=2)
    assert out.total.tolist() == [0.5 * 4 - 3 * 1 + 2]
    assert out.weights == {"a": 0.5, "b": 3.0}


# ---------------------------------------------------------------- overrides


SPEC_WITH_PARAMS = '''
param threshold: number = 3
param strict: bool = false
component acc = 1 if len(completion) > threshold else 0
component tidy = 0 if strict and contains(completion, "!") else 1
acc.weight = 2
train { num_generations = 4 }
'''


def test_params_weights_and_train_settings_can_be_overridden() -> None:
    base = rewardlang.loads(SPEC_WITH_PARAMS)
    assert base.params == {"threshold": 3.0, "strict": False}
    assert base.train == {"num_generations": 4} and base.weights(0) == {"acc": 2.0, "tidy": 1.0}
    p = rewardlang.loads(SPEC_WITH_PARAMS, params={"threshold": "1", "strict": "true", "acc.weight": "0.25",
                                                   "train.num_generations": "8", "train.beta": "0.1"})
    assert p.params == {"threshold": 1.0, "strict": True}
    assert p.train == {"num_generations": 8, "beta": 0.1}
    out = p.score(completion=["ab!", "a"])
    assert vals(out.components["acc"]) == [1.0, 0.0]
    assert vals(out.components["tidy"]) == [0.0, 1.0]
    assert out.weights == {"acc": 0.25, "tidy": 1.0}
    assert out.total.tolist() == [0.25, 1.0]
    # python values work too
    assert rewardlang.loads(SPEC_WITH_PARAMS, params={"threshold": 0}).params["threshold"] == 0.0


def test_an_overridden_weight_replaces_a_schedule() -> None:
    p = rewardlang.loads("component a = 1\na.weight = linear(2 -> 1, steps=10)", params={"a.weight": 4})
    assert p.weights(0) == {"a": 4.0} and p.weights(10) == {"a": 4.0}


# ---------------------------------------------------------------- imports


def test_import_everything_and_from_import(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "terms.reward").write_text(
        'param t: number = 3\nlet long = len(completion) > t\nlet n_a = count(completion, "a")\n')
    main = tmp_path / "main.reward"
    main.write_text('import "lib/terms.reward"\ncomponent c = n_a + number(long)\n')
    p = rewardlang.load(str(main))
    assert vals(p.score(completion=["aaaa", "aa"]).components["c"]) == [5.0, 2.0]
    assert p.params == {"t": 3.0}
    sel = tmp_path / "sel.reward"
    sel.write_text('from "lib/terms.reward" import n_a\ncomponent c = n_a\n')
    assert vals(rewardlang.load(str(sel)).score(completion=["banana"]).components["c"]) == [3.0]
    # a name not imported by `from ... import` stays unknown
    bad = tmp_path / "bad.reward"
    bad.write_text('from "lib/terms.reward" import n_a\ncomponent c = number(long)\n')
    with pytest.raises(rewardlang.diagnostics.SpecError) as ei:
        rewardlang.load(str(bad))
    assert [d.code for d in ei.value.diagnostics] == ["E101"]


def test_imported_components_join_the_spec_and_imported_params_can_be_set(tmp_path: Path) -> None:
    (tmp_path / "lib.reward").write_text("param t: number = 3\ncomponent long = number(len(completion) > t)\n")
    main = tmp_path / "main.reward"
    main.write_text('import "lib.reward"\ncomponent one = 1\n')
    p = rewardlang.load(str(main), params={"t": "1"})
    assert [c.name for c in p.components] == ["long", "one"]
    assert vals(p.score(completion=["ab"]).total) == [2.0]


def test_the_importing_specs_param_wins(tmp_path: Path) -> None:
    (tmp_path / "lib.reward").write_text("param t: number = 3\nlet long = len(completion) > t\n")
    main = tmp_path / "main.reward"
    main.write_text('param t: number = 5\nimport "lib.reward"\ncomponent c = number(long)\n')
    p = rewardlang.load(str(main))
    assert p.params == {"t": 5.0}
    assert vals(p.score(completion=["aaaa", "aaaaaa"]).components["c"]) == [0.0, 1.0]


def test_set_overrides_a_param_declared_in_both_the_spec_and_an_import(tmp_path: Path) -> None:
    (tmp_path / "lib.reward").write_text("param t: number = 3\nlet long = len(completion) > t\n")
    main = tmp_path / "main.reward"
    main.write_text('param t: number = 5\nimport "lib.reward"\ncomponent c = number(long)\n')
    assert rewardlang.load(str(main), params={"t": "1"}).params == {"t": 1.0}


# ---------------------------------------------------------------- inputs and data


def test_chat_format_completions() -> None:
    p = rewardlang.loads("component n = len(completion)")
    chat = [
        [{"role": "assistant", "content": "hello"}],
        [{"role": "user", "content": "ignored"}, {"role": "assistant", "content": "ab"},
         {"role": "assistant", "content": "cd"}],
        [{"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "yz"}]}],
        "plain",
    ]
    out = p.score(completion=chat)
    assert vals(out.components["n"]) == [5.0, 4.0, 3.0, 5.0]
    # the same completions as plain text score the same
    assert p.score(completion=["hello", "abcd", "xyz", "plain"]).total.tolist() == out.total.tolist()


def test_chat_format_prompts_keep_their_groups() -> None:
    p = rewardlang.loads("component n = len(completion)\nadvantage over group(prompt) = x - mean")
    prompts = [[{"role": "user", "content": "first?"}]] * 2 + [[{"role": "user", "content": "second?"}]] * 2
    out = p.score(completion=["a", "abc", "abcde", "abcdefg"], prompt=prompts)
    assert out.advantages.tolist() == [-1.0, 1.0, -1.0, 1.0]


def test_data_errors_name_row_and_column() -> None:
    p = rewardlang.loads('input n: number\ninput ref: text from "solution"\ncomponent c = len(completion) + n\n'
                         'component d = len(ref)')
    with pytest.raises(DataError) as ei:
        p.score(completion=["a", "b", "c"], n=[1, "x", 3], ref=["r", "r", 5])
    assert ei.value.problems == [(1, "n", "expected number, got str"), (2, "ref", "expected text, got int")]
    assert "row 1: column `n`: expected number, got str" in str(ei.value)
    with pytest.raises(DataError) as ei:
        p.score(completion=["a", None], n=[1, 2], ref=["r", "r"])
    assert ei.value.problems == [(1, "completion", "is null, but `completion` is `text` (declare `text?` to allow "
                                                    "nulls)")]
    with pytest.raises(DataError) as ei:
        p.score(completion=["a"], n=[1])
    assert ei.value.problems == [(0, "ref", "missing: the spec's input `ref` reads column `solution`")]
    with pytest.raises(DataError) as ei:
        p.score(completion=["a", "b"], n=[1], ref=["r", "r"])
    assert ei.value.problems == [(0, "n", "has 1 values for 2 completions")]
    with pytest.raises(DataError) as ei:
        p.score(completion=["ok", "bad \ud800"], n=[1, 2], ref=["r", "r"])
    assert ei.value.problems == [(1, "completion", "is not valid UTF-8 text")]
    # the column name works as well as the input name
    out = p.score(completion=["ab"], n=[1], solution=["xyz"])
    assert vals(out.components["d"]) == [3.0]


def test_nullable_inputs_accept_nulls_as_none() -> None:
    p = rewardlang.loads("input n: number?\ncomponent c = (n or 10) + 1")
    assert vals(p.score(completion=["a", "b"], n=[None, 2]).components["c"]) == [11.0, 3.0]


# ---------------------------------------------------------------- spans


def test_spans_land_on_the_completions_characters() -> None:
    p = rewardlang.loads('component prints = count(completion, /print/)\n'
                         '    spans matches(code_block(completion, "python") or "", /print/)')
    comp = "Say print here.\n```python\nx = 1\nprint(x)  # print\n```\nprint again"
    other = "no code at all"
    out = p.score(completion=[comp, other])
    spans = out.spans["prints"]
    # "Say print here.\n" (16) + "```python\n" (10) + "x = 1\n" (6) -> 32; "print(x)  # " (12) -> 44
    assert [(s.start, s.end) for s in spans[0]] == [(32, 37), (44, 49)]
    assert all(comp[s.start:s.end] == "print" for s in spans[0])
    code_start = comp.index("```python\n") + len("```python\n")
    assert spans[0][0].start == code_start + len("x = 1\n")
    assert spans[1] == []
    assert spans[0][0].label == "/print/" and spans[0][0].value == 1.0


def test_spans_through_tag_strip_and_options() -> None:
    p = rewardlang.loads('component c = 1\n'
                         '    spans matches(strip(tag(completion, "answer") or ""), /\\d+/, value=-0.5, label="num")')
    comp = "<think>12</think><answer>  x = 42 + 7 </answer>"
    (sp,) = p.score(completion=[comp]).spans["c"]
    assert [comp[s.start:s.end] for s in sp] == ["42", "7"]
    assert sp[0] == Span(comp.index("42"), comp.index("42") + 2, -0.5, "num")


def test_masked_samples_have_no_spans() -> None:
    p = rewardlang.loads("component c = 1 / (len(completion) - 3)\n    spans matches(completion, /a/)")
    out = p.score(completion=["abc", "aaaa"])
    assert out.spans["c"][0] == [] and len(out.spans["c"][1]) == 4


# ---------------------------------------------------------------- TRL


TRL_SPEC = '''
input ref: text from "solution"
component acc = 1 if strip(completion) == strip(ref) else 0
component short = 1 if len(completion) < 5 else 0
acc.weight = 2
'''


def test_trl_reward_funcs_one_per_component_with_weights() -> None:
    p = rewardlang.loads(TRL_SPEC)
    funcs, weights = p.as_trl_reward_funcs()
    assert [f.__name__ for f in funcs] == ["acc", "short"]
    assert weights == [2.0, 1.0]
    state = SimpleNamespace(global_step=3)
    kwargs = dict(prompts=["p", "p", "q"], completions=["x", " yy ", "a long answer"],
                  solution=["x", "yy", "zz"], trainer_state=state, completion_ids=[[1], [2], [3]], other=[0, 1, 2])
    assert funcs[0](**kwargs) == [1.0, 1.0, 0.0]
    assert funcs[1](**kwargs) == [1.0, 1.0, 0.0]


def test_trl_reward_funcs_are_picklable_and_accept_chat_completions() -> None:
    p = rewardlang.loads(TRL_SPEC)
    funcs, _ = p.as_trl_reward_funcs()
    clones = pickle.loads(pickle.dumps(funcs))
    assert [f.__name__ for f in clones] == ["acc", "short"]
    chat = [[{"role": "assistant", "content": "x"}], [{"role": "assistant", "content": "long text"}]]
    assert clones[0](prompts=None, completions=chat, solution=["x", "y"]) == [1.0, 0.0]
    assert clones[1](prompts=None, completions=chat, solution=["x", "y"]) == [1.0, 0.0]


def test_trl_masked_samples_are_none_and_schedules_add_a_reward_function() -> None:
    p = rewardlang.loads("component a = 1 / (len(completion) - 2)\na.weight = linear(2 -> 1, steps=10)")
    funcs, weights = p.as_trl_reward_funcs()
    assert [f.__name__ for f in funcs] == ["a", "reward"] and weights == [0.0, 1.0]
    state = SimpleNamespace(global_step=5)
    assert funcs[0](prompts=None, completions=["abc", "ab"], trainer_state=state) == [1.0, None]
    assert funcs[1](prompts=None, completions=["abc", "ab"], trainer_state=state) == [1.5, None]
    p2 = pickle.loads(pickle.dumps(funcs[1]))
    assert p2(prompts=None, completions=["abcd"], trainer_state=SimpleNamespace(global_step=10)) == [0.5]


def test_trl_custom_reward_gets_a_total_function() -> None:
    p = rewardlang.loads("component a = len(completion)\ncomponent b = 1\nreward = a * b + 1")
    funcs, weights = p.as_trl_reward_funcs()
    assert [f.__name__ for f in funcs] == ["a", "b", "reward"] and weights == [0.0, 0.0, 1.0]
    assert funcs[2](prompts=None, completions=["abc"]) == [4.0]


def test_program_pickles_to_the_same_scores() -> None:
    p = rewardlang.loads(SPEC_WITH_PARAMS, params={"threshold": 1})
    q = pickle.loads(pickle.dumps(p))
    comps = ["ab!", "a", "abc"]
    assert q.score(completion=comps).total.tolist() == p.score(completion=comps).total.tolist()
    assert q.params == p.params


def test_list_inputs_score_next_to_other_inputs() -> None:
    p = rewardlang.loads("input kw: list[text]\ncomponent c = len(kw) + len(completion)")
    assert p.score(completion=["a", "bc"], kw=[["x"], ["y", "z"]]).total.tolist() == [2.0, 4.0]
