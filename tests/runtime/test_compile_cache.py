"""The on-disk cache of compiled specs (rewardlang.compiler._compile_cached): a hit skips the parser and
checker, and any change to what the spec was compiled from (its file, an imported file, parameters) recompiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardlang import compiler as P


@pytest.fixture
def counted(tmp_path: Path, monkeypatch) -> list[str]:
    monkeypatch.setenv("REWARDLANG_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[str] = []
    real = P.compile_spec

    def compile_spec(path, params=None, source=None):
        calls.append(path)
        return real(path, params, source)

    monkeypatch.setattr(P, "compile_spec", compile_spec)
    return calls


def test_a_second_load_is_a_cache_hit_with_the_same_program_and_warnings(tmp_path: Path, counted) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text('component a = len(tag(completion, "x"))\n')   # W004: a may be none
    first = P.load_program(str(spec))
    second = P.load_program(str(spec))
    assert counted == [str(spec)]                                     # compiled once
    assert second.python_source == first.python_source
    assert [d.code for d in second.warnings] == [d.code for d in first.warnings] == ["W004"]
    assert second.score(completion=["<x>abc</x>"]).total.tolist() == [3.0]


def test_changed_spec_import_or_params_recompile(tmp_path: Path, counted) -> None:
    lib = tmp_path / "lib.reward"
    lib.write_text("component a = len(completion)\n")
    spec = tmp_path / "s.reward"
    spec.write_text('import "lib.reward"\nparam k: number = 1\ncomponent b = k\n')
    assert P.load_program(str(spec)).score(completion=["ab"]).total.tolist() == [3.0]
    lib.write_text("component a = 2 * len(completion)\n")            # an imported file changed
    assert P.load_program(str(spec)).score(completion=["ab"]).total.tolist() == [5.0]
    assert P.load_program(str(spec), params={"k": 3}).score(completion=["ab"]).total.tolist() == [7.0]
    spec.write_text('import "lib.reward"\ncomponent b = 10\n')         # the spec itself changed
    assert P.load_program(str(spec)).score(completion=["ab"]).total.tolist() == [14.0]
    assert len(counted) == 4
    P.load_program(str(spec), params=None)
    assert len(counted) == 4                                          # and the last one is a hit


def test_errors_are_not_cached_and_an_empty_cache_dir_turns_it_off(tmp_path: Path, counted, monkeypatch) -> None:
    from rewardlang.diagnostics import SpecError

    spec = tmp_path / "bad.reward"
    spec.write_text("component a = nope\n")
    for _ in range(2):
        with pytest.raises(SpecError):
            P.load_program(str(spec))
    assert len(counted) == 2
    monkeypatch.setenv("REWARDLANG_CACHE_DIR", "")
    spec.write_text("component a = 1\n")
    P.load_program(str(spec))
    P.load_program(str(spec))
    assert len(counted) == 4
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.pickle"))


def test_a_corrupt_entry_is_recompiled(tmp_path: Path, counted) -> None:
    spec = tmp_path / "s.reward"
    spec.write_text("component a = 1\n")
    P.load_program(str(spec))
    for entry in (tmp_path / "cache").rglob("*.pickle"):
        entry.write_bytes(b"not a pickle")
    assert P.load_program(str(spec)).score(completion=["x"]).total.tolist() == [1.0]
    assert len(counted) == 2


def test_an_entry_serves_only_the_spelling_it_was_compiled_under(tmp_path: Path, counted, monkeypatch) -> None:
    """Diagnostics and examples name the spec as it was given: a relative spelling's entry served for the
    absolute path named the examples by the relative one, and `check --set` (which looks the examples up by
    file in the spec as written) reported an example that passes as written as failing."""
    from typer.testing import CliRunner

    from rewardlang.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.reward").write_text('param w: number = 1\ncomponent a = w * len(completion)\n'
                                       'example { completion: "ab", expect a = 2 }\n')
    rel = P.load_program("s.reward")
    absolute = P.load_program(str(tmp_path / "s.reward"))
    assert counted == ["s.reward", str(tmp_path / "s.reward")]
    assert [f for _, f, *_ in rel.run_examples()] == ["s.reward"]
    assert [f for _, f, *_ in absolute.run_examples()] == [str(tmp_path / "s.reward")]
    r = CliRunner().invoke(app, ["check", str(tmp_path / "s.reward"), "--set", "w=2"])
    assert r.exit_code == 0, r.stderr
    assert "with --set, 1 example (example 1) gives other values than expected" in r.stderr, r.stderr
