"""The language server in a hostile workspace (issue 32 "Also" 1, issue 37 item 20): it never executes code from a
document or the workspace, never reads a file that is not a spec as one, answers requests on documents it was not
given with nothing (it used to fail with an internal error and a traceback, or read the file from disk), and its
imports read only what `rewardlang check` reads (tests/language/test_imports_confined.py)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from rewardlang.lsp.client import LspClient, LspError, uri_of

ROOT = Path(__file__).resolve().parents[2]
DENSE = ROOT / "specs" / "dense_ppo.reward"
OPTIONS = {"tabSize": 4, "insertSpaces": True}


def _all_requests(c: LspClient, path: Path) -> dict[str, object]:
    uri = uri_of(path)
    pos = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
    return {"hover": c.request("textDocument/hover", pos), "definition": c.request("textDocument/definition", pos),
            "completion": c.request("textDocument/completion", pos),
            "formatting": c.request("textDocument/formatting", {"textDocument": {"uri": uri}, "options": OPTIONS}),
            "symbols": c.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})}


def test_requests_on_documents_never_opened_get_nothing(tmp_path: Path) -> None:
    """Before: a missing file gave an internal error (-32603) with a Python traceback; an existing file that was
    never opened (a spec, or /etc/passwd) was read from disk and analysed."""
    with LspClient() as c:
        c.initialize(ROOT)
        for path in (tmp_path / "nope.reward", DENSE, Path("/etc/passwd")):
            got = _all_requests(c, path)
            assert got == dict.fromkeys(got), (path, got)
        # opened, then closed: nothing again
        c.open(DENSE)
        c.diagnostics(DENSE)
        assert _all_requests(c, DENSE)["symbols"]
        c.notify("textDocument/didClose", {"textDocument": {"uri": uri_of(DENSE)}})
        assert _all_requests(c, DENSE)["symbols"] is None
        assert not [m for m in c.notifications if uri_of("/etc/passwd") in str(m)]
        assert not any("Traceback" in line for line in c.stderr)


def test_malformed_requests_get_a_plain_error_and_the_server_goes_on() -> None:
    """Before: a request whose params are not the protocol's (a negative position, no position, ``params: null``)
    was never answered (pygls logged a traceback and dropped it: the editor waited for ever)."""
    uri = uri_of(DENSE)
    with LspClient(timeout=60) as c:
        c.initialize(ROOT)
        c.open(DENSE)
        c.diagnostics(DENSE)
        for method, params, where in (
                ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}},
                 "$.params.position"),
                ("textDocument/hover", {"textDocument": {"uri": uri}}, "required field missing @ $.params.position"),
                ("textDocument/definition", None, "expected DefinitionParams @ $.params"),
                ("textDocument/formatting", {"textDocument": {"uri": uri}},
                 "required field missing @ $.params.options"),
                ("textDocument/documentSymbol", {"position": {"line": 0, "character": 0}},
                 "required field missing @ $.params.textDocument")):
            with pytest.raises(LspError) as e:
                c.request(method, params)
            err = e.value.args[0]
            assert "'code': -32602" in err and f"{method}: the params are not what the protocol says" in err, err
            assert where in err and "Traceback" not in err and "traceback" not in err, err
        c.notify("textDocument/didChange", {"textDocument": {"uri": 5}})  # a notification: dropped, one line
        assert c.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})  # and it goes on
        end = time.monotonic() + 60  # its log is read by another thread: wait for the six lines, not a time
        while sum("a message the server cannot read" in line for line in c.stderr) < 6:
            assert time.monotonic() < end, "".join(c.stderr)
            time.sleep(0.05)
        assert not any("Traceback" in line for line in c.stderr), "".join(c.stderr)


def test_a_document_that_is_not_a_spec_is_never_analysed(tmp_path: Path) -> None:
    py = tmp_path / "helper.py"
    py.write_text("import os\n")
    tricky = tmp_path / "notes.reward.py"
    tricky.write_text("x = 1\n")
    with LspClient() as c:
        c.initialize(tmp_path)
        for path in (py, tricky):
            c.notify("textDocument/didOpen", {"textDocument": {"uri": uri_of(path), "languageId": "python",
                                                               "version": 1, "text": path.read_text()}})
        c.open(DENSE)  # answered in order: its diagnostics come after any the two documents above would get
        c.diagnostics(DENSE)
        published = {n["params"]["uri"] for n in c.notifications if n.get("method") == "textDocument/publishDiagnostics"}
        assert uri_of(py) not in published and uri_of(tricky) not in published
        assert _all_requests(c, py) == dict.fromkeys(_all_requests(c, py))
        # the language says so: a document in the `reward` language is a spec whatever its name
        other = tmp_path / "spec.txt"
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri_of(other), "languageId": "reward",
                                                           "version": 1, "text": "let = \n"}})
        assert [d["code"] for d in c.diagnostics(other, version=1)] == ["E001"]


@pytest.mark.skipif(shutil.which("rewardlang") is None, reason="the `rewardlang` console script is not installed")
def test_a_hostile_workspace_runs_nothing_and_its_imports_stay_inside(tmp_path: Path) -> None:
    """The server started as editors start it (`rewardlang lsp`, in the workspace): Python files named like the
    modules it imports, a spec importing with `..`, an absolute path, a symlink out of the folder, a `.py` file
    and a `.reward` file holding Python. Nothing runs (no marker), each import is the checker's E105, and
    go-to-definition of a refused import leads nowhere."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.reward").write_text("let n = 1\n")
    markers = tmp_path / "markers"
    markers.mkdir()
    payload = f"import pathlib\npathlib.Path({str(markers)!r}, __name__ + '.ran').write_text('ran')\n"
    for mod in ("numpy", "regex", "lark", "pydantic", "typer", "pygls", "lsprotocol", "rewardlang_plugin",
                "conftest", "setup"):
        (ws / f"{mod}.py").write_text(payload)
    (ws / "helper.py").write_text(payload)
    (ws / "python.reward").write_text(payload)
    os.symlink(outside / "secret.reward", ws / "innocent.reward")
    main = ws / "main.reward"
    lines = ['import "../outside/secret.reward"', f'import "{outside / "secret.reward"}"', 'import "innocent.reward"',
             'import "helper.py"', 'import "../../../../etc/passwd"', 'import "python.reward"',
             "component c = len(completion)", "reward = c"]
    text = "\n".join(lines) + "\n"
    main.write_text(text)
    env = {"PYTHONPATH": str(ROOT)}
    with LspClient([shutil.which("rewardlang"), "lsp"], env=env, cwd=ws) as c:
        c.initialize(ws)
        c.open(main)
        diags = c.diagnostics(main)
        e105 = sorted(d["range"]["start"]["line"] for d in diags if d["code"] == "E105")
        assert e105 == [0, 1, 2, 3, 4], diags
        assert any(d["range"]["start"]["line"] == 5 and d["code"].startswith("E0") for d in diags)  # Python: parsed
        for line in range(5):
            assert c.at("textDocument/definition", main, line, 10) is None
            c.at("textDocument/hover", main, line, 10)
        c.at("textDocument/completion", main, 6, 14)
        c.request("textDocument/formatting", {"textDocument": {"uri": uri_of(main)}, "options": OPTIONS})
        assert not any("Traceback" in line for line in c.stderr)
    assert sorted(p.name for p in markers.iterdir()) == []


def test_python_m_in_the_workspace_drops_it_from_the_path(tmp_path: Path) -> None:
    """`python -m rewardlang lsp` (not what editors run) puts its working directory first on sys.path; the
    server takes it off before it answers, so the modules it imports later (numpy, with the components, at the
    first check) never come from the workspace."""
    (tmp_path / "numpy.py").write_text(f"import pathlib\npathlib.Path({str(tmp_path)!r}, 'ran').write_text('x')\n")
    spec = tmp_path / "s.reward"
    spec.write_text("component c = len(completion)\nreward = c\n")
    with LspClient([sys.executable, "-m", "rewardlang", "lsp"], env={"PYTHONPATH": str(ROOT)}, cwd=tmp_path) as c:
        c.initialize(tmp_path)
        c.open(spec)
        assert c.diagnostics(spec) == []
        c.at("textDocument/completion", spec, 0, 14)
    assert not (tmp_path / "ran").exists()
