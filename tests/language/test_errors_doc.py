"""``docs/errors.md`` is generated from the entries below by really running ``rewardlang`` on each example, and
this test checks that the file is current. After a message changes, regenerate it:

    REWARDLANG_WRITE_ERRORS_DOC=1 python -m pytest tests/language/test_errors_doc.py
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardlang.cli import app
from rewardlang.diagnostics import CODES

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "errors.md"


@dataclass
class Entry:
    code: str
    what: str                      # when it happens
    spec: str                      # example.reward
    fix: str
    args: tuple[str, ...] = ()     # extra command-line arguments
    files: dict[str, str] = field(default_factory=dict)   # other files next to the spec
    command: str = "check"         # check | score
    data: str | None = None        # data.jsonl for `score`


DATA_TITLES = {
    "D001": "bad value in a data row",
    "D002": "groups not contiguous",
    "D003": "unreadable data line",
}

ENTRIES = [
    # ---------------------------------------------------------------- syntax
    Entry("E001", "The parser met a token that cannot come next (the hint lists what could, or the keyword a "
                  "misspelt statement word resembles); an operator or `=` with nothing after it before the next "
                  "statement starts (said at the operator: missing operand after `+`); also an expression nested "
                  "more than 200 levels deep (a flat chain such as `a + b + ... + z` is one level, up to 10,000 "
                  "terms).",
          'component ok = len(completion) +* 2\n',
          "Remove or complete the stray token. Statements start with a keyword (`let`, `component`, ...), so an "
          "expression may span lines, but every operator needs both operands."),
    Entry("E002", "A character that starts no token: `$`, `@`, `;`, an unterminated `/regex/`, ... (an "
                  "unclosed string is E007).",
          'component ok = count(completion, "a") $ 2\n',
          "Delete the character. A `/regex/` closes on the line it opens (escape a `/` inside it as `\\/`)."),
    Entry("E003", "The file ends inside a statement: an operator without its right operand, a `let` without "
                  "its value (an unclosed bracket is E006).",
          'component short = min(len(completion), 10) +\n',
          "Finish the statement, or remove the dangling operator."),
    Entry("E004", "A `/regex/` is not a valid Python `re` pattern, or repeats a flag.",
          'let markers = count(completion, /Step (\\d+:/)\ncomponent reason = min(markers, 10) / 10\n',
          "Fix the pattern: here the group `(` is never closed. Escape a literal `/` as `\\/`."),
    Entry("E005", "A string literal cannot be decoded (an unknown `\\N{...}` name, a bad escape).",
          'let arrow = "\\N{RIGHTWARDS ARROWW}"\ncomponent arrows = count(completion, arrow)\n',
          "Fix the escape (`\\N{RIGHTWARDS ARROW}`), or write the character itself: `\"→\"`."),
    Entry("E006", "A bracket `(`, `[` or `{` is not closed: the file ends inside it, or the next statement starts "
                  "(a keyword, a weight) while it is open. Said at the bracket, as CPython and rustc say it; also "
                  "a closing bracket that does not match the one open (`(1]`), or closes none.",
          'component short = min(len(completion), 10\ncomponent long = len(completion) > 200\n',
          "Close the bracket where its expression ends (here: `min(len(completion), 10)`)."),
    Entry("E007", "A string is not closed: a `\"...\"` string must end on the line it starts, a triple-quoted "
                  "`\"\"\"...\"\"\"` one before the end of the file. Said at the opening quote.",
          'component polite = contains(completion, "please)\n',
          "Close the string (here: `\"please\"`), or use a triple-quoted string for text over several lines."),
    # ---------------------------------------------------------------- names and structure
    Entry("E101", "A name that is not a `let`, `param`, input, component (where components are allowed) or "
                  "language name; also a per-sample value where only constants are known.",
          "component size = len(completon)\n",
          "Correct the spelling (the hint suggests the closest name), or declare the name first."),
    Entry("E102", "A call of a function that is neither a language function nor registered by a plug-in.",
          'component thus = cout(completion, "Thus")\n',
          "Correct the name; `rewardlang functions` lists every function."),
    Entry("E103", "A component, let, param, input, weight, train setting, `spec`, `reward` or `advantage` "
                  "is defined twice.",
          "component size = len(completion)\ncomponent size = len(strip(completion))\n",
          "Rename one of them, or delete the duplicate."),
    Entry("E104", "`let` definitions depend on each other in a loop.",
          "let a = b + 1\nlet b = a * 2\ncomponent c = a + len(completion)\n",
          "Break the loop: one of the definitions must be computable from the others."),
    Entry("E105", "An imported file cannot be read (missing, not UTF-8), or is refused: it does not name a "
                  "`.reward` file, it leads (through `..`, an absolute path or a symlink) outside the spec's folder "
                  "and the import path (`REWARDLANG_IMPORT_PATH`, the shipped library `specs/lib`), or it is not a "
                  "regular file of at most 4 MiB (docs/language.md, \"Imports\"); or imports form a cycle "
                  "(`a.reward` imports `b.reward`, which imports `a.reward`; a file importing itself; longer "
                  "cycles). The hint of a cycle names every file in it.",
          'import "lib/missing.reward"\ncomponent one = 1\n',
          "Fix the path: it is relative to the directory of the importing spec. A file elsewhere: put its folder "
          "in `REWARDLANG_IMPORT_PATH`."),
    Entry("E106", "`from \"FILE\" import NAME` names something the file does not define.",
          'from "lib/terms.reward" import marker\ncomponent reason = min(marker, 10) / 10\n',
          "Import a `let` or component the file defines (the hint suggests the closest).",
          files={"lib/terms.reward": 'let markers = count(completion, /Step \\d+:/, "Thus")\n'}),
    Entry("E107", "A definition uses a reserved name: `completion`, `prompt`, `step`, `reward`, `x`, `advantage`, "
                  "`true`, `false`, `none`.",
          "let prompt = strip(completion)\ncomponent size = len(prompt)\n",
          "Choose another name."),
    Entry("E108", "An imported file has a `reward` or `advantage` statement, an example or a `train` section: an "
                  "imported file is a library, contributing only its inputs, params, lets, components and weights.",
          'import "lib/parts.reward"\ncomponent one = 1\n',
          "Move the statement into the main spec (here `reward = size + one` in `example.reward`). A library's "
          "examples can live in a small spec that imports it.",
          files={"lib/parts.reward": "component size = len(completion)\nreward = size\n"}),
    # ---------------------------------------------------------------- types and arguments
    Entry("E201", "An operation gets values of the wrong types: arithmetic on text, comparing text with `<`, "
                  "branches or list items of different types, an `or` default of another type.",
          'component loud = len(completion) + "!"\n',
          "Convert explicitly: `len(text)` for a length, `number(cond)` for 0/1, `text(x)` for text."),
    Entry("E202", "A function gets too many or too few arguments.",
          "component thus = count(completion)\n",
          "Pass the arguments the usage in the hint shows."),
    Entry("E203", "An argument has the wrong type for the function.",
          "component echo = count(completion, prompt)\n",
          "Patterns are constants: a `/regex/` or a literal text. To test whether a per-sample text occurs, use "
          "`contains(completion, prompt)`."),
    Entry("E204", "A keyword option the function does not have, or an option value its pydantic model rejects "
                  "(the message is pydantic's).",
          'component tagged = 1 if tag(completion, "answer", dotal=true) != none else 0\n',
          "Use an option from the usage in the hint, with a value of its type (`dotall=true`)."),
    Entry("E205", "An argument or option that must be known when the spec compiles gets a per-sample value.",
          "component diverse = distinct(words(completion), len(completion))\n",
          "Use a literal or a `param`: `distinct(words(completion), 2)`."),
    Entry("E206", "A condition (`if`, `and`, `or`, `not`) is not a bool.",
          'component reasoned = 1 if count(completion, "Thus") else 0\n',
          "Compare it: `count(completion, \"Thus\") > 0`; test for none with `x != none`."),
    Entry("E207", "An unknown type name, or a type an input cannot have (`spans`, `regex`).",
          "input difficulty: num\ncomponent hard = number(difficulty > 3)\n",
          "Use one of the types in the hint (`number`); add `?` when the column may be null."),
    Entry("E208", "A component range whose bounds are not constant numbers, or whose low end is above its high "
                  "end.",
          "component size in [1, 0] = min(len(completion), 1)\n",
          "Write the range low end first: `in [0, 1]`."),
    Entry("E209", "A component's value is not a number (or is always none).",
          'component answer = strip(tag(completion, "answer") or "")\n',
          "Turn it into a number: `len(...)`, `count(...)`, or `1 if ... else 0`."),
    Entry("E210", "A `spans` clause whose value is not spans.",
          "component prints = count(completion, /print/)\n    spans count(completion, /print/)\n",
          "Use a function that returns spans: `spans matches(completion, /print/)`."),
    Entry("E211", "A weight for a component that does not exist, or a weight that is not a number.",
          "component accuracy = len(completion)\naccurasy.weight = 2\n",
          "Name an existing component; a weight is a number, a `param` or a schedule."),
    Entry("E212", "A schedule (`linear`, `cosine`) without `steps=`, with a non-positive or non-constant value, or "
                  "used where only constants are known.",
          "component size = len(completion)\nsize.weight = linear(2.0 -> 1.0)\n",
          "Say over how many training steps it runs: `linear(2.0 -> 1.0, steps=5000)`."),
    Entry("E213", "A comprehension over a per-sample list (comprehensions are unrolled when the spec compiles).",
          'component hits = sum(count(completion, w) for w in words(completion))\n',
          "Run it over a constant list (`for w in [\"a\", \"b\"]`), or use a per-sample function such as "
          "`count`, `findall` or `distinct`."),
    Entry("E214", "A `step(...)` without an `else:` arm or with arms in the wrong shape or order, or a "
                  "`piecewise(...)` whose points are not constant or not increasing in x.",
          "component short = step(len(completion), <= 100: 1, <= 200: 0.5)\n",
          "End `step` with `else: VALUE`: `step(len(completion), <= 100: 1, <= 200: 0.5, else: 0)`."),
    Entry("E215", "The `reward` expression is not a number.",
          "component size = len(completion)\nreward = text(size)\n",
          "The reward combines components with arithmetic: `reward = size`."),
    Entry("E216", "A bad component clause: `on_error` not a number or `none`, or outside the declared range; "
                  "`timeout` not a positive number; a clause given twice.",
          "component ratio in [0, 1] = 1 / len(completion)\n    on_error -1\n",
          "Choose an `on_error` value inside the range (`on_error 0`), or `on_error none` to mask the sample."),
    Entry("E217", "An operation the language does not support here: an attribute other than `<component>.weight`, "
                  "a weight outside `reward`/`advantage`, a per-sample function in a weight, constant arithmetic "
                  "that fails (`1 / 0`), a constant that is not a finite number (`1e400`, `-1e400`, `1e308 * 10`: "
                  "infinity has no JSON form).",
          "component size = completion.length\n",
          "Use a function: `len(completion)`."),
    Entry("E218", "A bad `audit`: `every` or `window` not a whole number of steps, a window shorter than twice the "
                  "period (the alarm compares the window's first and second halves), `margin` not a positive "
                  "number, a value that is not a number, a bad `on_error`/`timeout` clause or one given twice; a "
                  "built-in statistic with a positional argument, an unknown option, an option out of its range, a "
                  "range or `on_error`/`timeout` clause, or `component_dominance` in a spec of one component.",
          'input tests: text\ninput entry_point: text\nlet code = code_block(completion) or ""\n'
          'component correct in [0, 1] = tests_pass_rate(code, tests, entry_point)\n'
          'audit words = len(words(code)) every 10 steps window 15 steps\n',
          "Make the window at least twice the period (`window 20 steps`), or audit more often (`every 5 steps`)."),
    Entry("E219", "An audit is named where the reward is made: in `reward`, an advantage stage, the `preference` "
                  "section, a component or let, a weight (`hidden.weight = ...`). An audit never enters the reward, "
                  "the advantage, masks or preference pairs: it is the second verifier a run is watched with.",
          'input tests: text\ninput plus_tests: text\ninput entry_point: text\n'
          'let code = code_block(completion) or ""\n'
          'component correct in [0, 1] = tests_pass_rate(code, tests, entry_point)\n'
          'audit hidden in [0, 1] = tests_pass_rate(code, plus_tests, entry_point) every 10 steps\n'
          'reward = correct + hidden\n',
          "Keep the audit out of the reward (`reward = correct`). To train on the stricter tests, make them a "
          "component: `component hidden in [0, 1] = ...`."),
    # ---------------------------------------------------------------- advantages
    Entry("E301", "A bad advantage stage: a group key that is not an input, `sum` without `each component`, an "
                  "aggregate option other than `std(ddof=0|1)`, a stage that is not a number.",
          'component size = len(completion)\nadvantage over group(task) = (x - mean) / (std + 1e-8)\n',
          "Declare the grouping column (`input task: group from \"task_id\"`), or group by `prompt`."),
    Entry("E302", "`each component` normalizes every component separately, and nothing sums them again.",
          'component size = len(completion)\ncomponent thus = count(completion, "Thus")\n'
          'advantage over group(prompt) each component = (x - mean) / (std + 1e-6)\n',
          "Add `then sum` (a weighted sum of the normalized components), optionally followed by more stages."),
    # ---------------------------------------------------------------- examples
    Entry("E401", "An example gives an input the spec does not have, twice, not constant, or with lists of "
                  "different lengths.",
          'component size = len(completion)\nexample { completon: "abc", expect size = 3 }\n',
          "Name the spec's inputs (`completion`, `prompt`, declared inputs, `step`, `group`)."),
    Entry("E402", "An example expects a value for something that is not a component, `reward` or `advantage`, "
                  "or the expected value is not a number, `none` or a list of them (one per row).",
          'component size = len(completion)\nexample { completion: "abc", expect length = 3 }\n',
          "Name a component, `reward` or `advantage`."),
    Entry("E403", "`rewardlang check` ran an example and a value differs from the expectation (by more than the "
                  "tolerance, 1e-9 unless `+- TOL`).",
          'component size = len(completion)\n\nexample "three characters" {\n    completion: "abc",\n'
          "    expect size = 4,\n}\n",
          "Fix the spec or the expectation; give a tolerance with `expect size = 4 +- 1` where values are "
          "approximate."),
    # ---------------------------------------------------------------- sections and parameters
    Entry("E501", "A section other than `train` and `preference`.",
          "component size = len(completion)\nrewards { pairs = 2 }\n",
          "The sections are `train { ... }` (training settings) and `preference { ... }` (DPO pairs and GEPO "
          "groups)."),
    Entry("E502", "A `train` setting whose value is not a constant.",
          'component size = len(completion)\ntrain { run_name = text(2) }\n',
          "Write the value literally: `run_name = \"2\"`."),
    Entry("E503", "A `preference` setting that does not exist (see docs/language.md, The preference section).",
          'component ok in [0, 1] = 1 if contains(completion, "return") else 0\npreference { rnak = ok }\n',
          "Use one of `pairs`, `rank`, `margin`, `chosen_min`, `rejected_max`, `ties`, `max_pairs`, `winners`, "
          "`losers`, `min_winners`, `min_losers`, `max_group`."),
    Entry("E504", "A `preference` setting with a value it does not take: an unknown strategy, a negative margin, a "
          "fractional count, a threshold split without both thresholds.",
          'component ok in [0, 1] = 1 if contains(completion, "return") else 0\n'
          'preference { pairs = "best_worst", max_pairs = 0 }\n',
          'Write `pairs = "max_min"` (or `"all"`, `"threshold"`) and a count of at least 1.'),
    Entry("E505", "`rank` is not a number, or `winners`/`losers` is not a bool.",
          'component ok in [0, 1] = 1 if contains(completion, "return") else 0\n'
          'preference { rank = ok > 0, winners = ok }\n',
          "Rank by a number (`rank = ok`, `rank = reward`) and select winners by a condition (`winners = ok == 1`)."),
    Entry("E601", "A `param` whose default is not a constant or does not have the declared type.",
          'param threshold: number = "3"\ncomponent long = number(len(completion) > threshold)\n',
          "Give a default of the declared type: `param threshold: number = 3`."),
    Entry("E602", "A `--set NAME=VALUE` (or `params=` of `rewardlang.load`) that names no parameter, weight or "
                  "`train.` setting, or whose value does not have the parameter's type.",
          "param threshold: number = 3\ncomponent long = number(len(completion) > threshold)\n",
          "Name a parameter (`--set threshold=5`), a weight (`--set long.weight=2`) or a train setting "
          "(`--set train.learning_rate=1e-5`).",
          args=("--set", "threshhold=5")),
    Entry("E603", "`rewardlang score`, `explain`, `train` (and any scoring from Python): a function the spec calls "
                  "needs something that is not there, such as the process reward model of `prm_total`/`prm_steps` "
                  "(its `checkpoint` unset, missing, or a directory without a model). The spec is refused before a "
                  "row is scored: without it every row of every batch would be masked, and a trainer would "
                  "\"train\" on nothing with loss 0. `rewardlang check` does not need the resource.",
          "input prompt: text\ncomponent process = prm_total(completion, prompt, checkpoint=\"runs/no-such-prm/final\")\n",
          "Get the resource the hint names (for a PRM: `rewardlang prm-data`, then `rewardlang train --spec "
          "specs/prm.reward`), or point the spec at an existing one (`--set prm_checkpoint=DIR` where the spec "
          "has such a parameter).",
          command="score", data='{"completion": "x = 1", "prompt": "p"}\n'),
    # ---------------------------------------------------------------- warnings
    Entry("W001", "An input is declared but no component reads it (the column is not required).",
          "input reference: text\ncomponent size = len(completion)\n",
          "Use it, or delete the declaration."),
    Entry("W002", "A `let` is never used, or the left side of `or` is never none (so its default is dead).",
          'let answer = tag(completion, "answer")\ncomponent size = len(completion) or 0\n',
          "Delete the unused definition; use `or` only after something that can be none."),
    Entry("W003", "A component's weight is set but the explicit `reward` does not use `<name>.weight`.",
          "component size = len(completion)\nsize.weight = 2\nreward = size\n",
          "Write `reward = size.weight * size`, or drop `reward` (the default is the weighted sum)."),
    Entry("W004", "A component can be none for some samples; those samples are masked (no reward, no advantage).",
          'component answer_len = len(tag(completion, "answer"))\n',
          "Give a default where that is the intent: `len(tag(completion, \"answer\") or \"\")`."),
    Entry("W005", "The spec defines no component, so every reward is 0.",
          'let answer = tag(completion, "answer")\n',
          "Add `component NAME = EXPRESSION`."),
    Entry("W006", "A /regex/ can backtrack catastrophically (exponential time in the length of the text): a "
                  "repeated group holding an unbounded repetition (`(a+)+`, `(\\w+\\s?)*`) with no separator each "
                  "repetition must consume, or alternatives under a repetition that can start with the same "
                  "character (`(a|a)*`, `(\\d|\\d\\d)+`). Such a pattern runs with a deadline per call, the "
                  "component's `timeout` (else 1 s): a sample that reaches it is an error of the component.",
          "component runs = count(completion, /(a+)+$/)\n",
          "Make the repetition unambiguous: `/a+$/` counts the same runs in linear time."),
    # ---------------------------------------------------------------- data (rewardlang score / explain)
    Entry("D001", "`rewardlang score` (and `explain`, `report`, `audit`, `check --data`): a row lacks a column the "
                  "spec reads, or a value has the wrong type (or is text that is not valid UTF-8); also `--group-by` "
                  "of a missing column. Each bad row is named by its line, even when every row lacks the column; "
                  "with `--on-bad-row skip` each is skipped and counted.",
          "input tests: text\ncomponent checked = count(tests, \"assert\") - count(completion, \"TODO\")\n",
          "Fix the data, or pass `--on-bad-row skip` to skip (and count) the bad rows.",
          command="score", data='{"completion": "x = 1", "tests": "assert f()"}\n'
                                '{"completion": "x = 2", "tests": 7}\n'),
    Entry("D002", "`rewardlang score`: the rows of one group (the spec's group key, or `--group-by COL`) are not "
                  "next to each other: a file is scored batch by batch, and a group is never split between batches.",
          "component size = len(completion)\nadvantage over group(prompt) = x - mean\n",
          "Sort the file by the group column.",
          args=("--group-by", "prompt", "--batch-size", "1"), command="score",
          data='{"completion": "a", "prompt": "p"}\n{"completion": "b", "prompt": "q"}\n'
               '{"completion": "c", "prompt": "p"}\n'),
    Entry("D003", "`rewardlang score`/`explain`/`report`/`check --data`: a line is not valid UTF-8, not JSON, or "
                  "not a JSON object, or an object names a key twice (which value is meant is ambiguous).",
          "component size = len(completion)\n",
          "Fix the line, or pass `--on-bad-row skip` to skip (and count) it.",
          command="score", data='{"completion": "fine"}\n{"completion": "broken\n'),
]


def run_entry(e: Entry, tmp: Path) -> str:
    """The output rewardlang gives for the entry's example (run in ``tmp``, so paths are short)."""
    (tmp / "example.reward").write_text(e.spec, encoding="utf-8")
    for name, text in e.files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text, encoding="utf-8")
    old = os.getcwd()
    os.chdir(tmp)
    try:
        if e.command == "score":
            Path("data.jsonl").write_text(e.data or "", encoding="utf-8")
            args = ["score", "example.reward", "-i", "data.jsonl", "--no-summary", "--no-progress", *e.args]
        else:
            args = ["check", "example.reward", *e.args]
        r = CliRunner().invoke(app, args)
    finally:
        os.chdir(old)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    out = r.stderr.rstrip("\n")
    if not out:
        out = r.stdout.rstrip("\n")
    return out


