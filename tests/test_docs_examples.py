"""Every example in README.md and docs/ is real.

* each ```reward block of every page (README.md and docs/**/*.md, whoever adds them; docs/errors.md excepted: it is
  generated from real runs by tests/language/test_errors_doc.py) is a complete spec: it compiles (as if it were a
  file in ``specs/``, so imports of ``lib/...`` resolve) and its examples, if it has any, pass;
* the commands of every page run from the repository root (see "commands" below for the rule): ```console lines
  starting with ``$ ``, every line of ```bash/```sh blocks, and ```python blocks, in page order, each page in a
  scratch directory that mirrors the repository; output lines of a console block starting with ``ok `` must be
  printed. Long-running commands (``rewardlang train``, ``rewardlang plot``, ``rewardlang eval``, a line marked ``# doc-test: long``)
  run with ``--help`` appended instead, so their options are still parsed and the files they name must exist;
  system set-up (``apt-get``, ``pip``, ``bash scripts/...`` -- whose options must appear in the script --,
  ``pytest``, other programs) is not run. A block preceded by ``<!-- doc-test: skip (reason) -->`` is not run;
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
import shlex
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
    from rewardlang.compiler import load_program

    # compiled as if it were a spec file in specs/ (imports of "lib/..." resolve there)
    return load_program(str(ROOT / "specs" / f"language_md_line_{line}.reward"), source=source)


def _plugin_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## Writing a plug-in function"):text.index("## Command line")]


def pages() -> list[Path]:
    """Every documentation page: README.md and docs/**/*.md (pages added later included), but docs/errors.md,
    which is generated from real runs and checked by tests/language/test_errors_doc.py."""
    return [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "errors.md")


def _ids(kind: str, formatted_only: bool = False) -> list:  # type: ignore[type-arg]
    """The blocks of ``kind`` of every page; with ``formatted_only``, of the pages whose specs are written in the
    canonical format (docs/language.md and docs/specs/; other pages may align their columns for reading)."""
    # the spec of the plug-in section needs the plug-in: test_plugin_example_works_through_the_entry_point runs it
    plugin = _plugin_section()
    out = []
    for page in pages():
        if formatted_only and page != DOC and page.parent.name != "specs":
            continue
        rel = page.relative_to(ROOT)
        out += [pytest.param(body, line, id=f"{rel}:{line}") for info, line, body in blocks(page)
                if info == kind and not (page == DOC and body in plugin)]
    return out


# ---------------------------------------------------------------------- reward blocks

def test_the_doc_has_examples() -> None:
    kinds = [info for info, _, _ in blocks()]
    assert kinds.count("reward") >= 20 and "reward-error" in kinds
    assert set(kinds) <= {"reward", "reward-fragment", "reward-error", "python", "toml", "bash", "text", "json",
                          "console", ""}, set(kinds)


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


@pytest.mark.parametrize("body,line", _ids("reward", formatted_only=True))
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
    from rewardlang.signature import MISSING, literal

    rows = ["| function | constant arguments | options | description |", "|---|---|---|---|"]
    for name, impl in sorted(registry.load_all().items()):
        if impl.module != TEXT_MODULE:
            continue
        sig = impl.signature
        args = []
        for a in sig.args:
            s = f"{'*' if a.variadic else ''}{a.name}: {a.type}"
            if a.default is not MISSING:
                s += " = " + literal(a.default)
            args.append(s)
        ret = str(sig.returns) + (f" in [{sig.range[0]:g}, {sig.range[1]:g}]" if sig.range else "")
        call = f"`{name}({', '.join(args)}) -> {ret}`"
        static = ", ".join(f"`{a.name}`" for a in sig.args if a.static) or ""
        opts, notes = [], []
        if sig.params is not None:
            for oname, f in sig.params.model_fields.items():
                opts.append(f"`{oname}={literal(f.default)}`")
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


# ---------------------------------------------------------------------- commands of every page

SKIP_MARK = "<!-- doc-test: skip"
LONG_MARK = "# doc-test: long"
#: rewardlang commands that run for minutes (or need a run directory): run with --help appended
LONG_COMMANDS = ("train", "plot", "eval")
#: system set-up and other programs: not run
NOT_RUN = ("apt-get", "apt", "pip", "pip3", "sudo", "trl", "torchrun", "git", "cd", "export")


def _skipped(page: Path, line: int) -> bool:
    lines = page.read_text(encoding="utf-8").splitlines()
    k = line - 2  # the line above the opening fence (``line`` is 1-based, the fence's own)
    while k >= 0 and not lines[k].strip():
        k -= 1
    return k >= 0 and lines[k].strip().startswith(SKIP_MARK)


def _command_lines(info: str, body: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) for a console or shell block; continuations joined."""
    out: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in body.splitlines():
        text = raw.rstrip()
        if info == "console":
            if pending:
                pending += " " + text.strip()
            elif text.startswith("$ "):
                pending = text[2:]
            else:
                if out and text:
                    out[-1][1].append(text)
                continue
        else:
            if not text.strip() or (text.lstrip().startswith("#") and not pending):
                continue
            pending = (pending + " " + text.strip()) if pending else text.strip()
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        out.append((pending, []))
        pending = ""
    return out


