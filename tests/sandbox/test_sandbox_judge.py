"""The trusted judge on synthetic (possibly forged) worker output: no sandbox needed."""

from __future__ import annotations

import json
import struct

import pytest

from rewardlang.sandbox._worker import Unencodable, encode_value
from rewardlang.sandbox.convert import make_plan
from rewardlang.sandbox.judge import (
    MalformedObservation,
    compare_stdout,
    decode_value,
    judge,
    parse_records,
)
from rewardlang.sandbox.raw import RawResult, RawRun


def frame(rec: list) -> bytes:
    b = json.dumps(rec).encode()
    return struct.pack("<I", len(b)) + b


def run(res: bytes, *, exit: int = 0, reason: str | None = None, out: bytes = b"") -> RawRun:
    return RawRun(exit=exit, reason=reason, cpu=0.0, wall=0.0, setup_failed=False, clean=True, res=res, out=out)


PLAN = make_plan(["assert f(2) == 4", "assert f(3) == 6", "assert f(4) == 8"], None, "mbpp")


def ok(i: int, v: object) -> bytes:
    return frame(["t", i, "ok", encode_value((v,))])


@pytest.mark.parametrize("value", [None, True, 3, -2**200, 2.5, float("inf"), "x\u00e9", b"\x00\xff", 1 + 2j,
                                   [1, [2]], (1, "a"), {1: (2,)}, {1, 2}, frozenset({3})])
def test_encoding_roundtrips_exactly(value: object) -> None:
    back = decode_value(json.loads(json.dumps(encode_value(value))))
    assert back == value and type(back) is type(value)


def test_encoder_refuses_subclasses_and_objects() -> None:
    class Sub(int):
        pass

    for bad in (Sub(1), object(), [1, Sub(2)], {"k": object()}):
        with pytest.raises(Unencodable):
            encode_value(bad)


def test_decoder_rejects_malformed_input() -> None:
    for bad in (["i", "zz"], ["q", 1], "x", ["l", "notalist"], ["i", "0x" + "f" * 200_000], ["d", [[1]]]):
        with pytest.raises((MalformedObservation, ValueError)):
            decode_value(bad)
    deep: list = ["n"]
    for _ in range(500):
        deep = ["l", [deep]]
    with pytest.raises(MalformedObservation):
        decode_value(deep)


def test_all_pass_and_partial() -> None:
    v = judge(PLAN, RawResult([run(ok(0, 4) + ok(1, 6) + ok(2, 8) + frame(["d"]))]))
    assert v.outcome == "pass" and v.pass_rate == 1.0
    v = judge(PLAN, RawResult([run(ok(0, 4) + ok(1, 7) + ok(2, 8) + frame(["d"]))]))
    assert v.outcome == "fail" and v.passed == 2 and v.total == 3
    assert [t.status for t in v.tests] == ["pass", "fail", "pass"]


def test_int_and_float_compare_like_python_but_bool_is_exact_type() -> None:
    p = make_plan(["assert f(1) == 2", "assert f(1) is True"], None, "mbpp")
    v = judge(p, RawResult([run(ok(0, 2.0) + ok(1, 1) + frame(["d"]))]))
    assert [t.status for t in v.tests] == ["pass", "fail"]


def test_timeout_marks_current_test_and_rest_not_run() -> None:
    v = judge(PLAN, RawResult([run(ok(0, 4), exit=-9, reason="cpu")]))
    assert v.outcome == "timeout"
    assert [t.status for t in v.tests] == ["pass", "timeout", "not_run"]
    assert v.pass_rate == pytest.approx(1 / 3)


def test_exit_code_is_never_a_pass_signal() -> None:
    v = judge(PLAN, RawResult([run(b"", exit=0)]))
    assert v.outcome == "runtime_error" and v.passed == 0


