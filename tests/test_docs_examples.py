"""Every example in docs/language.md is real.

* each ```reward block (of docs/language.md and of the pages in docs/specs/) is a complete spec: it compiles (as if it were a file in ``specs/``, so imports of
  ``lib/...`` resolve) and its examples, if it has any, pass;
* each ```reward-error block fails to compile with the code named in its first line (``# E201 ...``);
* ```reward-fragment blocks are partial on purpose and skipped;
* the built-in functions table is exactly what the registry says (regenerate it with
  ``python tests/test_docs_examples.py --write``), and the language-functions table names exactly the checker's
  language functions;
* the plug-in example module registers its function, loads through the ``rewardlang.components`` entry-point
  group as the doc's pyproject snippet declares it, and works from a spec;
* the doc mentions every CLI command, aggregate and stage shorthand.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "language.md"
TEXT_MODULE = "rewardlang.runtime.components.text"
BEGIN, END = "<!-- builtin-functions:begin -->", "<!-- builtin-functions:end -->"


def blocks(path: Path = DOC) -> list[tuple[str, int, str]]:
    """(info string, line of the opening fence, body) for every fenced block of the markdown file."""
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(`{3,})(\S*)\s*$", lines[i])
        if m:
            fence, info, start = m.group(1), m.group(2), i + 1
            j = i + 1
            while j < len(lines) and not re.match(rf"^{fence}\s*$", lines[j]):
                j += 1
            out.append((info, start, "\n".join(lines[i + 1:j]) + "\n"))
            i = j + 1
        else:
            i += 1
    return out


def _compile(source: str, line: int):  # type: ignore[no-untyped-def]
    from rewardlang.runtime.program import load_program

    # compiled as if it were a spec file in specs/ (imports of "lib/..." resolve there)
    return load_program(str(ROOT / "specs" / f"language_md_line_{line}.reward"), source=source)


def _plugin_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## Writing a plug-in function"):text.index("## Command line")]


def _ids(kind: str) -> list:  # type: ignore[type-arg]
    # the spec of the plug-in section needs the plug-in: test_plugin_example_works_through_the_entry_point runs it
    out = [pytest.param(body, line, id=f"language.md:{line}") for info, line, body in blocks()
           if info == kind and body not in _plugin_section()]
    # the spec pages' blocks are held to the same rule
    for page in sorted((ROOT / "docs" / "specs").glob("*.md")):
        out += [pytest.param(body, line, id=f"{page.name}:{line}") for info, line, body in blocks(page)
                if info == kind]
    return out


# ---------------------------------------------------------------------- reward blocks

def test_the_doc_has_examples() -> None:
    kinds = [info for info, _, _ in blocks()]
    assert kinds.count("reward") >= 20 and "reward-error" in kinds
    assert set(kinds) <= {"reward", "reward-fragment", "reward-error", "python", "toml", "bash", "text", "json",
                          ""}, set(kinds)


@pytest.mark.parametrize("body,line", _ids("reward"))
def test_reward_block_compiles_and_its_examples_pass(body: str, line: int) -> None:
    from rewardlang.diagnostics import SpecError

    try:
        prog = _compile(body, line)
    except SpecError as exc:
        pytest.fail(f"line {line}: the block does not compile: "
                    + "; ".join(f"{d.code} {d.message}" for d in exc.diagnostics if d.is_error))
    failures = [(name, f) for name, _, _, f in prog.run_examples() if f]
    assert failures == [], f"line {line}"


@pytest.mark.parametrize("body,line", _ids("reward"))
def test_reward_block_is_canonically_formatted(body: str, line: int) -> None:
    from rewardlang.fmt import format_source

    if "±" in body:
        pytest.skip("shows the alternative spellings (`±`, no `expect`) that fmt normalizes")
    assert format_source(body) == body, f"line {line}: run the block through `rewardlang fmt`"


@pytest.mark.parametrize("body,line", _ids("reward-error"))
def test_reward_error_block_fails_with_its_code(body: str, line: int) -> None:
    from rewardlang.diagnostics import SpecError

    m = re.match(r"#\s*([EW]\d{3})\b", body)
    assert m, f"docs/language.md:{line}: a reward-error block starts with `# E123 ...`"
    with pytest.raises(SpecError) as exc:
        _compile(body, line)
    codes = [d.code for d in exc.value.diagnostics if d.is_error]
    assert m.group(1) in codes, (line, codes)


# ---------------------------------------------------------------------- function tables

def builtin_table() -> str:
    """The markdown table of rewardlang's built-in text functions, from the registry."""
    from rewardlang.runtime import registry
    from rewardlang.signature import MISSING

    rows = ["| function | constant arguments | options | description |", "|---|---|---|---|"]
    for name, impl in sorted(registry.load_all().items()):
        if impl.module != TEXT_MODULE:
            continue
        sig = impl.signature
        args = []
        for a in sig.args:
            s = f"{'*' if a.variadic else ''}{a.name}: {a.type}"
            if a.default is not MISSING:
                s += " = " + ("none" if a.default is None else repr(a.default))
            args.append(s)
        ret = str(sig.returns) + (f" in [{sig.range[0]:g}, {sig.range[1]:g}]" if sig.range else "")
        call = f"`{name}({', '.join(args)}) -> {ret}`"
        static = ", ".join(f"`{a.name}`" for a in sig.args if a.static) or ""
        opts, notes = [], []
        if sig.params is not None:
            for oname, f in sig.params.model_fields.items():
                default = f.default
                shown = "true" if default is True else "false" if default is False else (
                    f'"{default}"' if isinstance(default, str) else repr(default))
                opts.append(f"`{oname}={shown}`")
                if f.description:
                    notes.append(f"`{oname}`: {f.description}")
        doc = " ".join(sig.doc.split())
        if notes:
            doc += " (" + "; ".join(notes) + ")"
        if sig.spans_of and str(sig.returns) == "spans":
            doc += f" Span positions are in `{sig.spans_of}`, moved onto the completion when it is a piece of it."
        elif sig.spans_of:
            doc += f" The result keeps its position in `{sig.spans_of}` (for spans found in it later)."
        # markdown: keep tags such as <name> and fences visible, and `|` inside the cell
        cell = doc.replace("<", "&lt;").replace("```", "&#96;&#96;&#96;").replace("|", "\\|")
        rows.append(f"| {call} | {static} | {', '.join(opts)} | {cell} |")
    return "\n".join(rows)