def _fence(text: str, lang: str) -> str:
    return f"```{lang}\n{text.rstrip(chr(10))}\n```"


def generate(tmp: Path) -> str:
    parts = [textwrap.dedent("""\
        # Error codes

        Every diagnostic rewardlang prints has a stable code: `E0xx` syntax, `E1xx` names and structure, `E2xx`
        types and arguments, `E3xx` advantages, `E4xx` examples, `E5xx`/`E6xx` sections, parameters and `--set`,
        `W0xx` warnings (the spec still compiles), and `D0xx` data errors of `rewardlang score`/`explain`.
        A spec's errors are all reported in one run, each with `file:line:column`, the source line, a caret under
        the offending characters and, where one helps, a hint. `rewardlang check`, `compile`, `score` and `explain`
        exit with status 1 on an error (never with a Python traceback); warnings are printed and the command goes on.
        A spec with syntax errors (`E001`-`E007`) gets one for each statement that has one (the parser resumes at
        the next line that starts a statement); names, types and examples are checked once it parses.

        Each entry below shows a minimal `example.reward` that triggers the code, the output of
        `rewardlang check example.reward` (or of `rewardlang score` for data errors) **as produced by this version**
        (the file is generated by running them: `REWARDLANG_WRITE_ERRORS_DOC=1 python -m pytest
        tests/language/test_errors_doc.py`), and the fix.
        """)]
    index = []
    for e in ENTRIES:
        title = CODES.get(e.code) or DATA_TITLES[e.code]
        index.append(f"[{e.code}](#{e.code.lower()}--{title.replace(' ', '-').replace('(', '').replace(')', '')})")
    parts.append("Codes: " + " · ".join(index) + "\n")
    for e in ENTRIES:
        title = CODES.get(e.code) or DATA_TITLES[e.code]
        sub = tmp / e.code
        sub.mkdir()
        out = run_entry(e, sub)
        assert f"[{e.code}]" in out, (e.code, out)
        section = [f"## {e.code} — {title}", "", e.what, ""]
        section.append(_fence(e.spec, "reward").replace("```reward\n", "```reward\n# example.reward\n", 1))
        for name, text in e.files.items():
            section += ["", _fence(text, "reward").replace("```reward\n", f"```reward\n# {name}\n", 1)]
        if e.command == "score":
            section += ["", _fence(e.data or "", "json").replace("```json\n", "```json\n// data.jsonl\n", 1)]
            cmd = " ".join(["rewardlang score example.reward -i data.jsonl", *e.args])
        else:
            cmd = " ".join(["rewardlang check example.reward", *e.args])
        section += ["", f"`{cmd}`:", "", _fence(out, "text"), "", f"**Fix:** {e.fix}", ""]
        parts.append("\n".join(section))
    return "\n".join(parts).rstrip("\n") + "\n"


def test_every_code_has_an_entry() -> None:
    codes = [e.code for e in ENTRIES]
    assert len(codes) == len(set(codes))
    assert set(codes) == set(CODES) | set(DATA_TITLES)


def test_errors_doc_is_generated_from_real_runs(tmp_path: Path) -> None:
    text = generate(tmp_path)
    if os.environ.get("REWARDLANG_WRITE_ERRORS_DOC"):
        DOC.write_text(text, encoding="utf-8")
    assert DOC.exists(), "run with REWARDLANG_WRITE_ERRORS_DOC=1 to write docs/errors.md"
    current = DOC.read_text(encoding="utf-8")
    if current != text:
        import difflib

        diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True), "docs/errors.md",
                                            "generated", n=1))
        pytest.fail("docs/errors.md is out of date; regenerate it with REWARDLANG_WRITE_ERRORS_DOC=1 "
                    f"python -m pytest tests/language/test_errors_doc.py\n{diff[:4000]}")