def _plan(command: str) -> list[tuple[str, str]]:
    """How each part (``a && b``) of a documented command is verified: ("run", shell command),
    ("help", shell command), ("script", path and options to find in it) or ("skip", why)."""
    long = LONG_MARK in command
    command = re.split(r"\s+#\s", " " + command, maxsplit=1)[0].strip()  # drop a trailing comment
    steps = []
    py = shlex.quote(sys.executable)
    for part in (p.strip() for p in command.split("&&")):
        words = shlex.split(part)
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value prefixes
            words = words[1:]
        if not words:
            continue
        prog = words[0]
        if prog == "accelerate" and "-m" in words:  # accelerate launch [its options] -m rewardlang ...
            i = words.index("-m")
            for k, w in enumerate(words[:i]):
                if w == "--config_file":
                    steps.append(("exists", words[k + 1]))
            words = ["rewardlang"] + words[i + 2:]
            prog = "rewardlang"
        if prog == "rewardlang" or (prog in ("python", "python3") and words[1:3] == ["-m", "rewardlang"]):
            args = words[1:] if prog == "rewardlang" else words[3:]
            redirect = next((k for k, w in enumerate(args) if w in ("<", ">", "|")), len(args))
            args = args[:redirect]
            for w in args:
                if re.match(r"^(specs|examples|docs|scripts)/", w):
                    steps.append(("exists", w))
            cmd = f"{py} -m rewardlang " + " ".join(shlex.quote(a) for a in args)
            if long or (args and args[0] in LONG_COMMANDS):
                steps.append(("help", cmd + " --help"))
            else:
                steps.append(("run", cmd + _redirections(part)))
            continue
        if prog in ("python", "python3"):
            if words[1:3] == ["-m", "pytest"]:
                steps.append(("skip", "the test suite itself"))
                continue
            # a script marked long runs with --help appended, as the module docstring says (not for minutes)
            steps.append(("help" if long else "run", f"{py} " + part.split(None, 1)[1] + (" --help" if long else "")))
            continue
        if prog in ("bash", "sh") and len(words) > 1 and words[1].startswith("scripts/"):
            steps.append(("script", " ".join(words[1:])))
            continue
        steps.append(("skip", f"`{prog}` (system set-up or another program)"))
    return steps


def _redirections(part: str) -> str:
    """The shell redirections of a command (``< file``, ``> file``), kept when it is rewritten."""
    m = re.search(r"\s([<>].*)$", part)
    return " " + m.group(1) if m else ""


