"""The verdict, computed in the trusted process from what a sandboxed run returned.

Nothing the program sends is trusted: observation frames are parsed defensively, values are decoded into
plain Python values with bounded size and depth, and compared here against expected values that never
entered the sandbox. The exit code is never a pass signal.

Outcomes of one execution (most severe first): ``compile_error`` (syntax error, or the entry point is
missing), ``timeout`` (CPU time, or the wall-clock backstop), ``memory``, ``output_limit`` (stdout or the
observations exceeded their cap), ``runtime_error``, ``fail``, ``pass``. A failure of the sandbox itself is
not an outcome: the :class:`Verdict` carries ``infra`` and the sample must be masked.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from rewardlang.sandbox.convert import Plan, Test
from rewardlang.sandbox.raw import RawResult, RawRun
from rewardlang.sandbox.safe_eval import HashFlood, check_hashes, safe_eval

__all__ = ["Verdict", "TestResult", "judge", "decode_value", "parse_records", "OUTCOMES", "compare_stdout", "OOM_WHY",
           "termination", "worst"]

#: outcome classes, most severe first
OUTCOMES = ("compile_error", "timeout", "memory", "output_limit", "runtime_error", "fail", "pass")
_SEVERITY = {o: i for i, o in enumerate(OUTCOMES)}
MAX_INT_HEX = 100_000
#: records read beyond one per test: the runner itself writes at most three more (compile or load error, done)
RECORD_SLACK = 16


@dataclass(frozen=True)
class TestResult:
    """One test's result: ``status`` is an outcome class or ``not_run``; ``inside`` marks a test that could
    not be split into probe and judge expression and ran as a whole in the judge process (a separate process
    holding no program code; see :mod:`rewardlang.sandbox.convert`)."""

    __test__ = False

    status: str
    detail: str = ""
    inside: bool = False

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True)
class Verdict:
    """The judged result of one (program, tests) pair."""

    outcome: str
    tests: tuple[TestResult, ...] = ()
    infra: str | None = None
    error: str | None = None
    level: str = ""
    cpu: float = 0.0
    wall: float = 0.0
    stdout: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> int:
        return sum(t.passed for t in self.tests)

    @property
    def total(self) -> int:
        return len(self.tests)

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.tests else (1.0 if self.outcome == "pass" else 0.0)

    @property
    def all_passed(self) -> bool:
        return self.outcome == "pass"

    def details(self) -> dict[str, Any]:
        d: dict[str, Any] = {"outcome": self.outcome, "passed": self.passed, "total": self.total,
                             "level": self.level, "cpu_s": self.cpu, "wall_s": self.wall,
                             "tests": [t.status for t in self.tests]}
        if any(t.inside for t in self.tests):
            d["judge_process_tests"] = sum(t.inside for t in self.tests)
        failing = [t.detail for t in self.tests if not t.passed and t.detail][:3]
        if failing:
            d["errors"] = failing
        if self.infra:
            d["infra"] = self.infra
        return d


class MalformedObservation(ValueError):
    pass


def _no_objects(pairs: list[tuple[str, Any]]) -> Any:
    raise ValueError("JSON objects are not part of the observation format")


def _small_int(s: str) -> int:
    if len(s) > 20:
        raise ValueError("number too long")
    return int(s)


def _small_float(s: str) -> float:
    if len(s) > 40:
        raise ValueError("number too long")
    return float(s)


#: The record parser: JSON lists only. No object is ever built from the program's keys (a dict of
#: attacker-chosen strings), and numbers are short (an int of a million digits costs quadratic time).
_decoder = json.JSONDecoder(object_pairs_hook=_no_objects, parse_int=_small_int, parse_float=_small_float)


def parse_records(data: bytes, limit: int = 1_000_000) -> tuple[list[list[Any]], bool]:
    """Split the result channel into JSON-list records; ``malformed`` when it does not parse to the end."""
    recs: list[list[Any]] = []
    pos, n = 0, len(data)
    while pos < n and len(recs) < limit:
        if pos + 4 > n:
            return recs, True
        size = struct.unpack_from("<I", data, pos)[0]
        if pos + 4 + size > n:
            return recs, True
        try:
            rec = _decoder.decode(data[pos + 4:pos + 4 + size].decode("utf-8"))
        except (ValueError, RecursionError):
            return recs, True
        if not isinstance(rec, list) or not rec or not isinstance(rec[0], str):
            return recs, True
        recs.append(rec)
        pos += 4 + size
    return recs, pos < n


def decode_value(enc: Any, depth: int = 0) -> Any:
    """Inverse of the sandbox's type-exact encoder (``_worker.encode_value``), on untrusted input.

    Linear in the size of ``enc``: a set, frozenset or dict is built only after
    :func:`~rewardlang.sandbox.safe_eval.check_hashes` found no more than a few of its elements
    sharing one hash value (Python's hash table would otherwise compare every colliding pair: integers
    ``k * (2**61 - 1) + c`` all hash alike, and so do tuples of them). Such a value is refused as
    malformed (the test fails) before any table is built.

        >>> decode_value(['l', [['i', '0x1'], ['t', [['f', '2.5'], ['s', 'a']]]]])
        [1, (2.5, 'a')]
        >>> m = 2**61 - 1
        >>> decode_value(['S', [['i', hex(k * m)] for k in range(100)]])
        Traceback (most recent call last):
        ...
        rewardlang.sandbox.judge.MalformedObservation: 100 elements of a set share one hash value
    """
    if depth > 120 or not isinstance(enc, list) or not enc or not isinstance(enc[0], str):
        raise MalformedObservation("malformed value")
    tag = enc[0]
    if tag == "n":
        return None
    if len(enc) < 2:
        raise MalformedObservation("malformed value")
    v = enc[1]
    if tag == "b" and isinstance(v, bool):
        return v
    if tag == "i" and isinstance(v, str) and len(v) <= MAX_INT_HEX:
        return int(v, 16)
    if tag == "f" and isinstance(v, str) and len(v) < 40:
        return float(v)
    if tag == "s" and isinstance(v, str):
        return v
    if tag == "y" and isinstance(v, str):
        return bytes.fromhex(v)
    if tag == "c" and len(enc) == 3 and isinstance(v, str) and isinstance(enc[2], str) and len(v) < 40:
        return complex(float(v), float(enc[2]))
    if isinstance(v, list):
        if tag == "l":
            return [decode_value(x, depth + 1) for x in v]
        if tag == "t":
            return tuple(decode_value(x, depth + 1) for x in v)
        if tag == "S" or tag == "F":
            items = [decode_value(x, depth + 1) for x in v]
            _guard(items, "a set")
            return set(items) if tag == "S" else frozenset(items)
        if tag == "d":
            keys, vals = [], []
            for kv in v:
                if not isinstance(kv, list) or len(kv) != 2:
                    raise MalformedObservation("malformed dict")
                keys.append(decode_value(kv[0], depth + 1))
                vals.append(decode_value(kv[1], depth + 1))
            _guard(keys, "a dict")
            return dict(zip(keys, vals))
    raise MalformedObservation(f"malformed value (tag {tag!r})")


def _guard(items: list[Any], what: str) -> None:
    try:
        check_hashes(items)
    except HashFlood as e:
        raise MalformedObservation(f"{e.count} elements of {what} share one hash value") from None


def compare_stdout(actual: str, expected: str, mode: str = "lines") -> bool:
    """Whole-output comparison. ``lines``: the same number of lines, each equal up to trailing whitespace
    (trailing blank lines ignored); ``tokens``: equal whitespace-separated tokens; ``exact``: identical.

        >>> compare_stdout("1\\n2\\n", "1\\n2"), compare_stdout("1\\n", "1\\n2")
        (True, False)
    """
    if mode == "exact":
        return actual == expected
    if mode == "tokens":
        return actual.split() == expected.split()
    a = [ln.rstrip() for ln in actual.rstrip().splitlines()]
    e = [ln.rstrip() for ln in expected.rstrip().splitlines()]
    return a == e


#: the detail of a test the memory cgroup's OOM killer ended
OOM_WHY = "memory limit exceeded (a process of the program was killed by the memory cgroup)"


def termination(run: RawRun) -> tuple[str, str]:
    """The class and detail of a test that has no result of its own, from how the run ended (a limit, a
    signal, an exit before the tests finished)."""
    if run.reason == "memory":
        return "memory", OOM_WHY
    if run.reason in ("cpu", "wall"):
        return "timeout", f"{'CPU' if run.reason == 'cpu' else 'wall-clock'} time limit exceeded"
    if run.reason in ("output", "obs"):
        return "output_limit", "output limit exceeded" if run.reason == "output" else "result too large"
    if run.reason == "killed":
        # the pool passes such a run on only after it happened again on a re-run on a fresh slot
        return "runtime_error", ("killed by SIGKILL, not by the sandbox or a limit, on two runs on "
                                 "different slots (the program's own doing)")
    if run.exit < 0:
        return "runtime_error", f"killed by signal {-run.exit}"
    return "runtime_error", f"exited ({run.exit}) before finishing the tests"


def worst(statuses: list[str]) -> str:
    """The outcome of a program from its tests' statuses: ``pass`` only when every test ran and passed.

    A ``not_run`` test never counts as passed. It follows a test that ended the execution (a timeout, a
    crash: that test's class is the outcome); a ``not_run`` with nothing but passes before it means the tests
    stopped for a reason outside the program (the sandbox could not go on), which is ``infra`` (masked),
    never a pass.

        >>> worst(["pass", "not_run"]), worst(["pass", "timeout", "not_run"]), worst(["pass", "pass"])
        ('infra', 'timeout', 'pass')
    """
    if all(s == "pass" for s in statuses):
        return "pass"
    failed = [s for s in statuses if s in _SEVERITY and s != "pass"]
    if failed:
        return min(failed, key=lambda s: _SEVERITY[s])
    return "infra" if statuses else "fail"


def _judge_probe(test: Test, payload: Any) -> tuple[str, str]:
    try:
        value = decode_value(payload)
    except (MalformedObservation, ValueError, TypeError, RecursionError, OverflowError) as e:
        return "fail", f"malformed observation: {e}"
    try:
        if test.judge is None:  # call-with-arguments pair: equality with the APPS conventions
            exp = test.expected
            ok = value == exp or (type(value) is tuple and list(value) == exp) or (
                isinstance(exp, list) and len(exp) == 1 and (value == exp[0] or (
                    type(value) is tuple and list(value) == exp[0])))
            return ("pass", "") if ok else ("fail", f"got {_short(value)}")
        if type(value) is not tuple or len(value) != test.n_values:
            return "fail", "malformed observation"
        env = {f"__rl_v{i}": v for i, v in enumerate(value)}
        ok = bool(safe_eval(test.judge, env))
    except Exception as e:  # the comparison itself raised (as the assert would have): a failed test
        return "fail", f"comparison raised {type(e).__name__}"
    shown = value[0] if len(value) == 1 else value
    return ("pass", "") if ok else ("fail", f"{test.source[:120]} (got {_short(shown)})")


def _short(v: Any) -> str:
    try:
        s = repr(v)
    except Exception:
        s = "?"
    return s if len(s) <= 120 else s[:117] + "..."


_DUPLICATE = TestResult("fail", "more than one record for this test (the program wrote on the result channel)")
_JUDGED = {"pass": "pass", "fail": "fail", "error": "runtime_error", "memory": "memory", "limit": "output_limit"}


def _judge_call(plan: Plan, run: RawRun) -> tuple[str, list[TestResult], str | None]:
    """(outcome, results, infrastructure failure or None) of a call-mode run. Probes are judged here from
    the program's channel; tests of kind ``inside`` only from the judge process's channel, which the
    program never holds (a record for them on the program's channel is forged and ignored)."""
    n = len(plan.tests)
    # The runner writes one record per test plus a few (compile error, load error, done); anything past that
    # is the program writing on the channel, and parsing it would cost this process time the program chose.
    recs, malformed = parse_records(run.res, limit=n + RECORD_SLACK)
    for rec in recs:
        if rec[0] == "c":
            msg = str(rec[1])[:300] if len(rec) > 1 else "compile error"
            return "compile_error", [TestResult("compile_error", msg, t.kind == "inside") for t in plan.tests], None
        if rec[0] == "L":
            status = "memory" if len(rec) > 1 and rec[1] == "memory" else "runtime_error"
            msg = str(rec[2])[:300] if len(rec) > 2 else ""
            return status, [TestResult(status, msg, t.kind == "inside") for t in plan.tests], None
    results: list[TestResult | None] = [None] * n
    for rec in recs:
        if rec[0] != "t" or len(rec) < 3 or type(rec[1]) is not int or not 0 <= rec[1] < n:
            continue
        i, kind = rec[1], rec[2]
        test = plan.tests[i]
        if test.kind == "inside":
            continue
        if results[i] is not None:
            # The runner writes one record per test, from the program's own process only (a process the
            # program forks never reports: _worker._owner_only); a second is the program writing on the
            # channel. Whichever came first, the test fails: the verdict never depends on which process
            # the scheduler ran first (issue 32), and a forged record never passes a test.
            results[i] = _DUPLICATE
            continue
        detail = str(rec[3])[:300] if len(rec) > 3 and isinstance(rec[3], str) else ""
        if kind == "memory":
            results[i] = TestResult("memory", detail)
        elif kind == "error":
            results[i] = TestResult("runtime_error", detail)
        elif kind == "ok" and len(rec) > 3:
            st, why = _judge_probe(test, rec[3])
            results[i] = TestResult(st, why)
        else:
            results[i] = TestResult("fail", detail or "result could not be encoded (not a plain value)")
    gone: set[int] = set()   # judged tests during which the program's process ended
    ended = False            # the judge process finished (every test, or stopped after a permanent refusal)
    if plan.n_inside:
        jrecs, _ = parse_records(run.judge or b"")
        for rec in jrecs:
            if rec[0] == "end":
                ended = True
            if rec[0] != "t" or len(rec) < 3 or type(rec[1]) is not int or not 0 <= rec[1] < n:
                continue
            i, kind = rec[1], rec[2]
            if results[i] is not None or plan.tests[i].kind != "inside" or i in gone:
                continue
            if kind == "gone":
                gone.add(i)
                continue
            detail = str(rec[3])[:300] if len(rec) > 3 and isinstance(rec[3], str) else ""
            results[i] = TestResult(_JUDGED.get(kind, "fail") if isinstance(kind, str) else "fail", detail, True)
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        first = missing[0]
        st, why = termination(run)
        if malformed and run.reason is None:  # a limit that cut the channel short names the class itself
            st, why = "runtime_error", "malformed result channel"
        if plan.tests[first].kind == "inside" and first not in gone and run.reason is None:
            info = run.judge_info or {}
            if info.get("cpu_limit"):
                st, why = "fail", "the test code exceeded its CPU limit in the judge process"
            elif ended and any(r is not None and not r.passed for r in results):
                st, why = "not_run", ""   # it stopped after a refusal that no later call could get past
            else:
                # The judge process stopped without deciding this test while the program did not end by a
                # limit: nothing the program controls (it cannot signal, trace or starve the judge process,
                # see docs/sandbox.md). A mask, never a pass and never a 0.
                return "infra", [], (f"the judge process ended without deciding test {first} "
                                     f"(exit {info.get('exit')}, killed {bool(info.get('killed'))})")
        results[first] = TestResult(st, why, plan.tests[first].kind == "inside")
        for i in missing[1:]:
            results[i] = TestResult("not_run", "", plan.tests[i].kind == "inside")
    final = [r for r in results if r is not None]
    return worst([r.status for r in final]), final, None


def _judge_process(run: RawRun) -> tuple[str, str]:
    """How a whole-program run (stdio or script mode) ended: ``pass`` means it finished cleanly."""
    recs, _ = parse_records(run.res, limit=RECORD_SLACK)
    for rec in recs:
        if rec[0] == "c":
            return "compile_error", str(rec[1])[:300] if len(rec) > 1 else ""
    if run.reason is not None:
        return termination(run)
    for rec in recs:
        if rec[0] == "L":
            return ("memory" if len(rec) > 1 and rec[1] == "memory" else "runtime_error",
                    str(rec[2])[:300] if len(rec) > 2 else "")
        if rec[0] == "x":
            code = rec[1] if len(rec) > 1 else 1
            return ("pass", "") if code == 0 else ("runtime_error", f"exit status {code}")
    if run.exit == 0:
        return "pass", ""  # os._exit(0): still only the output decides
    return termination(run)


def judge(plan: Plan | None, raw: RawResult, *, level: str = "", compare: str = "lines") -> Verdict:
    """The verdict for one request (``plan`` None: an ``executes`` script run)."""
    if raw.runs is None:
        return Verdict("infra", infra=raw.infra or "sandbox failure", level=level)
    runs = raw.runs
    cpu = sum(r.cpu for r in runs)
    wall = sum(r.wall for r in runs)
    out = runs[0].out[:2000].decode("utf-8", "replace") if runs else ""
    if plan is None:
        st, why = _judge_process(runs[0])
        return Verdict(st, (TestResult(st, why),), level=level, cpu=cpu, wall=wall, stdout=out)
    if plan.mode == "call":
        outcome, tests, infra = _judge_call(plan, runs[0])
        if infra is not None:
            return Verdict("infra", infra=infra, level=level, cpu=cpu, wall=wall, notes=plan.notes)
        if outcome == "infra":
            return Verdict("infra", tuple(tests), infra="tests did not run", level=level, cpu=cpu, wall=wall)
        if runs[0].reason == "memory" and _SEVERITY.get(outcome, 0) > _SEVERITY["memory"]:
            # The memory cgroup killed one of its processes (e.g. a forked child) and the program still
            # reported every test: the execution went over its budget, and one execution runs all the
            # tests, so none of them passed within it.
            tests = [TestResult("memory", OOM_WHY, t.inside) if t.status == "pass" else t for t in tests]
            outcome = "memory"
        return Verdict(outcome, tuple(tests), level=level, cpu=cpu, wall=wall, stdout=out, notes=plan.notes)
    results: list[TestResult] = []
    for i, test in enumerate(plan.tests):
        if i >= len(runs):
            results.append(TestResult("not_run"))
            continue
        st, why = _judge_process(runs[i])
        if st == "pass":
            actual = runs[i].out.decode("utf-8", "replace")
            if not compare_stdout(actual, str(test.expected), compare):
                st, why = "fail", f"wrong output for {test.source}"
        results.append(TestResult(st, why))
    outcome = worst([r.status for r in results])
    if outcome == "infra":  # the pool re-runs what a recycled slot left; reaching here means it could not
        return Verdict("infra", tuple(results), infra="stdin/stdout cases did not run", level=level, cpu=cpu,
                       wall=wall, stdout=out)
    return Verdict(outcome, tuple(results), level=level, cpu=cpu, wall=wall, stdout=out)
