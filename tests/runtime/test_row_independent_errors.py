"""A row-independent value that is no number (x / 0, 0 ** -1, (-8) ** (1/3), log(0), exp(1000)) is an error of its
component on every sample, following `on_error`, as the same result on per-sample values is; it never aborts the
batch (it used to raise ComponentError or ZeroDivisionError out of score()) and is never a silent none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rewardlang

# piecewise(2, ...) is not folded by the checker, so these reach the runtime as row-independent scalars
ZERO = "piecewise(2, 0 -> 0, 2 -> 0, 5 -> 1)"
CASES = {
    "division": f"1 / {ZERO}",
    "modulo": f"1 % {ZERO}",
    "zero to a negative power": f"{ZERO} ** -1",
    "negative to a fractional power": f"({ZERO} - 8) ** (1 / 3)",
    "log of zero": f"log({ZERO})",
    "square root of a negative": f"sqrt({ZERO} - 1)",
    "overflowing exp": f"exp(1000 + {ZERO})",
    "overflowing power": f"(10 + {ZERO}) ** 400",
}


def _load(tmp_path: Path, expr: str, clause: str = "") -> rewardlang.Program:
    spec = tmp_path / "s.reward"
    spec.write_text(f"component c in [-1000, 1000] = {expr}{clause}\ncomponent d in [0, 100] = len(completion)\n")
    return rewardlang.load(str(spec))


@pytest.mark.parametrize("expr", list(CASES.values()), ids=list(CASES))
def test_a_row_independent_non_number_is_an_error_of_every_sample(tmp_path: Path, expr: str) -> None:
    out = _load(tmp_path, expr).score(completion=["", "ab", "abc"])
    assert out.errors["c"] == ["the result is not a finite number"] * 3
    assert np.isnan(out.total).all() and out.masked["c"].all()
    assert out.components["d"].tolist() == [0.0, 2.0, 3.0]  # the other component is untouched


@pytest.mark.parametrize("expr", list(CASES.values()), ids=list(CASES))
def test_on_error_applies_to_a_row_independent_non_number(tmp_path: Path, expr: str) -> None:
    out = _load(tmp_path, expr, "\n    on_error 0").score(completion=["", "ab"])
    assert out.components["c"].tolist() == [0.0, 0.0] and not out.masked["c"].any()
    assert out.total.tolist() == [0.0, 2.0]
