"""The sandbox facade: level probing, batching with de-duplication, a verdict cache, and judging.

    >>> from rewardlang.sandbox import Sandbox, Task
    >>> with Sandbox() as sb:                                   # doctest: +SKIP
    ...     v = sb.evaluate([Task("def inc(x):\\n    return x + 1\\n", ["assert inc(1) == 2"])])[0]
    >>> v.outcome, v.pass_rate                                  # doctest: +SKIP
    ('pass', 1.0)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from rewardlang.lru import LRUCache
from rewardlang.sandbox import _worker
from rewardlang.sandbox.config import (
    LEVEL_RANK,
    NOT_A_BOUNDARY,
    RUN_END_S,
    Limits,
    SandboxConfig,
)
from rewardlang.sandbox.convert import Plan, TestFormatError, make_plan
from rewardlang.sandbox.judge import (
    TestResult,
    Verdict,
    decode_value,
    judge,
    parse_records,
)
from rewardlang.sandbox.languages import LanguagePlan, ToolchainMissing, language_plan
from rewardlang.sandbox.launch import LevelUnavailable, find_bwrap
from rewardlang.sandbox.pool import Slot, SlotFailure, SlotPool
from rewardlang.sandbox.raw import RawResult

__all__ = ["Sandbox", "Task", "probe_level", "choose_level", "expected_level", "get_sandbox", "close_sandbox"]

log = logging.getLogger("rewardlang.sandbox")
_KILL_COUNTS = ("outside_kills", "kills_again_on_rerun")

NPROC_BASE = {"bwrap": 2, "namespaces": 1, "uid": 1, "limits": -1}

_PROBE_PROGRAM = '''
import os
def __rl_probe():
    facts = {"uid": os.getuid(), "env": len(os.environ)}
    def attempt(name, fn):
        try:
            fn()
            facts[name] = True
        except BaseException:
            facts[name] = False
    def write_outside():
        with open("/usr/.rewardlang-probe", "w") as fh:
            fh.write("x")
    def sock():
        import socket
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    def read_root():
        os.listdir("/root")
    attempt("write_usr", write_outside)
    attempt("socket", sock)
    attempt("kill_parent", lambda: os.kill(os.getppid(), 0))
    return facts
'''


@dataclass(frozen=True)
class Task:
    """One execution to judge: a program, its tests (see :mod:`~rewardlang.sandbox.convert` for
    the formats), the limits, and how to compare stdout. ``tests=None`` just runs the program as a script
    (``executes``)."""

    code: str | None
    tests: str | Sequence[str] | None = None
    entry_point: str | None = None
    format: str = "auto"
    limits: Limits = Limits()
    compare: str = "lines"
    #: ``python`` or a code of :data:`~rewardlang.sandbox.languages.LANGUAGES` (structured tests,
    #: an argv program: see languages.py)
    language: str = "python"
    #: CPU seconds of an argv program's compile step (None: the language profile's default)
    compile_cpu: float | None = None
    #: trusted helper code for Python tests (e.g. the task's prompt), run in the judge process only; the tests'
    #: names resolve to it, never to the program's (:func:`~rewardlang.sandbox.convert.make_plan`)
    prelude: str | None = None


def _answer_key(tests: str | Sequence[str] | None) -> bytes:
    """A digest of the tests as given: the expected values, judge expressions and stdout answers that the
    request sent into the sandbox leaves out (so a verdict cached for one answer key is never reused for
    another with the same calls or inputs)."""
    if tests is None:
        return b"script"
    blob = tests if isinstance(tests, str) else json.dumps(list(tests), ensure_ascii=False, sort_keys=True,
                                                           default=repr)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()


def probe_level(level: str, config: SandboxConfig) -> tuple[dict[str, Any], Slot | None]:
    """Start a slot at ``level`` and check its isolation with a probe program.

    Returns (report, running slot or None). The report has ``available``, ``reason`` and ``facts``."""
    slot = Slot(config, level, 0)
    report: dict[str, Any] = {"available": False, "reason": None, "facts": {}}
    try:
        slot.start()
        req = {"mode": "call", "code": _PROBE_PROGRAM, "setup": "", "entry": "__rl_probe", "param": "candidate",
               "probes": [{"a": []}], "limits": Limits(cpu=5).to_wire(NPROC_BASE[level])}
        head, blobs = slot.request(req, 30.0)
        recs, _ = parse_records(blobs[0])
        facts = next((decode_value(r[3]) for r in recs if r[0] == "t" and len(r) > 3 and r[2] == "ok"), None)
        if not isinstance(facts, dict):
            raise SlotFailure(f"probe program failed: {recs[:2]}")
        report["facts"] = facts
        problems = []
        if level != "limits":
            if facts.get("uid") == 0:
                problems.append("programs run as root")
            if facts.get("write_usr"):
                problems.append("programs can write to /usr")
            if facts.get("socket") and level in ("bwrap", "namespaces", "uid"):
                problems.append("programs can open network sockets")
            if facts.get("kill_parent"):
                problems.append("programs can signal the worker")
        if facts.get("env"):
            problems.append("the environment is not empty")
        if problems:
            raise LevelUnavailable("probe: " + "; ".join(problems))
        report["available"] = True
        report["uid"] = slot.uid
        report["worker"] = dict(slot.info)
        return report, slot
    except (LevelUnavailable, SlotFailure, OSError, ValueError) as e:
        report["reason"] = str(e)
        slot.close()
        return report, None
    except BaseException:  # Ctrl-C or SIGTERM while the slot starts: leave no slot behind
        slot.close()
        raise


def _read_sysctl(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _userns_blocked(bwrap: str) -> str | None:
    """Why user namespaces (which bubblewrap needs) are not permitted here, or None. Static settings first,
    then bubblewrap itself on a trivial command: only a refusal of *permission* counts as a missing
    prerequisite (any other failure of that command is left to the slot's own probe, where it is an
    infrastructure failure of the expected level)."""
    if _read_sysctl("/proc/sys/user/max_user_namespaces") == "0":
        return "user namespaces are disabled (user.max_user_namespaces = 0)"
    if _read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
    try:
        r = subprocess.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "--", "true"], capture_output=True,
                           text=True, timeout=10, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError):
        return None
    err = r.stderr.lower()
    if r.returncode != 0 and ("permission" in err or "not permitted" in err):
        return f"bubblewrap cannot create a user namespace here ({r.stderr.strip()[:200]})"
    return None


def expected_level(config: SandboxConfig) -> tuple[str | None, dict[str, str]]:
    """The level this machine is known to give: the strongest whose prerequisites it has (bubblewrap and
    user namespaces; root on x86_64; root), and for each stronger level why not.

    Automatic selection takes this level and no other: when its start-up probe fails, that is a failure
    of the infrastructure (masked, retried), never a reason to run programs less isolated. The ``limits``
    level (no isolation) is never expected: it runs only when asked for by name.

        >>> expected_level(SandboxConfig(slots=1))[0]           # doctest: +SKIP
        'bwrap'
    """
    why: dict[str, str] = {}
    root = os.geteuid() == 0
    bwrap = find_bwrap(config)
    if bwrap is None:
        why["bwrap"] = "bubblewrap (bwrap) not found on PATH (apt-get install -y bubblewrap)"
    elif _worker._machine() not in _worker.AUDIT_ARCH:
        why["bwrap"] = f"no seccomp filter for architecture {_worker._machine()}"
    else:
        blocked = _userns_blocked(bwrap)
        if blocked is None:
            return "bwrap", why
        why["bwrap"] = blocked
    if root and _worker._machine() == "x86_64":
        return "namespaces", why
    why["namespaces"] = "needs root on x86_64"
    if root:
        return "uid", why
    why["uid"] = "needs root (to run programs under a dedicated uid)"
    why["limits"] = ("not chosen automatically: it is no security boundary; set REWARDLANG_SANDBOX_LEVEL=limits "
                     "to run programs unisolated")
    return None, why


def choose_level(config: SandboxConfig) -> tuple[str, dict[str, dict[str, Any]], Slot | None]:
    """The forced level, or the level this machine is known to give (:func:`expected_level`); never a
    weaker one. Raises LevelUnavailable when that level does not start (the caller masks and retries)."""
    reports: dict[str, dict[str, Any]] = {}
    if config.level:
        level = config.level
    else:
        found, why = expected_level(config)
        for lv, reason in why.items():
            reports[lv] = {"available": False, "reason": reason, "facts": {}}
        if found is None:
            raise LevelUnavailable("no isolating sandbox level on this machine (" +
                                   "; ".join(f"{k}: {v}" for k, v in why.items()) + ")")
        level = found
    report, slot = probe_level(level, config)
    reports[level] = report
    if slot is not None:
        if not config.level and level != "bwrap":
            _announce_below_bwrap(level, reports)
        return level, reports, slot
    if config.level:
        raise LevelUnavailable(f"the sandbox level {level!r} that was asked for does not work: {report['reason']}")
    raise LevelUnavailable(f"the {level!r} sandbox level this machine provides failed to start: {report['reason']} "
                           f"(an infrastructure failure: samples are masked and the start is retried; a weaker "
                           f"level runs only when asked for, e.g. REWARDLANG_SANDBOX_LEVEL=...)")


def _announce_below_bwrap(level: str, reports: dict[str, dict[str, Any]]) -> None:
    msg = f"sandbox: running at level {level!r}, not 'bwrap' ({reports.get('bwrap', {}).get('reason')})"
    log.warning(msg)
    print(f"warning: {msg}", file=sys.stderr, flush=True)


_warned = False


def _announce_weak(level: str) -> None:
    global _warned
    if level == "limits" and not _warned:
        _warned = True
        log.warning(NOT_A_BOUNDARY)
        print(f"\n*** WARNING: {NOT_A_BOUNDARY} ***\n", file=sys.stderr, flush=True)


class Sandbox:
    """A pool of sandbox slots with the judge in front of it. Thread-safe; close it (or use ``with``)."""

    def __init__(self, config: SandboxConfig | None = None, *, cache_size: int = 50_000) -> None:
        self.config = config or SandboxConfig()
        self.level, self.level_reports, first = choose_level(self.config)
        try:
            _announce_weak(self.level)
            self.pool = SlotPool(self.config, self.level, first=first)
        except BaseException:  # interrupted before the pool owns the probe's slot: close it here
            if first is not None:
                first.close()
            raise
        self.cache = LRUCache(cache_size)
        self.stats: Counter[str] = Counter()
        self.pid = os.getpid()
        self._lock = threading.Lock()

    # -- public -------------------------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return LEVEL_RANK[self.level]

    @property
    def security_boundary(self) -> bool:
        return self.level != "limits"

    def evaluate(self, tasks: Sequence[Task], *, cache: LRUCache | None = None, use_cache: bool = True,
                 stats: Counter[str] | None = None) -> list[Verdict]:
        """Judge every task. Identical tasks run once; verdicts are cached across calls (``cache``:
        a shared cache, default this sandbox's own). Infrastructure failures come back as verdicts with
        ``outcome == "infra"`` (mask them), never as failures.

        Two tasks share a run and a cached verdict only when everything the verdict depends on is equal: the
        request sent into the sandbox (program, test calls, limits), the level, *and* the answer key that
        never enters it (the tests as given, whose expected values and judge expressions the request leaves
        out, the entry point, the format and the stdout comparison). Raw results are judged as they complete,
        on the slot thread that completed them, and released at once: at most one unjudged raw result per
        slot, so the trusted process holds a bounded amount of program output whatever the batch size.
        """
        cache = cache if cache is not None else self.cache
        counts: Counter[str] = Counter()
        out: list[Verdict | None] = [None] * len(tasks)
        pending: dict[str, tuple[tuple[bytes, ...], float, Plan | None, str, list[int]]] = {}
        answer_keys: dict[int, bytes] = {}  # id(tests) -> digest: a GRPO group shares one tests object
        for i, task in enumerate(tasks):
            if task.language != "python":
                got = self._language_request(task)
                if isinstance(got, Verdict):
                    out[i] = got
                    if got.infra:
                        counts["infra_failures"] += 1
                        counts["toolchain_missing"] += 1
                    continue
                key, payload, hard, lplan = got
                if key in pending:
                    pending[key][4].append(i)
                    counts["batch_duplicates"] += 1
                elif use_cache and (hit := cache.get(key)) is not None:
                    out[i] = hit
                    counts["cache_hits"] += 1
                else:
                    pending[key] = (payload, hard, lplan, task.compare, [i])  # type: ignore[assignment]
                continue
            try:
                plan = make_plan(task.tests, task.entry_point, task.format, task.prelude) \
                    if task.tests is not None else None
            except TestFormatError as e:
                out[i] = Verdict("error", error=str(e), level=self.level)
                continue
            if task.code is None:  # no program at all (e.g. no code block): every test fails to compile
                n_tests = len(plan.tests) if plan is not None else 1
                out[i] = Verdict("compile_error", tuple(TestResult("compile_error", "no code") for _ in
                                                        range(n_tests)), level=self.level)
                continue
            req = plan.wire() if plan is not None else {"mode": "script"}
            req["limits"] = task.limits.to_wire(NPROC_BASE[self.level])
            header = json.dumps(req).encode("utf-8", "surrogatepass")  # sent as is: encoded once
            # the program's text is a frame of its own (see pool._frames: the worker never parses it)
            code = task.code.encode("utf-8", "surrogatepass")
            h = hashlib.sha256(header)
            h.update(b"\0code\0" + code)
            payload: tuple[bytes, ...] = (header, code)
            jw = plan.judge_wire() if plan is not None else None
            if jw is not None:   # judged tests: a third frame, for the judge process only
                jpayload = json.dumps(jw).encode("utf-8", "surrogatepass")
                h.update(b"\0judged\0" + jpayload)
                payload = (header, code, jpayload)
            h.update(f"\0{self.level}\0{task.compare}\0{task.format}\0{task.entry_point!r}\0".encode())
            ak = answer_keys.get(id(task.tests))
            if ak is None:
                ak = _answer_key(task.tests)
                answer_keys[id(task.tests)] = ak
            h.update(ak)
            key = "rewardlang.sandbox.verdict:" + h.hexdigest()
            if key in pending:
                pending[key][4].append(i)
                counts["batch_duplicates"] += 1
                continue
            if use_cache:
                hit = cache.get(key)
                if hit is not None:
                    out[i] = hit
                    counts["cache_hits"] += 1
                    continue
            n_runs = len(plan.inputs) if plan is not None and plan.mode == "stdio" else 1
            # per run: the worker's own real-time backstop, its kill (at most 3 s) and clean-up (2 s)
            hard = n_runs * (task.limits.hard_wall + RUN_END_S) + self.config.hard_timeout_slack
            pending[key] = (payload, hard, plan, task.compare, [i])
        del answer_keys

        def settle(key: str, raw: RawResult) -> None:
            _req, _hard, plan, compare, idx = pending.pop(key)
            if isinstance(plan, LanguagePlan):
                v = plan.judge(raw, level=self.level)
            else:
                v = judge(plan, raw, level=self.level, compare=compare)
            counts["executions"] += 1
            if v.infra:
                counts["infra_failures"] += 1
            else:
                if use_cache:
                    cache.put(key, v)
                if v.outcome == "timeout":
                    counts["timeouts"] += 1
            counts["judge_process_tests"] += sum(t.inside for t in v.tests)
            for i in idx:
                out[i] = v

        # the raw result is dropped in settle, once judged
        kills0 = [self.pool.stats[k] for k in _KILL_COUNTS]
        self.pool.stream(((k, p[0], p[1]) for k, p in list(pending.items())), settle)
        for k, n0 in zip(_KILL_COUNTS, kills0):   # outside kills re-run, and kills that came again (pool.py)
            if self.pool.stats[k] > n0:
                counts[k] += self.pool.stats[k] - n0
        with self._lock:
            self.stats.update(counts)
        if stats is not None:
            for k, n in counts.items():
                stats[f"sandbox.{k}"] += n
            stats[f"sandbox.level.{self.level}"] = 1
            stats["sandbox.isolation_level"] = self.rank
            if not self.security_boundary:
                stats["sandbox.not_a_security_boundary"] = 1
        return [v if v is not None else Verdict("infra", infra="lost") for v in out]

    def _language_request(self, task: Task) -> tuple[str, tuple[bytes, ...], float, LanguagePlan] | Verdict:
        """The cache key, frames, hard timeout and plan of a program in another language, or its verdict
        when none is needed (bad tests or language: an error; no code: a compile error; a missing
        toolchain: an infrastructure failure, masked)."""
        try:
            lplan = language_plan(task.language, task.tests, task.compile_cpu)
        except (TestFormatError, ValueError) as e:
            return Verdict("error", error=str(e), level=self.level)
        if task.code is None:
            return Verdict("compile_error", tuple(TestResult("compile_error", "no code") for _ in range(lplan.n)),
                           level=self.level)
        try:
            header, hard = lplan.encoded(task.limits, NPROC_BASE[self.level], self.config.hard_timeout_slack)
        except ToolchainMissing as e:
            return Verdict("infra", infra=str(e), level=self.level)
        code = lplan.source(task.code).encode("utf-8", "surrogatepass")
        h = hashlib.sha256(header)
        h.update(b"\0code\0" + code)
        # the answer key (expected values, types, tolerances) never enters the sandbox: part of the key only
        h.update(json.dumps([[c.expected, list(map(str, c.type)), c.tolerance] for c in lplan.tests.cases],
                            default=repr).encode("utf-8", "surrogatepass"))
        h.update(f"\0{self.level}\0lang\0".encode())
        key = "rewardlang.sandbox.verdict:" + h.hexdigest()
        return key, (header, code), hard, lplan

    def run(self, code: str | None, tests: str | Sequence[str] | None = None, entry_point: str | None = None,
            **kw: Any) -> Verdict:
        """Judge one program (see :class:`Task` for the keyword arguments)."""
        return self.evaluate([Task(code, tests, entry_point, **kw)])[0]

    def uids(self) -> list[int]:
        return self.pool.uids()

    def stray_processes(self) -> list[int]:
        """Processes left under the slots' uids besides the slots themselves (should always be empty)."""
        return self.pool.stray_processes()

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt):
            self.pool.interrupted = True  # Ctrl-C or SIGTERM: the programs running are stopped, not waited for
        self.close()


_default: Sandbox | None = None
_default_lock = threading.Lock()


_failed: tuple[float, str, str] | None = None  # (when, why, configuration) of the last failed start
RETRY_AFTER_S = 30.0


def get_sandbox() -> Sandbox:
    """The process-wide sandbox (started on first use; a forked child gets its own).

    When no level works, :class:`LevelUnavailable` is raised, and raised again without probing for
    ``RETRY_AFTER_S`` seconds (every sample is masked meanwhile; probing each batch would cost seconds)."""
    global _default, _failed
    with _default_lock:
        if _default is None or _default.pid != os.getpid():
            conf = f"{os.environ.get('REWARDLANG_SANDBOX_LEVEL')}|{os.environ.get('PATH')}"
            if _failed is not None and _failed[2] == conf and time.monotonic() - _failed[0] < RETRY_AFTER_S:
                raise LevelUnavailable(_failed[1])
            try:
                _default = Sandbox()
            except LevelUnavailable as e:
                _failed = (time.monotonic(), str(e), conf)
                raise
            _failed = None
            import atexit

            atexit.register(close_sandbox)
        return _default


def close_sandbox() -> None:
    global _default
    with _default_lock:
        if _default is not None and _default.pid == os.getpid():
            _default.close()
        _default = None
