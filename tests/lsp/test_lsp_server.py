"""`rewardlang lsp` through the protocol itself: a client process speaks LSP JSON-RPC over stdio to the server
(initialize, didOpen, didChange, hover, completion, definition, formatting, documentSymbol, shutdown/exit) on
the shipped specs and broken variants of them, and checks the answers an editor would get."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rewardlang.fmt import format_source
from rewardlang.lsp.client import LspClient, uri_of

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
DENSE = SPECS / "dense_ppo.reward"
DENSE_TEXT = DENSE.read_text(encoding="utf-8")
LINES = DENSE_TEXT.split("\n")


def _line(text_lines: list[str], start: str) -> int:
    return next(i for i, l in enumerate(text_lines) if l.startswith(start))


@pytest.fixture(scope="module")
def client():
    c = LspClient()
    c.initialize(ROOT)
    yield c
    c.shutdown()


@pytest.fixture
def dense(client):
    """dense_ppo.reward open in the editor with its own text (restored after each test)."""
    client.open(DENSE)
    client.diagnostics(DENSE)
    yield DENSE
    client.change(DENSE, DENSE_TEXT)
    client.diagnostics(DENSE)


def test_initialize_advertises_the_features():
    with LspClient() as c:
        caps = c.initialize(ROOT)["capabilities"]
        assert caps["hoverProvider"] and caps["definitionProvider"] and caps["documentSymbolProvider"]
        assert caps["documentFormattingProvider"] and "completionProvider" in caps
        assert "event" in caps["semanticTokensProvider"]["legend"]["tokenTypes"]
        assert caps["textDocumentSync"]["change"] == 2  # incremental
        c.request("shutdown")
        c.notify("exit")
        assert c.proc.wait(timeout=60) == 0


@pytest.mark.parametrize("spec", sorted(p.name for p in SPECS.glob("*.reward")))
def test_shipped_specs_have_the_checkers_diagnostics(client, spec):
    """No errors; the warnings `rewardlang check` prints (constructs.reward has a W004), at the same places."""
    from rewardlang.checker import check_file
    from rewardlang.runtime import registry

    path = SPECS / spec
    _, expected, _ = check_file(str(path), registry.signatures())
    client.open(path)
    got = client.diagnostics(path)
    assert all(d["severity"] == 2 for d in got)
    assert [(d["code"], d["range"]["start"]["line"] + 1, d["range"]["start"]["character"] + 1) for d in got] == [
        (d.code, d.loc.line, d.loc.column) for d in expected]


def test_misspelled_name_is_E101_at_its_exact_range(client, dense):
    row = _line(LINES, "let src = ")
    v = client.change(DENSE, DENSE_TEXT.replace("let src = code or", "let src = cod or"))
    diags = client.diagnostics(DENSE, version=v)
    # once, although `src` is lowered under two timeouts (the checker used to report it twice)
    assert len(diags) == 1
    d = diags[0]
    assert d["code"] == "E101" and d["severity"] == 1 and d["source"] == "rewardlang"
    assert d["range"] == {"start": {"line": row, "character": 10}, "end": {"line": row, "character": 13}}
    assert d["message"] == "unknown name `cod`\nhint: did you mean `code`?"


def test_diagnostics_follow_incremental_changes(client, dense):
    row = _line(LINES, "let run_tests = ")
    col = LINES[row].index("len(strip(src))")
    # an incremental edit: `len` -> `lenn`
    v = client.change(DENSE, "lenn", range={"start": {"line": row, "character": col},
                                            "end": {"line": row, "character": col + 3}})
    diags = client.diagnostics(DENSE, version=v)
    assert [(d["code"], d["range"]["start"], d["range"]["end"]) for d in diags] == [
        ("E102", {"line": row, "character": col}, {"line": row, "character": col + 4})]
    assert "did you mean `len`?" in diags[0]["message"]
    v = client.change(DENSE, "len", range={"start": {"line": row, "character": col},
                                           "end": {"line": row, "character": col + 4}})
    assert client.diagnostics(DENSE, version=v) == []


def test_syntax_error_and_warning(client, dense):
    row = _line(LINES, "let dfm = ")
    v = client.change(DENSE, DENSE_TEXT.replace("let dfm = dataflow_match(src, ref_code) or 0",
                                                "let dfm = dataflow_match(src, ref_code) or"))
    diags = client.diagnostics(DENSE, version=v)
    assert [d["code"] for d in diags] == ["E001"]
    # the statement stops at its trailing `or`, where the next one starts: the error is placed at the `or`
    line = LINES[row].replace(" or 0", " or")
    assert diags[0]["range"] == {"start": {"line": row, "character": line.index(" or") + 1},
                                 "end": {"line": row, "character": line.index(" or") + 3}}
    assert diags[0]["message"].startswith("missing operand after `or`\nhint: the statement runs on into the next one")
    v = client.change(DENSE, DENSE_TEXT + "\nlet unused_thing = len(completion)\n")
    diags = client.diagnostics(DENSE, version=v)
    assert [(d["code"], d["severity"]) for d in diags] == [("W002", 2)]
    assert diags[0]["message"] == "`unused_thing` is never used"
    assert diags[0]["range"]["start"] == {"line": len(LINES), "character": 0}


def test_type_error_range_and_hint(client, dense):
    row = _line(LINES, "component syntax in [0, 1] = ")
    text = DENSE_TEXT.replace("component syntax in [0, 1] = 1 if parses(src) else 0",
                              "component syntax in [0, 1] = 1 if src else 0")
    v = client.change(DENSE, text)
    diags = client.diagnostics(DENSE, version=v)
    assert [d["code"] for d in diags] == ["E206"]
    col = text.split("\n")[row].index("src else")
    assert diags[0]["range"]["start"] == {"line": row, "character": col}
    assert diags[0]["range"]["end"] == {"line": row, "character": col + 3}


def test_error_in_an_open_imported_file_shows_at_the_import(client):
    lib = SPECS / "lib" / "codepo_terms.reward"
    main = SPECS / "codepo.reward"
    lib_text = lib.read_text(encoding="utf-8")
    client.open(main)
    assert client.diagnostics(main) == []
    start = len(client.notifications)
    client.open(lib, lib_text.replace("let answer = tag(", "let answer = tagg("))  # unsaved: disk unchanged
    diags = client.diagnostics(main, version=1, after=start)
    assert [d["code"] for d in diags] == ["E102"]
    import_row = _line(main.read_text().split("\n"), "import ")
    assert diags[0]["range"]["start"]["line"] == import_row
    assert "codepo_terms.reward:" in diags[0]["message"]
    rel = diags[0]["relatedInformation"][0]
    assert rel["location"]["uri"] == uri_of(lib)
    lib_row = _line(lib_text.split("\n"), "let answer = ")
    assert rel["location"]["range"]["start"] == {"line": lib_row, "character": 13}
    # the library itself, open in the editor, has the error at its place
    lib_diags = client.diagnostics(lib)
    assert [(d["code"], d["range"]["start"]) for d in lib_diags] == [("E102", {"line": lib_row, "character": 13})]
    # closing the library re-checks its dependents against the file on disk
    start = len(client.notifications)
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri_of(lib)}})
    assert client.diagnostics(main, version=1, after=start) == []


# ---------------------------------------------------------------------- hover


def _hover(client, path, row, col):
    r = client.at("textDocument/hover", path, row, col)
    return r["contents"]["value"] if r else None


def test_hover_let_type_and_range(client, dense):
    row = _line(LINES, "let src = ")
    text = _hover(client, DENSE, row, LINES[row].index("code"))
    assert text.startswith("```reward\nlet code: code?\n```")
    assert 'else code_block(completion, "python")`' in text
    r = client.at("textDocument/hover", DENSE, row, LINES[row].index("code") + 1)
    assert r["range"] == {"start": {"line": row, "character": 10}, "end": {"line": row, "character": 14}}


def test_hover_function_signature_and_doc_from_the_registry(client, dense):
    from rewardlang.runtime import registry

    sig = registry.signatures()["ruff_lines"]
    row = _line(LINES, "let flagged = ")
    text = _hover(client, DENSE, row, LINES[row].index("ruff_lines") + 3)  # the project's mapping's call
    assert text.startswith(f"```reward\n{sig.usage()}\n```")
    assert sig.doc.splitlines()[0] in text
    assert "- `line_length`: `int` = `88`" in text
    # an option inside the call
    text = _hover(client, DENSE, row, LINES[row].rindex("line_length") + 2)  # inside ruff_lines(...)
    assert text.startswith("option of `ruff_lines`") and "`line_length`: `int` = `88`" in text
    # a language function
    row = _line(LINES, "component lint = ")
    assert "length of text, a list or spans" in _hover(client, DENSE, row, LINES[row].index("len("))


def test_hover_component_declared_range_and_weight(client, dense):
    row = _line(LINES, "tests.weight")
    text = _hover(client, DENSE, row, 1)
    assert text.startswith("```reward\ncomponent tests: number\n```")
    assert "declared range: [-0.3, 1]" in text and "weight: `0.7`" in text and "timeout: 10 s" in text
    row = _line(LINES, "component lint = ")
    assert "declared range: not declared" in _hover(client, DENSE, row, 11)


def test_hover_param_and_input(client, dense):
    row = _line(LINES, "let lint_target = ")
    text = _hover(client, DENSE, row, LINES[row].index("lint_scope") + 1)
    assert 'param lint_scope: text = "response"' in text and "value: `'response'`" in text
    assert "what ruff lints" in text
    row = _line(LINES, "let pass_rate = ")
    text = _hover(client, DENSE, row, LINES[row].index("unit_tests") + 1)
    assert "input unit_tests: text" in text and "column `tests`" in text


# ---------------------------------------------------------------------- completion


def _complete(client, path, row, col):
    return {i["label"]: i for i in client.at("textDocument/completion", path, row, col)["items"]}


def test_completion_names_in_scope_and_functions(client, dense):
    row = _line(LINES, "let pass_rate = ")
    items = _complete(client, DENSE, row, len("let pass_rate = "))
    for name in ("code", "src", "test_code", "lint_scope", "unit_tests", "completion", "step"):
        assert name in items, name
    assert "lint" not in items  # a component is not a name inside another component
    assert items["code"]["detail"] == "let: code?"
    assert items["lint_scope"]["detail"] == "param: text"
    from rewardlang.runtime import registry

    sig = registry.signatures()["tests_pass_rate"]
    assert items["tests_pass_rate"]["detail"] == sig.usage()
    assert items["clip"]["detail"] == "clip(x, lo, hi) -> number"
    assert "if" in items and "none" in items


def test_completion_options_inside_a_call(client, dense):
    row = _line(LINES, "let flagged = ")
    col = LINES[row].index("select=")
    items = _complete(client, DENSE, row, col)
    assert {"select=", "ignore=", "line_length=", "target_version=", "respect_noqa="} <= set(items)
    assert items["line_length="]["sortText"] < items["code"]["sortText"]


def test_completion_tokens_forms_statements_and_reward(client, dense):
    text = DENSE_TEXT.replace("    tokens spans(uncovered=1)", "    tokens ")
    v = client.change(DENSE, text)
    client.diagnostics(DENSE, version=v)
    row = _line(text.split("\n"), "    tokens ")
    items = _complete(client, DENSE, row, len("    tokens "))
    assert set(items) == {"last", "over", "spans", "spans(uncovered=…)", "ends", "split"}
    assert items["split"]["insertTextFormat"] == 2  # a snippet
    # an empty line at the top level: statement keywords and weights
    text = DENSE_TEXT.replace("lint.weight = 0.1\n", "lint.weight = 0.1\n\n")
    v = client.change(DENSE, text)
    row = _line(text.split("\n"), "lint.weight") + 1
    items = _complete(client, DENSE, row, 0)
    assert {"let", "component", "reward", "advantage", "example", "train", "tests.weight"} <= set(items)
    # in `reward = ...`: components, not lets or inputs
    text = DENSE_TEXT + "\nreward = \n"
    v = client.change(DENSE, text)
    items = _complete(client, DENSE, len(text.split("\n")) - 2, len("reward = "))
    assert {"lint", "syntax", "tests", "dfg"} <= set(items) and "src" not in items and "unit_tests" not in items


def test_completion_in_a_weight(client, dense):
    # the last statement above the cursor starts with a component's name, not a keyword
    row = _line(LINES, "tests.weight = ")
    items = _complete(client, DENSE, row, len("tests.weight = "))
    assert {"lint_scope", "tests_on_linted_code", "step", "linear", "cosine"} <= set(items)
    assert not {"src", "code", "tests", "unit_tests", "completion"} & set(items)


def test_completion_column_names_and_example_items(client, dense):
    text = DENSE_TEXT.replace('input entry_point: text\n', 'input entry_point: text\ninput extra: text from "\n')
    client.change(DENSE, text)
    row = _line(text.split("\n"), "input extra")
    items = _complete(client, DENSE, row, len('input extra: text from "'))
    # the columns this spec reads, then those of the specs beside it
    assert {"tests", "entry_point", "reference", "task_id", "answer"} <= set(items)
    client.change(DENSE, DENSE_TEXT)
    row = _line(LINES, '    entry_point: "inc",')
    items = _complete(client, DENSE, row, 4)
    assert {"expect", "completion:", "unit_tests:", "entry_point:", "reference:"} <= set(items)


def test_completion_while_the_document_does_not_parse(client, dense):
    text = DENSE_TEXT.replace("let src = code or \"\"", "let src = ")
    v = client.change(DENSE, text)
    assert client.diagnostics(DENSE, version=v)[0]["code"] == "E001"
    row = _line(text.split("\n"), "let src = ")
    items = _complete(client, DENSE, row, len("let src = "))
    assert "code" in items and "code_block" in items  # names from the last analysis that parsed


# ---------------------------------------------------------------------- definition, symbols, formatting


def test_definition_of_let_component_param(client, dense):
    row = _line(LINES, "let lint_target = ")
    loc = client.at("textDocument/definition", DENSE, row, LINES[row].index("src") + 1)
    src_row = _line(LINES, "let src = ")
    assert loc == {"uri": uri_of(DENSE), "range": {"start": {"line": src_row, "character": 4},
                                                   "end": {"line": src_row, "character": 7}}}
    loc = client.at("textDocument/definition", DENSE, row, LINES[row].index("lint_scope") + 2)
    assert loc["range"]["start"] == {"line": _line(LINES, "param lint_scope"), "character": 6}
    loc = client.at("textDocument/definition", DENSE, _line(LINES, "dfg.weight"), 1)
    assert loc["range"]["start"] == {"line": _line(LINES, "component dfg "), "character": 10}


def test_definition_into_imported_library_specs(client):
    main = SPECS / "constructs.reward"
    lib = SPECS / "lib" / "constructs_helpers.reward"
    client.open(main)
    lines = main.read_text().split("\n")
    lib_lines = lib.read_text().split("\n")
    row = _line(lines, "import ")
    assert client.at("textDocument/definition", main, row, 10) == {
        "uri": uri_of(lib), "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}
    row = _line(lines, "from ")
    loc = client.at("textDocument/definition", main, row, lines[row].index("shouting") + 1)
    assert loc == {"uri": uri_of(lib), "range": {
        "start": {"line": _line(lib_lines, "let shouting"), "character": 4},
        "end": {"line": _line(lib_lines, "let shouting"), "character": 12}}}
    row = _line(lines, "let n_words")
    loc = client.at("textDocument/definition", main, row, lines[row].index("word_list") + 1)
    assert loc["uri"] == uri_of(lib) and loc["range"]["start"]["line"] == _line(lib_lines, "let word_list")
    # hover on the import lists what it brings
    text = _hover(client, main, _line(lines, "import "), 3)
    assert "`word_list`" in text and "`shout_min`" in text


def test_document_symbols(client, dense):
    syms = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri_of(DENSE)}})
    names = [(s["name"], s["kind"]) for s in syms]
    assert names[0] == ("dense_ppo", 2)
    assert ("unit_tests", 8) in names and ("lint_scope", 14) in names and ("code", 13) in names
    comps = {s["name"]: s for s in syms if s["kind"] == 12}
    assert list(comps) == ["lint", "syntax", "tests", "dfg"]
    assert comps["tests"]["detail"] == "component in [-0.3, 1]"
    assert [k["name"] for k in comps["tests"]["children"]] == ["timeout", "tokens"]
    train = next(s for s in syms if s["name"] == "train")
    assert "beta" in [k["name"] for k in train["children"]]
    # every kind of declaration has its own kind in the outline: an audit (24, Event) is neither a component
    # (12) nor an example (19, Object)
    by_kind: dict[int, list[str]] = {}
    for s in syms:
        by_kind.setdefault(s["kind"], []).append(s["name"])
    assert by_kind[24] == ["hidden"]
    assert by_kind[19] == ["valid, clean, correct code", "a syntax error: no test passes"]
    audit = next(s for s in syms if s["name"] == "hidden")
    assert audit["detail"] == "audit every 10 steps"
    assert [k["name"] for k in audit["children"]] == ["every", "window", "timeout"]
    row = _line(LINES, "audit hidden ")
    assert audit["selectionRange"] == {"start": {"line": row, "character": 6}, "end": {"line": row, "character": 12}}
    assert audit["range"]["start"] == {"line": row, "character": 0} and audit["range"]["end"]["line"] == row + 1


def test_audit_hover_and_completion(client, dense):
    """The `audit` declaration (the language's newest) through the protocol: hover on its name, the keyword at a
    statement's start, its clauses on its indented lines, the built-in statistics after `audit NAME = `, and no
    audit among the names an expression may read (E219)."""
    row = _line(LINES, "audit hidden ")
    text = _hover(client, DENSE, row, 8)
    assert text.startswith("```reward\naudit hidden: number\n```") and "never part of the reward" in text
    assert "every 10 steps" in text and "alarm over 20 steps" in text and "[0, 1]" in text
    text = DENSE_TEXT.replace("lint.weight = 0.1\n", "lint.weight = 0.1\n\n")
    client.diagnostics(DENSE, version=client.change(DENSE, text))
    items = _complete(client, DENSE, _line(text.split("\n"), "lint.weight") + 1, 0)
    assert items["audit"]["kind"] == 14  # Keyword
    at = DENSE_TEXT.index("    timeout 10\n", DENSE_TEXT.index("audit hidden ")) + len("    timeout 10\n")
    text = DENSE_TEXT[:at] + "    \n" + DENSE_TEXT[at:]  # an empty clause line under the audit
    client.diagnostics(DENSE, version=client.change(DENSE, text))
    items = _complete(client, DENSE, _line(text.split("\n"), "audit hidden ") + 2, 4)
    assert {"margin", "on_error"} <= {k for k, v in items.items() if v["detail"] == "audit clause"}
    text = DENSE_TEXT + "\naudit dom = \n"
    client.diagnostics(DENSE, version=client.change(DENSE, text))
    items = _complete(client, DENSE, len(text.split("\n")) - 2, len("audit dom = "))
    assert {"component_dominance", "length_drift", "group_collapse"} <= set(items)
    text = DENSE_TEXT + "\nlet z = \n"
    client.diagnostics(DENSE, version=client.change(DENSE, text))
    assert "hidden" not in _complete(client, DENSE, len(text.split("\n")) - 2, len("let z = "))


def test_semantic_tokens(client, dense):
    """Every token decoded from the protocol's relative encoding, against the legend the server advertised: the
    audit's keyword and clauses, what each name is (by what defines it), options' names left to the grammar."""
    legend = client.capabilities["semanticTokensProvider"]["legend"]
    data = client.request("textDocument/semanticTokens/full", {"textDocument": {"uri": uri_of(DENSE)}})["data"]
    assert len(data) % 5 == 0
    toks = {}
    line = col = 0
    for i in range(0, len(data), 5):
        dl, dc, n, t, m = data[i:i + 5]
        line, col = (line + dl, dc) if dl else (line, col + dc)
        mods = {legend["tokenModifiers"][b] for b in range(len(legend["tokenModifiers"])) if m >> b & 1}
        toks[(line, col)] = (LINES[line][col:col + n], legend["tokenTypes"][t], mods)
    row = _line(LINES, "audit hidden ")
    text = LINES[row]
    assert toks[(row, 0)] == ("audit", "keyword", set())
    assert toks[(row, 6)] == ("hidden", "event", {"declaration"})
    for word in ("every", "window"):
        assert toks[(row, text.index(word))] == (word, "keyword", set())
        assert toks[(row, text.index("steps", text.index(word)))] == ("steps", "keyword", set())
    assert toks[(row, text.index("tests_pass_rate"))] == ("tests_pass_rate", "function", {"defaultLibrary"})
    assert toks[(row, text.index("plus_tests"))] == ("plus_tests", "property", set())
    assert toks[(row, text.index("src"))] == ("src", "variable", set())
    assert (row, text.index("reference=")) not in toks  # an option's name, not the input `reference`
    row = _line(LINES, "let lint_target = ")
    assert toks[(row, LINES[row].index("lint_scope"))] == ("lint_scope", "parameter", {"readonly"})
    row = _line(LINES, "component tests ")
    assert toks[(row, 10)] == ("tests", "class", {"declaration"})
    row = _line(LINES, "dfg.weight")
    assert toks[(row, 0)] == ("dfg", "class", set()) and (row, 4) not in toks
    # a document that does not parse keeps its names' types from the last version that did
    v = client.change(DENSE, DENSE_TEXT.replace("let src = code or", "let src = ("))
    client.diagnostics(DENSE, version=v)
    again = client.request("textDocument/semanticTokens/full", {"textDocument": {"uri": uri_of(DENSE)}})["data"]
    assert len(again) >= len(data) - 10 and len(again) % 5 == 0


def test_formatting_through_fmt(client, dense):
    ugly = DENSE_TEXT.replace("lint.weight = 0.1", "lint.weight=0.1").replace("let dfm = dataflow_match(src, "
                                                                              "ref_code) or 0",
                                                                              "let dfm=dataflow_match( src,ref_code )or 0")
    client.change(DENSE, ugly)
    edits = client.request("textDocument/formatting", {"textDocument": {"uri": uri_of(DENSE)},
                                                       "options": {"tabSize": 4, "insertSpaces": True}})
    assert len(edits) == 1
    assert edits[0]["newText"] == format_source(ugly, str(DENSE))
    assert "let dfm = dataflow_match(src, ref_code) or 0" in edits[0]["newText"]
    assert edits[0]["range"]["start"] == {"line": 0, "character": 0}
    assert edits[0]["range"]["end"] == {"line": len(ugly.split("\n")) - 1, "character": 0}
    client.change(DENSE, DENSE_TEXT.replace("let src = code or", "let src = ("))
    assert client.request("textDocument/formatting", {"textDocument": {"uri": uri_of(DENSE)},
                                                      "options": {"tabSize": 4, "insertSpaces": True}}) is None


def test_positions_count_utf16_units(client, tmp_path):
    # `🙂` is two UTF-16 units: the misspelt name after it starts at UTF-16 column 40, not 39
    path = tmp_path / "emoji.reward"
    text = 'component c = count(completion, "🙂") + lenn(completion)\n'
    client.open(path, text)
    d = client.diagnostics(path)
    assert [(x["code"], x["range"]["start"]["character"], x["range"]["end"]["character"]) for x in d] == [
        ("E102", text.index("lenn") + 1, text.index("lenn") + 5)]


def test_import_rewardlang_does_not_import_pygls():
    out = subprocess.run([sys.executable, "-c", "import sys, rewardlang, rewardlang.cli, rewardlang.lsp; "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')))"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