def test_forged_records_do_not_pass() -> None:
    forged = frame(["t", 0, "pass"]) + frame(["t", 1, "ok", "garbage"]) + frame(["t", 99, "ok", ["b", True]])
    v = judge(PLAN, RawResult([run(forged + frame(["d"]) + b"\xff\xff\xff\xffjunk")]))
    assert v.passed == 0
    assert [t.status for t in v.tests][:2] == ["fail", "fail"]


def test_a_second_record_fails_the_test_and_malformed_channel() -> None:
    # a second record for a test fails it, the right value first or second (issue 32: which process of the
    # program wrote first must not decide a verdict)
    for recs in (ok(0, 4) + ok(0, 5), ok(0, 5) + ok(0, 4), ok(0, 4) + ok(0, 4)):
        v = judge(PLAN, RawResult([run(recs + b"\x10\x00\x00\x00{", exit=0)]))
        assert v.tests[0].status == "fail" and "more than one record" in v.tests[0].detail
    assert v.tests[1].status == "runtime_error" and "malformed" in v.tests[1].detail
    recs, malformed = parse_records(frame(["d"]) + b"\x01")
    assert recs == [["d"]] and malformed


def test_compile_and_load_errors_fail_everything() -> None:
    v = judge(PLAN, RawResult([run(frame(["c", "SyntaxError: bad"]) + frame(["d"]))]))
    assert v.outcome == "compile_error" and [t.status for t in v.tests] == ["compile_error"] * 3
    v = judge(PLAN, RawResult([run(frame(["L", "memory", "MemoryError"]) + frame(["d"]))]))
    assert v.outcome == "memory" and v.passed == 0


def test_infra_is_not_a_verdict() -> None:
    v = judge(PLAN, RawResult(None, infra="slot died"))
    assert v.outcome == "infra" and v.infra == "slot died" and v.details()["infra"] == "slot died"


def test_severity_order() -> None:
    res = frame(["t", 0, "error", "ValueError"]) + frame(["t", 1, "memory", "MemoryError"]) + ok(2, 0)
    v = judge(PLAN, RawResult([run(res + frame(["d"]))]))
    assert v.outcome == "memory"


def test_stdio_whole_output_with_equal_line_counts() -> None:
    p = make_plan(json.dumps({"inputs": ["", ""], "outputs": ["1\n2\n", "1\n2"]}), None, "stdio")
    good = run(frame(["x", 0]), out=b"1  \n2\n\n")
    first_line_only = run(frame(["x", 0]), out=b"1\n")
    v = judge(p, RawResult([good, first_line_only]))
    assert [t.status for t in v.tests] == ["pass", "fail"]
    crashed = run(frame(["x", 1]), out=b"1\n2\n")
    v = judge(p, RawResult([crashed, run(b"", reason="wall", exit=-9)]))
    assert [t.status for t in v.tests] == ["runtime_error", "timeout"]
    v = judge(p, RawResult([run(b"", reason="cpu", exit=-9)]))  # stopped after a timeout
    assert [t.status for t in v.tests] == ["timeout", "not_run"]


def test_compare_stdout_modes() -> None:
    assert compare_stdout("a b\n", "a b", "lines")
    assert not compare_stdout("a\n", "a\nb", "lines")
    assert not compare_stdout("a\nb\n", "a\n", "lines")  # the open-r1 zip bug: extra lines must fail
    assert compare_stdout("a\n b", "a b", "tokens")
    assert not compare_stdout("a\n", "a", "exact")


def test_calls_format_apps_conventions() -> None:
    p = make_plan(json.dumps({"fn_name": "f", "inputs": [[1], [2], [3]], "outputs": [[1, 2], [5], 9]}))
    res = frame(["t", 0, "ok", encode_value((1, 2))]) + frame(["t", 1, "ok", encode_value(5)]) + \
        frame(["t", 2, "ok", encode_value(8)]) + frame(["d"])
    v = judge(p, RawResult([run(res)]))
    assert [t.status for t in v.tests] == ["pass", "pass", "fail"]
