"""A spec's imports read only `.reward` files inside its folder and the search path (`REWARDLANG_IMPORT_PATH`, the
shipped library), regular files of bounded size, never blocking (issue 32, "Also" 1; rewardlang.specfiles). Each
refusal is an E105 at the import, before anything is read; nothing imported is ever executed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rewardlang.checker import check_source
from rewardlang.runtime import registry
from rewardlang.specfiles import MAX_SPEC_BYTES, library_dir

ROOT = Path(__file__).resolve().parents[2]
SIGS = registry.signatures()


def _check(main: Path, src: str, **kw) -> list:
    main.parent.mkdir(parents=True, exist_ok=True)
    main.write_text(src, encoding="utf-8")
    done: list = []
    t = threading.Thread(target=lambda: done.append(check_source(src, str(main), SIGS, **kw)), daemon=True)
    t.start()
    t.join(120)  # a read that blocks (a FIFO) would hang here: the bound makes it a failure, not a hang
    assert done, "the check did not finish (a blocking read?)"
    return done[0][1]


def _e105(diags: list) -> list[str]:
    return [d.message for d in diags if d.code == "E105"]


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """specs/ (the spec's folder, with lib/), and outside/ beside it holding a spec that must not be read."""
    specs, outside = tmp_path / "specs", tmp_path / "outside"
    (specs / "lib").mkdir(parents=True)
    outside.mkdir()
    (specs / "lib" / "terms.reward").write_text("let n = len(completion)\n")
    (outside / "secret.reward").write_text("let n = len(completion)\n")
    return {"specs": specs, "outside": outside, "main": specs / "main.reward"}


USE = "\ncomponent c = n\nreward = c\n"


def test_an_import_inside_the_folder_is_read(tree: dict[str, Path]) -> None:
    assert _e105(_check(tree["main"], 'import "lib/terms.reward"' + USE)) == []
    # a library file may reach another file of the folder with `..`, and a symlink inside the folder is followed
    (tree["specs"] / "lib" / "up.reward").write_text('import "../lib/terms.reward"\n')
    os.symlink(tree["specs"] / "lib" / "terms.reward", tree["specs"] / "alias.reward")
    assert _e105(_check(tree["main"], 'import "lib/up.reward"\nimport "alias.reward"' + USE)) == []


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "symlinked dir", "nested"])
def test_an_import_that_leads_outside_the_folder_is_refused(tree: dict[str, Path], how: str) -> None:
    secret = tree["outside"] / "secret.reward"
    if how == "dotdot":
        path = "../outside/secret.reward"
    elif how == "absolute":
        path = str(secret)
    elif how == "symlink":
        os.symlink(secret, tree["specs"] / "innocent.reward")
        path = "innocent.reward"
    elif how == "symlinked dir":
        os.symlink(tree["outside"], tree["specs"] / "lib" / "more")
        path = "lib/more/secret.reward"
    else:  # an imported file of the folder imports out of it
        (tree["specs"] / "lib" / "hop.reward").write_text('import "../../outside/secret.reward"\nlet m = 1\n')
        path = "lib/hop.reward"
    msgs = _e105(_check(tree["main"], f'import "{path}"' + USE))
    assert len(msgs) == 1 and f"leads to `{secret.resolve()}`, outside the spec's folder" in msgs[0], msgs


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "/etc/shadow", "helper.py", "data.jsonl",
                                  "../../../../../../proc/self/environ"])
def test_an_import_that_is_not_a_spec_is_refused_before_it_is_read(tree: dict[str, Path], path: str) -> None:
    msgs = _e105(_check(tree["main"], f'import "{path}"' + USE))
    assert msgs == [f"`{path}` is not a spec: an import names a `.reward` file"]