def _doc_section(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def test_builtin_table_matches_the_registry() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert _doc_section(text) == builtin_table(), \
        "docs/language.md is out of date: run `python tests/test_docs_examples.py --write`"


def test_language_functions_table_names_every_language_function() -> None:
    from rewardlang.checker import AGGREGATES, LANGUAGE_FUNCS, MATH_FUNCS, STAGE_SHORTHANDS

    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Language functions"):text.index("## Built-in text functions")]
    named = set(re.findall(r"^\| `([a-z_]+)\(", section, flags=re.M))
    assert named == (LANGUAGE_FUNCS | MATH_FUNCS) - {"std"}, named ^ ((LANGUAGE_FUNCS | MATH_FUNCS) - {"std"})
    adv = text[text.index("## The advantage pipeline"):]
    for agg in AGGREGATES:
        assert f"`{agg}`" in adv, agg
    for short, expansion in STAGE_SHORTHANDS.items():
        assert f"`{short}`" in adv and f"`{expansion}`" in adv, short


def test_cli_commands_are_documented() -> None:
    from typer.main import get_command

    from rewardlang.cli import app

    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Command line"):]
    for name in get_command(app).commands:  # type: ignore[attr-defined]
        assert f"rewardlang {name}" in section, name


# ---------------------------------------------------------------------- the plug-in example

def _plugin_blocks() -> tuple[str, str, str]:
    section = _plugin_section()
    found = {info: body for info, _, body in blocks() if body in section and info in ("python", "toml")}
    spec = next(body for info, _, body in blocks() if info == "reward" and body in section)
    return found["python"], found["toml"], spec


def test_plugin_pyproject_declares_the_entry_point_group() -> None:
    _, toml, _ = _plugin_blocks()
    data = tomllib.loads(toml)
    group = data["project"]["entry-points"]["rewardlang.components"]
    assert group == {"docstrings": "my_rewards.docstrings"}


def test_plugin_example_works_through_the_entry_point(tmp_path: Path) -> None:
    module, toml, spec = _plugin_blocks()
    pkg = tmp_path / "my_rewards"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "docstrings.py").write_text(module, encoding="utf-8")
    (tmp_path / "plugin.reward").write_text(spec, encoding="utf-8")
    ep_value = tomllib.loads(toml)["project"]["entry-points"]["rewardlang.components"]["docstrings"]
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from importlib.metadata import EntryPoint
        from rewardlang.runtime import registry

        eps = [EntryPoint("docstrings", {ep_value!r}, "rewardlang.components")]
        registry.entry_points = lambda group: eps if group == "rewardlang.components" else []
        impls = registry.load_all()
        assert registry.plugin_failures() == [], registry.plugin_failures()
        assert impls["docstring_share"].module == "my_rewards.docstrings"
        print(impls["docstring_share"].signature.usage())

        import rewardlang
        prog = rewardlang.load({str(tmp_path / "plugin.reward")!r})
        assert all(not f for _, _, _, f in prog.run_examples()), prog.run_examples()
        out = prog.score(completion=["```python\\ndef f():\\n    '''doc'''\\n\\ndef g(): pass\\n```", "```python\\ndef (\\n```"])
        print(out.components["documented"].tolist(), out.errors["documented"])
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0] == "docstring_share(code: code, include_private=False) -> number"
    assert lines[1].startswith("[0.5, 0.0]") and "syntax error on line 1" in lines[1]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        text = DOC.read_text(encoding="utf-8")
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        DOC.write_text(text[:start] + "\n" + builtin_table() + "\n" + text[end:], encoding="utf-8")
        print(f"wrote the built-in functions table of {DOC}")
    else:
        print(builtin_table())