def _scratch(tmp: Path) -> Path:
    """A directory mirroring the repository's top level through links: documented commands read specs/ and
    examples/ as from the root, and what they write lands here, not in the repository."""
    for entry in ROOT.iterdir():
        if entry.name not in (".git",):
            (tmp / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return tmp


def _runnable_pages() -> list:  # type: ignore[type-arg]
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in pages()
            if any(info in ("console", "bash", "sh", "shell", "python") for info, _, _ in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", _runnable_pages())
def test_every_command_and_python_block_of_the_page_works(page: Path, tmp_path: Path) -> None:
    import os

    where = _scratch(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    plugin = _plugin_section() if page == DOC else ""
    ran = 0

    def sh(cmd: str, line: int) -> subprocess.CompletedProcess:
        res = subprocess.run(["bash", "-c", cmd], cwd=where, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, f"{page.name}:{line}: `{cmd}` failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
        return res

    for info, line, body in blocks(page):
        if _skipped(page, line):
            continue
        if info == "python":
            if body in plugin:
                continue  # the plug-in module: test_plugin_example_works_through_the_entry_point
            script = where / f"block_{line}.py"
            script.write_text(body, encoding="utf-8")
            sh(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}", line)
            ran += 1
            continue
        if info not in ("console", "bash", "sh", "shell"):
            continue
        for command, shown in _command_lines(info, body):
            for kind, what in _plan(command):
                if kind == "exists":
                    assert (ROOT / what).exists(), f"{page.name}:{line}: `{command}` names {what}, which does not exist"
                elif kind == "script":
                    path, *opts = what.split()
                    text = (ROOT / path).read_text(encoding="utf-8")
                    for o in opts:
                        assert o in text, f"{page.name}:{line}: {path} has no option {o}"
                elif kind in ("run", "help"):
                    res = sh(what, line)
                    ran += 1
                    for expected in shown:
                        if expected.startswith("ok "):
                            assert expected.split("(")[0].strip() in res.stdout, (page.name, line, expected)
    assert ran > 0


@pytest.mark.parametrize("command, plan", [
    ("rewardlang check specs/codepo_text.reward          # types", [("exists", "specs/codepo_text.reward"),
                                                                    ("run", "-m rewardlang check specs/codepo_text.reward")]),
    ("rewardlang train --spec S --model PATH", [("help", "-m rewardlang train --spec S --model PATH --help")]),
    ("bash scripts/install.sh --test && python3 -m pytest -q", [("script", "scripts/install.sh --test"),
                                                               ("skip", "the test suite itself")]),
    ("CUDA_VISIBLE_DEVICES=1 accelerate launch --config_file examples/accelerate/zero2.yaml -m rewardlang train "
     "--spec S", [("exists", "examples/accelerate/zero2.yaml"), ("help", "-m rewardlang train --spec S --help")]),
    ("python benchmarks/learning.py --steps 8  # doc-test: long",
     [("help", "benchmarks/learning.py --steps 8 --help")]),
    ("rewardlang score specs/a.reward -i x.jsonl  # doc-test: long", [("exists", "specs/a.reward"),
                                                                      ("help", "-m rewardlang score specs/a.reward -i x.jsonl --help")]),
    ("apt-get install -y bubblewrap", [("skip", "`apt-get` (system set-up or another program)")]),
])
def test_the_command_rule(command: str, plan: list[tuple[str, str]]) -> None:
    got = [(k, w.replace(shlex.quote(sys.executable) + " ", "")) for k, w in _plan(command)]
    assert got == plan


def test_console_blocks_split_commands_from_output() -> None:
    body = "$ rewardlang check a.reward  # x\nok  a.reward  (1 component)\n$ python m.py \\\n    -i f\n"
    assert _command_lines("console", body) == [("rewardlang check a.reward  # x", ["ok  a.reward  (1 component)"]),
                                               ("python m.py -i f", [])]
    assert _command_lines("bash", "# comment\nrewardlang plot r\n\n") == [("rewardlang plot r", [])]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, flags=re.M)}


# the docs site's pages generated at build time (mkdocs.yml's hook), linked from the written pages
GENERATED_PAGES = {(ROOT / "docs" / p).resolve() for p in ("reference/functions.md", "reference/error-index.md")}


@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in pages()])
def test_every_link_of_the_page_resolves(page: Path) -> None:
    """Relative links name files that exist, and `#anchors` headings that exist (docs/language.md once linked
    to three "Known limitations" entries that were not there)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        dest = (page.parent / target) if target else page
        if dest.resolve() in GENERATED_PAGES:
            continue  # built by the site's hook (scripts/mkdocs_hooks.py); tests/test_docs_site.py checks it
        assert dest.exists(), f"{page.name}: link to {target}, which does not exist"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: link to {target}#{anchor}, which has no such heading"


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
    assert lines[0] == "docstring_share(code: code, include_private=false) -> number"
    assert lines[1].startswith("[0.5, 0.0]") and "syntax error on line 1" in lines[1]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        text = DOC.read_text(encoding="utf-8")
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        DOC.write_text(text[:start] + "\n" + builtin_table() + "\n" + text[end:], encoding="utf-8")
        print(f"wrote the built-in functions table of {DOC}")
    else:
        print(builtin_table())
