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