def test_a_python_file_named_like_a_spec_is_never_executed(tree: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    code = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    (tree["specs"] / "helper.py").write_text(code)
    (tree["specs"] / "helper.reward").write_text(code)  # Python in a file named like a spec: parsed, fails
    os.symlink(tree["specs"] / "helper.py", tree["specs"] / "linked.reward")  # a spec name leading to a .py
    diags = _check(tree["main"], 'import "helper.reward"' + USE)
    assert any(d.code.startswith("E0") for d in diags)  # a syntax error in helper.reward, nothing more
    msgs = _e105(_check(tree["main"], 'import "linked.reward"' + USE))
    assert len(msgs) == 1 and "which is not a `.reward` file" in msgs[0]
    assert not marker.exists()


def test_only_regular_files_of_bounded_size_are_read(tree: dict[str, Path]) -> None:
    specs = tree["specs"]
    os.mkfifo(specs / "pipe.reward")  # reading it would block for ever
    (specs / "dir.reward").mkdir()
    big = specs / "big.reward"
    with open(big, "w") as f:
        f.write("# " + "x" * MAX_SPEC_BYTES + "\n")
    for name, want in (("pipe.reward", "not a regular file"), ("dir.reward", "not a regular file"),
                       ("big.reward", f"more than a spec's {MAX_SPEC_BYTES}")):
        msgs = _e105(_check(tree["main"], f'import "{name}"' + USE))
        assert len(msgs) == 1 and want in msgs[0], (name, msgs)


def test_a_device_through_a_symlink_is_refused(tree: dict[str, Path]) -> None:
    os.symlink("/dev/zero", tree["specs"] / "zero.reward")  # would be read for ever
    msgs = _e105(_check(tree["main"], 'import "zero.reward"' + USE))
    assert len(msgs) == 1 and "leads to `/dev/zero`, outside the spec's folder" in msgs[0]


def test_the_search_path_and_the_shipped_library(tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # outside/ is refused ... until it is on the search path (the environment variable, or import_path=)
    assert _e105(_check(tree["main"], 'import "secret.reward"' + USE))
    monkeypatch.setenv("REWARDLANG_IMPORT_PATH", str(tree["outside"]))
    assert _e105(_check(tree["main"], 'import "secret.reward"' + USE)) == []
    assert _e105(_check(tree["main"], f'import "{tree["outside"] / "secret.reward"}"' + USE)) == []
    monkeypatch.delenv("REWARDLANG_IMPORT_PATH")
    assert _e105(_check(tree["main"], 'import "secret.reward"' + USE, import_path=[str(tree["outside"])])) == []
    # a spec anywhere reaches the shipped library by name
    assert library_dir() == str(ROOT / "specs" / "lib")
    diags = _check(tree["main"], 'from "codepo_terms.reward" import markers\ncomponent m = markers\nreward = m\n')
    assert _e105(diags) == [] and not [d for d in diags if d.is_error]


def test_check_reports_a_traversal_as_a_plain_error(tree: dict[str, Path]) -> None:
    tree["main"].write_text('import "../outside/secret.reward"' + USE)
    r = subprocess.run([sys.executable, "-m", "rewardlang", "check", str(tree["main"])], capture_output=True,
                       text=True, timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1 and "error[E105]" in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr
    assert "outside the spec's folder" in r.stdout + r.stderr


def test_the_compiled_spec_cache_follows_the_search_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same spec and files, another REWARDLANG_IMPORT_PATH: another file imported, never the cached one."""
    from rewardlang.compiler import load_program

    monkeypatch.setenv("REWARDLANG_CACHE_DIR", str(tmp_path / "cache"))
    for d, v in (("a", 1), ("b", 2)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "k.reward").write_text(f"let k = {v}\n")
    (tmp_path / "s").mkdir()
    spec = tmp_path / "s" / "main.reward"
    spec.write_text('import "k.reward"\ncomponent c = k + len(completion)\nreward = c\n')
    got = []
    for d in ("a", "b", "a"):
        monkeypatch.setenv("REWARDLANG_IMPORT_PATH", str(tmp_path / d))
        prog = load_program(str(spec))
        got.append(float(prog.score(["x"]).total[0]))
        prog.close()
    assert got == [2.0, 3.0, 2.0]
