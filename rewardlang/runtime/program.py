"""Running a compiled spec: :func:`load_program` and :class:`Program`.

    >>> import rewardlang
    >>> prog = rewardlang.loads('''
    ... component short in [0, 1] = 1 if len(completion) < 10 else 0
    ... component tidy in [0, 1] = 1 - count(completion, "!") / max(len(completion), 1)
    ... ''')
    >>> out = prog.score(completion=["ok", "far too long!!"])
    >>> out.components["short"].tolist(), round(float(out.total[1]), 4)
    ([1.0, 0.0], 0.8571)

A score runs in phases: the per-sample phase (every component over the unique rows of the batch), the
component policies (declared range, ``on_error``, masking), the reward (weights at the training step), and the
advantage pipeline over groups. A masked sample (none, an error without ``on_error``, an infrastructure
failure) has NaN for its value and total, is counted in ``stats``, and gets no advantage.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool
import types
import warnings
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from rewardlang.diagnostics import Diagnostic, SpecError
from rewardlang.runtime import lanes, parallel, registry
from rewardlang.runtime.aggregates import group_codes
from rewardlang.runtime.api import Context, LRUCache, Span
from rewardlang.runtime.attribution import place
from rewardlang.runtime.columns import Col
from rewardlang.runtime.kernels import _ERR_NONFINITE

__all__ = ["Program", "ScoreResult", "DataError", "InputInfo", "ComponentInfo", "AuditInfo", "Pending",
           "chat_to_text", "clean", "record", "records"]


@dataclass(frozen=True)
class InputInfo:
    name: str
    type: str
    column: str
    nullable: bool
    used: bool


@dataclass(frozen=True)
class ComponentInfo:
    name: str
    range: tuple[float, float] | None
    on_error: float | None
    on_error_given: bool
    timeout: float | None
    weight_expr: str
    has_spans: bool
    tokens: dict | None = None  # the `tokens` clause's placement (runtime/attribution.py); None: sequence reward


@dataclass(frozen=True)
class AuditInfo:
    """One ``audit`` of the spec: ``kind`` is ``samples`` (a per-sample value, :meth:`Program.audit`) or
    ``statistic`` (a built-in statistic of the run: ``statistic`` and ``options``). Audited at step 1, at every
    multiple of ``every`` and at the last step; the alarm looks ``window`` steps back for a reward rise of
    ``margin`` (rewardlang/runtime/audits.py)."""

    name: str
    kind: str
    every: int
    window: int
    margin: float
    text: str
    range: tuple[float, float] | None = None
    statistic: str | None = None
    options: dict[str, float] = field(default_factory=dict)
    line: int = 0


@dataclass
class ScoreResult:
    """Scores of one batch; arrays are aligned with the input rows."""

    total: np.ndarray
    components: dict[str, np.ndarray]
    masked: dict[str, np.ndarray]
    errors: dict[str, list[str | None]]
    infra: dict[str, np.ndarray]
    spans: dict[str, list[list[Span]]]
    advantages: np.ndarray | None
    weights: dict[str, float]
    stats: dict[str, Any] = field(default_factory=dict)
    #: per component with a `tokens` clause, each row's placement in completion characters (None: masked)
    attribution: dict[str, list[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.total)

    def record(self, i: int) -> dict[str, Any]:
        """Row ``i`` as the scored record every writer uses (:func:`record`)."""
        return record(self, i)


class DataError(ValueError):
    """Bad input data: every problem names its row (0-based, in the batch) and column."""

    def __init__(self, problems: list[tuple[int, str, str]]) -> None:
        self.problems = problems
        shown = "; ".join(f"row {r}: column `{c}`: {m}" for r, c, m in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"{len(problems)} bad value(s): {shown}{more}")



def clean(x: Any) -> float | None:
    """A score as JSON: none (NaN) and a non-finite value (an overflow such as `exp(len(completion))`) are null, so
    every output line is valid JSON.

        >>> clean(0.5), clean(float("nan")), clean(float("inf"))
        (0.5, None, None)
    """
    x = float(x)
    return x if math.isfinite(x) else None


def record(res: ScoreResult, i: int) -> dict[str, Any]:
    """Row ``i`` of a result as the scored record every writer uses: ``reward`` (the total), ``components``,
    ``advantage`` (with an advantage pipeline), then, where the row has any, ``errors``, ``masked`` (the masked
    components), ``spans`` and ``tokens`` (where `tokens` clauses place each value); a score that is none is null.

        >>> import rewardlang
        >>> res = rewardlang.loads("component n in [0, 3] = len(completion)").score(completion=["ab", "abcd"])
        >>> record(res, 0), record(res, 1)["masked"]
        ({'reward': 2.0, 'components': {'n': 2.0}}, ['n'])
    """
    rec: dict[str, Any] = {"reward": clean(res.total[i])}
    rec["components"] = {k: clean(v[i]) for k, v in res.components.items()}
    if res.advantages is not None:
        rec["advantage"] = clean(res.advantages[i])
    errs = {k: e[i] for k, e in res.errors.items() if e[i] is not None}
    if errs:
        rec["errors"] = errs
    masked = [k for k, m in res.masked.items() if m[i]]
    if masked:
        rec["masked"] = masked
    spans = {k: [list(s) for s in v[i]] for k, v in res.spans.items() if v[i]}
    if spans:
        rec["spans"] = spans
    tokens = {k: v[i].as_json() for k, v in res.attribution.items() if v[i] is not None}
    if tokens:  # `tokens` clauses: where each value reaches the completion's characters
        rec["tokens"] = tokens
    return rec


def _scores(a: Any) -> list[float | None]:
    """A column of scores as :func:`clean` gives each value: one conversion for the column."""
    isfinite = math.isfinite
    return [x if isfinite(x) else None for x in np.asarray(a, dtype=np.float64).tolist()]


def records(res: ScoreResult) -> list[dict[str, Any]]:
    """``[record(res, i) for i in range(len(res))]``, built a column at a time: each column is converted to
    Python values once, not indexed value by value (a NumPy scalar per value: ~0.3 s of `score`'s CPU on
    13,120 CodePO rows).

        >>> import rewardlang
        >>> res = rewardlang.loads("component n in [0, 3] = len(completion)").score(completion=["ab", "abcd"])
        >>> records(res) == [record(res, 0), record(res, 1)]
        True
    """
    n = len(res)
    total = _scores(res.total)
    comps = [(k, _scores(v)) for k, v in res.components.items()]
    adv = None if res.advantages is None else _scores(res.advantages)
    errs = [(k, e) for k, e in res.errors.items() if any(x is not None for x in e)]
    masked = [(k, m.tolist()) for k, m in ((k, np.asarray(m)) for k, m in res.masked.items()) if m.any()]
    spans = list(res.spans.items())
    tokens = list(res.attribution.items())
    out = []
    for i in range(n):
        rec: dict[str, Any] = {"reward": total[i], "components": {k: v[i] for k, v in comps}}
        if adv is not None:
            rec["advantage"] = adv[i]
        if errs:
            e = {k: v[i] for k, v in errs if v[i] is not None}
            if e:
                rec["errors"] = e
        if masked:
            m = [k for k, v in masked if v[i]]
            if m:
                rec["masked"] = m
        if spans:
            sp = {k: [list(x) for x in v[i]] for k, v in spans if v[i]}
            if sp:
                rec["spans"] = sp
        if tokens:
            t = {k: v[i].as_json() for k, v in tokens if v[i] is not None}
            if t:  # `tokens` clauses: where each value reaches the completion's characters
                rec["tokens"] = t
        out.append(rec)
    return out


def chat_to_text(value: Any, role: str | None = "assistant") -> Any:
    """A chat-format value (list of messages) as text: the ``role`` messages' content (all messages, one per
    line, when ``role`` is None: how prompts are read); other values unchanged."""
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        if role is None:
            return "\n".join(str(chat_to_text([m], m.get("role", "user"))) for m in value)
        msgs = [m for m in value if m.get("role", "assistant") == role]
        parts = []
        for m in msgs:
            c = m.get("content", "")
            if isinstance(c, list):  # content parts: [{"type": "text", "text": ...}]
                c = "".join(p.get("text", "") for p in c if isinstance(p, dict))
            parts.append(c if isinstance(c, str) else str(c))
        return "".join(parts)
    return value


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "text": lambda x: isinstance(x, str),
    "code": lambda x: isinstance(x, str),
    "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
    "bool": lambda x: isinstance(x, bool),
    "group": lambda x: isinstance(x, (str, int, float, bool, tuple, list)),
    "list[text]": lambda x: isinstance(x, list) and all(isinstance(i, str) for i in x),
    "list[code]": lambda x: isinstance(x, list) and all(isinstance(i, str) for i in x),
    "list[number]": lambda x: isinstance(x, list) and all(isinstance(i, (int, float)) and not isinstance(i, bool)
                                                          for i in x),
}


def _tagged(x: Any) -> Any:
    """A hashable key of a value of an ``any`` input that tells lists, tuples, dicts and scalars apart (a dict and
    a list of pairs are different rows)."""
    if isinstance(x, list):
        return ("list", tuple(_tagged(i) for i in x))
    if isinstance(x, tuple):
        return ("tuple", tuple(_tagged(i) for i in x))
    if isinstance(x, dict):
        return ("dict", tuple(sorted(((k, _tagged(v)) for k, v in x.items()), key=repr)))
    return (type(x).__name__, x)


def _hashable(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(i) for i in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    return x


class Pending:
    """A batch between :meth:`Program.begin` and :meth:`Program.finish`."""

    def __init__(self, cols: dict[str, list[Any]], n: int, step: int, group: Sequence[Any] | None,
                 raw: Mapping[str, Sequence[Any]] | None, inverse: np.ndarray, m: int,
                 uniq: dict[str, list[Any]], workers: int, run_rows: int | None,
                 extra: Mapping[str, Any] | None = None) -> None:
        self.cols, self.n, self.step, self.group, self.raw = cols, n, step, group, raw
        self.inverse, self.m, self.uniq = inverse, m, uniq
        self.workers, self.run_rows, self.extra = workers, run_rows, extra
        self.batch: Any = None  # the rows on the worker processes (parallel.Batch), or None: scored at finish
        self.stats: Counter = Counter()  # what scoring this batch's rows counted in this process and the workers
        self.time_dedup = self.time_rows = 0.0


class Program:
    """A compiled reward spec, ready to score batches. Build it with :func:`rewardlang.load`."""

    def __init__(self, module: types.ModuleType, source: str, warnings: Sequence[Diagnostic] = (),
                 sources: Mapping[str, str] | None = None) -> None:
        self.module = module
        self.python_source = source
        self.warnings = list(warnings)
        self.sources = dict(sources or {})
        spec = module.SPEC
        self.spec = spec
        self.name: str = spec["name"]
        self.doc: str = spec["doc"]
        self.source_hash: str = spec["source_hash"]
        self.inputs = [InputInfo(i["name"], i["type"].rstrip("?"), i["column"], i["type"].endswith("?"), i["used"])
                       for i in spec["inputs"]]
        self.components = [ComponentInfo(c["name"], tuple(c["range"]) if c["range"] else None, c["on_error"],
                                         c["on_error_given"], c["timeout"], c["weight"], c["has_spans"],
                                         c.get("tokens"))
                           for c in spec["components"]]
        self.audits = [AuditInfo(a["name"], a["kind"], int(a["every"]), int(a["window"]), float(a["margin"]),
                                 a["text"], tuple(a["range"]) if a.get("range") else None, a.get("statistic"),
                                 dict(a.get("options") or {}), int(a.get("line") or 0))
                       for a in spec.get("audits", [])]
        self._audit_program: Program | None = None
        self.train: dict[str, Any] = dict(spec["train"])
        self.params: dict[str, Any] = dict(spec["params"])
        self.has_advantage = spec["advantage"] is not None
        #: the inputs the per-sample phase reads (a group key may be read only by the advantage)
        self.row_inputs: set[str] = set(spec.get("row_inputs", [i.name for i in self.inputs if i.used]))
        impls = registry.load_all()
        self.in_workers = all(impls[f].in_workers for f in spec["functions"])
        self.cache = LRUCache()
        self.stats: Counter = Counter()
        #: why totals were masked, over the batches scored since it was last cleared ("component `c`: message"):
        #: a trainer that sees only masked samples names the most common one (trainers.metrics.MaskedRunGuard)
        self.mask_reasons: Counter = Counter()
        # processes for the per-sample phase of large batches. Opt-in (REWARDLANG_WORKERS, `prog.workers = n`,
        # `rewardlang score --workers`): workers are started by spawn, which re-imports the caller's main script,
        # so a script needs the usual `if __name__ == "__main__":` guard.
        self.workers = max(1, int(os.environ.get("REWARDLANG_WORKERS", "1") or 1))
        self._pool: Any = None
        #: rows this process will score in all, when known (``rewardlang score`` sets it from the file): functions
        #: with a one-off load cost (Numba kernels) skip it when the whole run is too small to repay it
        self.run_rows: int | None = None
        #: unique rows from which the per-sample phase runs on every core (worker start-up costs ~1 s once;
        #: handing a batch to the workers ~0.1 s per 100k texts): a few hundred rows when a function is tagged
        #: "heavy" (parsing, CodeBLEU, metrics), tens of thousands for text functions alone
        heavy = any("heavy" in impls[f].signature.tags for f in spec["functions"])
        self.pool_min_rows = int(os.environ.get("REWARDLANG_POOL_MIN_ROWS",
                                                _POOL_MIN_ROWS_HEAVY if heavy else _POOL_MIN_ROWS))
        self._resources_ok = False

    # ------------------------------------------------------------------ resources
    def missing_resources(self) -> list[Diagnostic]:
        """What the spec's function calls need that is not there (a model checkpoint), one E603 each."""
        from pydantic import BaseModel

        impls = registry.load_all()
        by_params = {impls[f].signature.params: impls[f] for f in self.spec["functions"]
                     if impls[f].requires is not None and impls[f].signature.params is not None}
        out: list[Diagnostic] = []
        seen: set[str] = set()
        for value in list(vars(self.module).values()):
            impl = by_params.get(type(value)) if isinstance(value, BaseModel) else None
            if impl is None:
                continue
            got = impl.requires(value)  # type: ignore[misc]
            if got is None or got[0] in seen:
                continue
            seen.add(got[0])
            out.append(Diagnostic("E603", f"spec `{self.name}`: `{impl.signature.name}` needs {got[0]}", None,
                                  hint=got[1]))
        return out

    def require_resources(self) -> None:
        """Refuse a spec whose resources are missing (:class:`SpecError`, E603): without them every row of every
        batch would be masked, and a trainer would "train" on nothing."""
        if self._resources_ok:
            return
        missing = self.missing_resources()
        if missing:
            raise SpecError(missing, self.sources)
        self._resources_ok = True

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_module(cls, module: types.ModuleType) -> "Program":
        """Wrap a module produced by ``rewardlang compile`` (imported normally)."""
        return cls(module, Path(module.__file__).read_text(encoding="utf-8") if getattr(module, "__file__", None)
                   else "")

    @classmethod
    def from_python(cls, source: str, name: str = "compiled_reward") -> "Program":
        module = types.ModuleType(f"rewardlang_compiled_{name}")
        exec(compile(source, f"<rewardlang:{name}>", "exec"), module.__dict__)
        return cls(module, source)

    def __reduce__(self) -> tuple:
        # Programs travel to worker processes (TRL, multiprocessing) as their generated source.
        return (Program.from_python, (self.python_source, self.name))

    def __repr__(self) -> str:
        return f"<Program {self.name!r}: {', '.join(c.name for c in self.components)}>"

    # ------------------------------------------------------------------ metadata
    def required_columns(self) -> list[str]:
        """Dataset columns the spec reads (the completion excluded)."""
        return [i.column for i in self.inputs if i.used and i.name != "completion"]

    def input(self, name: str) -> InputInfo:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    @property
    def reward_components(self) -> list[str]:
        """The components the reward expression reads (a masked one masks the total)."""
        return list(self.spec["reward_components"])

    @property
    def last_trl_result(self) -> "ScoreResult | None":
        """The full result of the batch the TRL reward functions scored last (spans included)."""
        cached = getattr(self, "_trl_last", None)
        return cached[2] if cached is not None else None

    def weights(self, step: int = 0) -> dict[str, float]:
        return self.module.weights(step)

    # ------------------------------------------------------------------ inputs
    def columns(self, n: int, given: Mapping[str, Sequence[Any]], by: str = "name", example: bool = False,
                 skip: Sequence[str] = ()) -> dict[str, list[Any]]:
        """Validated input columns for the used inputs (``by``: match given keys to input names or columns).

        For a spec's examples (``example=True``) an input left out, or null, is none: the components that need it
        are none, and the checker has already typed the values given. An optional input (``text?``) absent from
        the data is none for every row, as in training. ``skip`` names inputs not to read (a group key that
        ``group=`` replaces).
        """
        out: dict[str, list[Any]] = {}
        problems: list[tuple[int, str, str]] = []
        for inp in self.inputs:
            if (not inp.used and inp.name != "completion") or inp.name in skip:
                continue
            key = inp.name if by == "name" else inp.column
            if key not in given:
                alt = inp.column if by == "name" else inp.name
                if alt in given:
                    key = alt
                elif inp.name == "completion" and not inp.used:
                    continue
                elif example or (inp.nullable and inp.name != "completion"):
                    out[inp.name] = [None] * n
                    continue
                elif inp.name == "completion":
                    raise DataError([(0, key, "no completions given")])
                else:
                    raise DataError([(0, key, f"missing: the spec's input `{inp.name}` reads column `{inp.column}`")])
            col = list(given[key])
            if len(col) != n:
                raise DataError([(0, key, f"has {len(col)} values for {n} completions")])
            if inp.name in ("completion", "prompt"):
                col = [chat_to_text(x, "assistant" if inp.name == "completion" else None) for x in col]
            check = _TYPE_CHECKS.get(inp.type, lambda x: True)
            if inp.type == "number":
                col = [float(x) if check(x) else x for x in col]
            if inp.type in ("text", "code") and all(type(x) is str for x in col) and _utf8_ok(col):
                out[inp.name] = col  # the common case, checked in bulk
                continue
            for r, x in enumerate(col):
                if x is None:
                    if not inp.nullable and not example:
                        problems.append((r, key, f"is null, but `{inp.name}` is `{inp.type}` (declare `{inp.type}?` "
                                                 "to allow nulls)"))
                elif not check(x):
                    problems.append((r, key, f"expected {inp.type}, got {type(x).__name__}"))
                elif isinstance(x, str) and _has_lone_surrogate(x):
                    problems.append((r, key, "is not valid UTF-8 text"))
            out[inp.name] = col
        if problems:
            raise DataError(problems)
        return out

    # ------------------------------------------------------------------ scoring
    def score(self, completion: Sequence[Any] | None = None, *, step: int = 0, group: Sequence[Any] | None = None,
              **columns: Sequence[Any]) -> ScoreResult:
        """Score a batch. Pass the completions and every input the spec reads, by input name.

        ``group`` gives the group id of each row for the advantage pipeline (default: the column the spec's
        ``advantage over group(...)`` names). Raises :class:`DataError` for bad values (row and column named).
        """
        given = dict(columns)
        if "completions" in given:  # the plural spelling, as TRL names them
            if completion is not None:
                raise TypeError("pass `completion` or `completions`, not both")
            completion = given.pop("completions")
        if completion is not None:
            given["completion"] = completion
        if "completion" not in given:
            raise DataError([(0, "completion", "no completions given")])
        n = len(given["completion"])
        if not self.input("completion").used:
            given.pop("completion")
        cols = self.columns(n, given)
        return self.score_columns(cols, n, step=step, group=group, raw=given)

    def score_columns(self, cols: dict[str, list[Any]], n: int, step: int = 0, group: Sequence[Any] | None = None,
                      raw: Mapping[str, Sequence[Any]] | None = None, *, workers: int | None = None,
                      run_rows: int | None = None, extra: Mapping[str, Any] | None = None) -> ScoreResult:
        """Score validated columns (:meth:`columns`) of ``n`` rows: :meth:`begin` then :meth:`finish`.

            >>> import rewardlang
            >>> prog = rewardlang.loads("component n = len(completion)")
            >>> cols = prog.columns(2, {"completion": ["ab", "abc"]})
            >>> prog.score_columns(cols, 2).total.tolist()
            [2.0, 3.0]
        """
        return self.finish(self.begin(cols, n, step, group, raw, workers=workers, run_rows=run_rows, extra=extra))

    def begin(self, cols: dict[str, list[Any]], n: int, step: int = 0, group: Sequence[Any] | None = None,
              raw: Mapping[str, Sequence[Any]] | None = None, *, workers: int | None = None,
              run_rows: int | None = None, extra: Mapping[str, Any] | None = None) -> Pending:
        """The first half of :meth:`score_columns`: the batch's unique rows, handed to the worker processes now
        when it goes to them (they score it while the caller reads and writes other batches). Finished, in the
        order begun, by :meth:`finish`.

        ``workers`` (default :attr:`workers`) is the cores the per-sample phase may use; ``run_rows`` (default
        :attr:`run_rows`) the rows of the whole run, when known: functions with a one-off load cost (Numba
        kernels) skip it when the run is too small to repay it. ``extra`` goes into every function's
        ``Context.extra`` (``{"plan_only": True}``: `rewardlang check --data` reads the tests and runs nothing)."""
        self.require_resources()  # once: a missing model is refused, not a mask on every row
        t0 = time.perf_counter()
        # identical rows (GRPO groups often repeat) are computed once
        row_inputs = [k for k in cols if k in self.row_inputs]
        if not row_inputs:  # nothing per-sample is read: every row is the same row
            keys: Any = [0] * n
        elif len(row_inputs) == 1:
            keys = cols[row_inputs[0]]
        else:
            keys = list(zip(*(cols[k] for k in row_inputs)))
        if any(self.input(k).type == "any" for k in row_inputs):  # lists, dicts ...: tagged, nothing conflated
            keys = [_tagged(k) for k in keys]
        elif row_inputs and any(self.input(k).type.startswith("list") or self.input(k).type == "group"
                                for k in row_inputs):
            keys = [_hashable(k) for k in keys]
        index: dict[Any, int] = {}
        inverse = np.empty(n, dtype=np.int64)
        first: list[int] = []
        for i, k in enumerate(keys):
            u = index.get(k)
            if u is None:
                u = index[k] = len(first)
                first.append(i)
            inverse[i] = u
        m = len(first)
        row_cols = {k: v for k, v in cols.items() if k in self.row_inputs}
        uniq = {k: [v[i] for i in first] for k, v in row_cols.items()} if m < n else row_cols
        p = Pending(cols, n, step, group, raw, inverse, m, uniq, self.workers if workers is None else workers,
                    self.run_rows if run_rows is None else run_rows, extra)
        t1 = time.perf_counter()
        p.time_dedup = t1 - t0
        if self.in_workers and p.workers > 1 and m >= self.pool_min_rows:
            p.batch = self._pool_submit(p)
        p.time_rows = time.perf_counter() - t1
        return p

    def finish(self, p: Pending, helper: Pending | None = None) -> ScoreResult:
        """The second half of :meth:`score_columns`: the per-sample phase's results (scored here, or collected
        from the workers while this process scores the chunks they have not started, then, while it waits,
        chunks of ``helper``, the batch begun after this one), the policies, the reward, the advantages."""
        cols, n, step, group, raw, inverse, m = p.cols, p.n, p.step, p.group, p.raw, p.inverse, p.m
        stats: Counter = Counter()
        before = Counter(self.stats)  # what functions add to ctx.stats during this call is reported with it
        stats["rows"] = n
        stats["unique_rows"] = m
        t1 = time.perf_counter()
        if p.batch is not None:
            raw_cols = self._pool_collect(p, None if helper is None else helper.batch)
        else:
            raw_cols = self.row_phase(p.uniq, m, step, workers=p.workers, run_rows=p.run_rows, extra=p.extra)
        self.stats.update(p.stats)  # what this process counted while scoring the batch's chunks
        t2 = time.perf_counter()
        values: dict[str, np.ndarray] = {}
        masked: dict[str, np.ndarray] = {}
        errors: dict[str, list[str | None]] = {}
        infra: dict[str, np.ndarray] = {}
        spans: dict[str, list[list[Span]]] = {}
        for info in self.components:
            v, s = raw_cols[info.name]
            val, msk, err, inf = self._policy(info, v, m, stats)
            values[info.name] = val[inverse]
            masked[info.name] = msk[inverse]
            errors[info.name] = [err[u] for u in inverse] if any(e is not None for e in err) else [None] * n
            infra[info.name] = inf[inverse]
            if info.has_spans:
                sp = s.to_python() if isinstance(s, Col) else [[] for _ in range(m)]
                spans[info.name] = [list(sp[u] or []) if not msk[u] else [] for u in inverse]
        W = self.weights(step)
        total = np.asarray(self.module.reward(values, W, step), dtype=np.float64)
        if total.ndim == 0:
            total = np.full(n, float(total))
        any_masked = np.zeros(n, dtype=bool)
        for c in self.spec["reward_components"]:
            any_masked |= masked[c]
        total = np.where(any_masked, np.nan, total)
        if any_masked.any():
            for i in np.flatnonzero(any_masked)[:1000]:  # a bounded sample of a large batch is enough to rank
                c = next(c for c in self.spec["reward_components"] if masked[c][i])
                self.mask_reasons[f"component `{c}`: {errors[c][i] or 'none'}"] += 1
        nonfinite = ~np.isfinite(total) & ~any_masked
        if nonfinite.any():
            stats["reward_nonfinite"] += int(nonfinite.sum())
            total = np.where(nonfinite, np.nan, total)
        stats["masked_total"] = int(np.isnan(total).sum())
        t3 = time.perf_counter()
        adv = None
        if self.has_advantage:
            groups = self._groups(n, group, raw or {}, cols)
            if groups is not None:
                adv = self._advantage(total, values, W, groups, step, stats)
            else:
                stats["advantage_skipped_no_groups"] += 1
        t4 = time.perf_counter()
        stats.update({"time_dedup": p.time_dedup, "time_rows": p.time_rows + t2 - t1, "time_policy_reward": t3 - t2,
                      "time_advantage": t4 - t3})
        # counters the functions added to ctx.stats (sandbox executions, isolation level, tool time) this call
        delta = {k: v - before.get(k, 0) for k, v in self.stats.items()
                 if isinstance(v, (int, float)) and v != before.get(k, 0)}
        self.stats.update({k: v for k, v in stats.items() if not k.startswith("time_")})
        stats.update(delta)
        attribution = {}
        for info in self.components:
            if info.tokens is not None:  # where the value reaches tokens, in completion characters
                texts = cols.get("completion", [""] * n)
                attribution[info.name] = [
                    None if masked[info.name][i] else
                    place(info.tokens, float(values[info.name][i]), spans.get(info.name, [[]] * n)[i], texts[i] or "")
                    for i in range(n)]
        return ScoreResult(total, values, masked, errors, infra, spans, adv, W, dict(stats), attribution)

    def row_phase(self, cols: dict[str, list[Any]], m: int, step: int, trace: dict | None = None,
                  workers: int | None = None, stats: Counter | None = None, run_rows: int | None = None,
                  extra: Mapping[str, Any] | None = None) -> dict[str, tuple[Col, Col | None]]:
        """The per-sample phase in this process: every component's raw values (and spans) for ``m`` unique rows
        of validated ``cols``, before the policies. With ``trace`` (a dict), every named intermediate value of the
        generated program is recorded in it (``rewardlang explain``)."""
        I: dict[str, Any] = {}
        for k, v in cols.items():
            t = self.input(k).type
            if t == "number":
                I[k] = Col(np.array([0.0 if x is None else x for x in v], dtype=np.float64),
                           np.array([x is None for x in v]))
            elif t == "bool":
                I[k] = Col(np.array([bool(x) for x in v], dtype=bool), np.array([x is None for x in v]))
            else:
                none = np.fromiter((x is None for x in v), dtype=bool, count=m)
                # the completion is the origin of character offsets (spans land on its characters)
                off = np.zeros(m, dtype=np.int64) if k == "completion" else None
                I[k] = Col(v, none, off=off, kind="obj")
        ctx = Context(step=step, workers=self.workers if workers is None else workers, cache=self.cache,
                      stats=self.stats if stats is None else stats)
        run_rows = self.run_rows if run_rows is None else run_rows
        if run_rows is not None:
            ctx.extra["run_rows"] = run_rows
        ctx.extra.update(extra or {})
        if trace is not None:
            ctx.extra["explain"] = True
            return self.module.rows(I, ctx, step, trace)
        lanes = self._lanes()
        return self.module.rows(I, ctx, step) if lanes is None else lanes.run(I, ctx, step)

    def _lanes(self) -> Any:
        """Independent components that run out of process at the same time (:mod:`rewardlang.runtime.lanes`)."""
        if not lanes.enabled():
            return None
        if not hasattr(self, "_lanes_plan"):
            self._lanes_plan = lanes.plan(self.python_source, self.module) if self.python_source else None
        return self._lanes_plan

    def _pool_submit(self, p: Pending) -> Any:
        """Hand the unique rows to the worker processes (:class:`parallel.Batch`), or None when the pool cannot
        take them (counted, warned: the caller scores them itself)."""
        try:
            if self._pool is None:
                self._pool = parallel.RowPool(self.python_source, self.name, p.workers, Program.from_python)
            # this process scores the chunks it takes back on one core (the worker processes have the others)
            return self._pool.submit(p.uniq, p.m, p.step, lambda c, n, st: self.row_phase(
                c, n, st, workers=1, stats=p.stats, run_rows=p.run_rows, extra=p.extra), p.stats)
        except (BrokenProcessPool, OSError) as exc:
            self._pool_failed(exc, p.stats)
            return None

    def _pool_collect(self, p: Pending, helper: Any) -> dict[str, tuple[Col, Col | None]]:
        try:
            return p.batch.result(helper)
        except (BrokenProcessPool, OSError, CancelledError) as exc:
            # a worker died (killed, out of memory) or could not start: an infrastructure failure. The batch is
            # scored here instead (the same values), counted, and the next large batch starts fresh workers.
            # (CancelledError: a batch handed out before the pool failed was cancelled when it was shut down.)
            self._pool_failed(exc, p.stats)
            return self.row_phase(p.uniq, p.m, p.step, workers=p.workers, stats=p.stats, run_rows=p.run_rows,
                                  extra=p.extra)

    def _pool_failed(self, exc: BaseException, stats: Counter) -> None:
        self.close()
        stats["pool_failures"] += 1  # the batch's counters: reported with it
        warnings.warn(f"rewardlang: a scoring worker process failed ({type(exc).__name__}: {exc}); "
                      "this batch is scored in the calling process", RuntimeWarning, stacklevel=4)

    def start_pool(self, workers: int | None = None) -> None:
        """Start the worker processes for ``workers`` cores (default :attr:`workers`) now (they load in the
        background) rather than at the first large batch; batches begun with as many workers use them."""
        workers = self.workers if workers is None else workers
        if self._pool is None and self.in_workers and workers > 1:
            self._pool = parallel.RowPool(self.python_source, self.name, workers, Program.from_python)
            self._pool.start()

    @property
    def pool_running(self) -> bool:
        """Whether worker processes are up (started by :meth:`start_pool` or a large batch; ended by :meth:`close`)."""
        return self._pool is not None

    def close(self) -> None:
        """Stop the worker processes, if any (the program stays usable: a later large batch starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._audit_program is not None:
            self._audit_program.close()

    # ------------------------------------------------------------------ audits
    @property
    def audit_program(self) -> "Program | None":
        """The spec's audits of samples as a program of their own (their values are its components), compiled
        on first use; None when the spec has none. It shares nothing with this program's scoring: an audit never
        enters the reward, the advantage, a mask or a preference pair."""
        source = getattr(self.module, "AUDITS", None)
        if source is None:
            return None
        if self._audit_program is None:
            self._audit_program = Program.from_python(source, f"{self.name}_audits")
            self._audit_program.workers = self.workers
        return self._audit_program

    def audit_columns(self) -> list[str]:
        """Dataset columns the audits of samples read (the completion excluded)."""
        ap = self.audit_program
        return [] if ap is None else ap.required_columns()

    def audit(self, completion: Sequence[Any] | None = None, *, step: int = 0, **columns: Sequence[Any]
              ) -> ScoreResult:
        """Score the spec's audits of samples on a batch: ``.components[NAME]`` is each audit's value per row (NaN
        where masked), with ``.masked`` and ``.errors`` as for components. The reward is not computed.

            >>> import rewardlang
            >>> prog = rewardlang.loads(
            ...     "component short in [0, 1] = 1 if len(completion) < 10 else 0\\n"
            ...     "audit words in [0, 100] = len(words(completion)) every 5 steps\\n")
            >>> prog.audit(["a b c", "d"]).components["words"].tolist()
            [3.0, 1.0]
            >>> [c.name for c in prog.components], [(a.name, a.every) for a in prog.audits]
            (['short'], [('words', 5)])
        """
        ap = self.audit_program
        if ap is None:
            raise ValueError(f"spec `{self.name}` declares no audit of samples")
        return ap.score(completion, step=step, **columns)

    def _policy(self, info: ComponentInfo, v: Any, m: int, stats: Counter
                ) -> tuple[np.ndarray, np.ndarray, list[str | None], np.ndarray]:
        if not isinstance(v, Col) and v is not None and not np.isfinite(float(v)):
            # a row-independent x / 0, log(0) or overflow: an error of every sample (on_error applies), as the
            # same result on per-sample values is; not a none, which would mask the samples without a word
            v = Col(np.full(m, np.nan), None, [_ERR_NONFINITE] * m)
        if not isinstance(v, Col):  # a constant component
            val = np.full(m, np.nan if v is None else float(v))
            return self._range(info, val, np.isnan(val), [None] * m, np.zeros(m, dtype=bool), stats)
        val = v.v.astype(np.float64, copy=True)
        masked = v.none.copy() if v.none is not None else np.zeros(m, dtype=bool)
        errs: list[str | None] = [None] * m
        inf = np.zeros(m, dtype=bool)
        if v.err is not None:
            for i, e in enumerate(v.err):
                if e is None:
                    continue
                errs[i] = e.message
                if e.infra:
                    inf[i] = True
                    masked[i] = True
                    stats[f"infra:{info.name}"] += 1
                else:
                    stats[f"errors:{info.name}"] += 1
                    if info.on_error_given and info.on_error is not None:
                        val[i] = info.on_error
                        masked[i] = False
                    else:
                        masked[i] = True
        return self._range(info, val, masked, errs, inf, stats)

    def _range(self, info: ComponentInfo, val: np.ndarray, masked: np.ndarray, errs: list[str | None],
               inf: np.ndarray, stats: Counter) -> tuple[np.ndarray, np.ndarray, list[str | None], np.ndarray]:
        if info.range is not None:
            lo, hi = info.range
            out = ~masked & ((val < lo - 1e-12) | (val > hi + 1e-12))
            for i in np.flatnonzero(out):
                errs[i] = f"value {val[i]:.6g} outside the declared range [{lo:g}, {hi:g}]"
                stats[f"errors:{info.name}"] += 1
                if info.on_error_given and info.on_error is not None:
                    val[i] = info.on_error
                else:
                    masked[i] = True
        none_count = int(masked.sum())
        if none_count:
            stats[f"masked:{info.name}"] += none_count
        val = np.where(masked, np.nan, val) + 0.0  # + 0.0: no -0.0 in outputs
        return val, masked, errs, inf

    # ------------------------------------------------------------------ advantages
    def _groups(self, n: int, group: Sequence[Any] | None, raw: Mapping[str, Sequence[Any]],
                cols: Mapping[str, list[Any]]) -> dict[str | None, np.ndarray] | None:
        adv = self.spec["advantage"]
        out: dict[str | None, np.ndarray] = {}
        main = adv["scope"][1] if adv["scope"][0] == "group" else None
        for key in adv["group_keys"]:
            if key == main and group is not None:
                if len(group) != n:
                    raise DataError([(0, "group", f"has {len(group)} values for {n} completions")])
                out[key] = group_codes(group)
                continue
            values = cols.get(key)
            if values is None:
                values = raw.get(key)
                if values is None:
                    inp = next((i for i in self.inputs if i.name == key), None)
                    values = raw.get(inp.column) if inp is not None else None
            if values is None:
                return None
            out[key] = group_codes([chat_to_text(v, None) for v in values])
        return out

    def _advantage(self, total: np.ndarray, comps: dict[str, np.ndarray], W: dict[str, float],
                   G: dict[str | None, np.ndarray], step: int, stats: Counter) -> np.ndarray:
        adv = np.asarray(self.module.advantage(total, comps, W, G, step), dtype=np.float64)
        bad = ~np.isfinite(adv) & ~np.isnan(total)
        if bad.any():
            stats["advantage_nonfinite"] += int(bad.sum())
            adv = np.where(bad, np.nan, adv)
        codes = G.get(self.spec["advantage"]["scope"][1]) if self.spec["advantage"]["scope"][0] == "group" else None
        if codes is not None and len(codes):
            # zero-variance groups: every unmasked reward equal (a common, silent GRPO failure)
            valid = ~np.isnan(total)
            k = int(codes.max()) + 1
            mn = np.full(k, np.inf)
            mx = np.full(k, -np.inf)
            np.minimum.at(mn, codes[valid], total[valid])
            np.maximum.at(mx, codes[valid], total[valid])
            present = np.isfinite(mn)
            stats["groups"] = int(present.sum())
            stats["zero_variance_groups"] = int((present & (mn == mx)).sum())
        return adv

    def advantages(self, rewards: Sequence[float] | np.ndarray, groups: Sequence[Any],
                   components: Mapping[str, Sequence[float]] | None = None, step: int = 0) -> np.ndarray:
        """Run only the advantage pipeline on given rewards (NaN = masked) and group ids."""
        if not self.has_advantage:
            raise ValueError(f"spec `{self.name}` declares no advantage pipeline")
        total = np.asarray(rewards, dtype=np.float64)
        comps = {k: np.asarray(v, dtype=np.float64) for k, v in (components or {}).items()}
        if self.spec["advantage"]["each_component"] and not comps:
            raise ValueError("this pipeline normalizes each component: pass components={name: values}")
        keys = self.spec["advantage"]["group_keys"] or [None]
        G: dict[str | None, np.ndarray] = {k: group_codes(list(groups)) for k in keys}
        return self._advantage(total, comps, self.weights(step), G, step, Counter())

    # ------------------------------------------------------------------ TRL
    def as_trl_reward_funcs(self, *, mask_total: bool = True, warn: bool = True
                            ) -> tuple[list[Callable[..., list[float | None]]], list[float]]:
        """One picklable reward function per component for TRL's ``GRPOTrainer``, and the weights.

        TRL logs each function as ``rewards/<name>/mean`` and sums them with ``GRPOConfig(reward_weights=...)``.
        When the reward is not the weighted sum of the components, or a weight follows a schedule, the
        component functions get weight 0 (logged only) and one more function, ``reward``, carries the total.
        Where the spec masks a completion's total, every function returns None (``mask_total``), so TRL leaves it
        out of its group's baseline with advantage 0 instead of training on the sum of the other functions.

        These functions carry rewards only: TRL's own group normalisation replaces the spec's ``advantage``, and
        ``spans`` are dropped. A spec that declares either gets a one-time ``UserWarning`` (``warn``); train with
        :class:`rewardlang.trainers.grpo.SpecGRPOTrainer` (docs/training.md) to honour them.

            >>> import rewardlang
            >>> prog = rewardlang.loads("component n in [0, 3] = len(completion)\\ncomponent k = 1")
            >>> funcs, weights = prog.as_trl_reward_funcs()
            >>> [f(completions=["ab", "abcd"]) for f in funcs], weights   # "abcd" is out of range: masked
            ([[2.0, None], [1.0, None]], [1.0, 1.0])
        """
        cannot = [what for what, has in (("an advantage pipeline", self.has_advantage),
                                         ("spans", any(c.has_spans for c in self.components))) if has]
        if warn and cannot and not getattr(self, "_trl_warned", False):
            self._trl_warned = True
            warnings.warn(f"rewardlang: spec `{self.name}` declares {' and '.join(cannot)}, which TRL's "
                          "GRPOTrainer with plain reward functions (as_trl_reward_funcs) cannot honour: TRL "
                          "normalises rewards per group itself and trains on sequence-level rewards only. Use "
                          "rewardlang.trainers.grpo.SpecGRPOTrainer(model=..., program=prog, args=GRPOConfig(...), "
                          "...) in place of GRPOTrainer (docs/training.md)", UserWarning, stacklevel=2)
        funcs: list[Callable[..., list[float | None]]] = [TRLRewardFunc(self, c.name, mask_total)
                                                          for c in self.components]
        constant = all(_is_number(c.weight_expr) for c in self.components)
        if self.spec["reward_is_weighted_sum"] and constant:
            return funcs, [float(self.weights(0)[c.name]) for c in self.components]
        return funcs + [TRLRewardFunc(self, None, mask_total)], [0.0] * len(funcs) + [1.0]

    # ------------------------------------------------------------------ examples
    def run_examples(self) -> list[tuple[str, str, int, list[str]]]:
        """Run the spec's examples: (name, file, line, failures) for each."""
        results = []
        for ex in self.spec["examples"]:
            failures: list[str] = []
            rows = ex["rows"]
            n = len(rows)
            given: dict[str, list[Any]] = {}
            for r in rows:
                for k in r:
                    given.setdefault(k, [])
            for k in given:
                given[k] = [r.get(k) for r in rows]
            step = int(given.pop("step", [0])[0] or 0)
            group = given.pop("group", None)
            for inp in self.inputs:
                if inp.used and inp.name not in given:
                    given[inp.name] = [None] * n
            audited = None
            try:
                cols = self.columns(n, given, example=True)
                out = self.score_columns(cols, n, step=step, group=group, raw=given)
                if any(a.name == name for a in self.audits for name, _, _ in ex["expects"]) \
                        and self.audit_program is not None:
                    ap = self.audit_program
                    audited = ap.score_columns(ap.columns(n, given, example=True), n, step=step, raw=given)
            except DataError as exc:
                results.append((ex["name"], ex["file"], ex["line"], [str(exc)]))
                continue
            for name, expected, tol in ex["expects"]:
                if name not in ("reward", "advantage") and name not in out.components and audited is not None:
                    out_for = audited  # an audit's expected value
                else:
                    out_for = out
                got = out.total if name == "reward" else (out.advantages if name == "advantage" else
                                                          out_for.components[name])
                if got is None:
                    failures.append(f"`{name}`: the example gives no groups for the advantage")
                    continue
                for i, e in enumerate(expected):
                    g = float(got[i])
                    if e is None:
                        if g == g:
                            failures.append(f"`{name}`{_row(i, n)}: expected none, got {g:.10g}")
                    elif g != g:
                        why = out_for.errors.get(name, [None] * n)[i] if name in out_for.errors else None
                        failures.append(f"`{name}`{_row(i, n)}: expected {e:.10g}, got none"
                                        + (f" ({why})" if why else ""))
                    elif abs(g - e) > tol:
                        failures.append(f"`{name}`{_row(i, n)}: expected {e:.10g}, got {g:.10g} "
                                        f"(tolerance {tol:g})")
            results.append((ex["name"], ex["file"], ex["line"], failures))
        return results


def _row(i: int, n: int) -> str:
    return f" (row {i})" if n > 1 else ""


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _utf8_ok(col: list[str]) -> bool:
    """Every text encodes as UTF-8 (no lone surrogates), tested at C level.

    One encode per text: joining a large batch first costs several times more (one huge allocation and copy).
    """
    try:
        deque(map(str.encode, col), maxlen=0)
        return True
    except UnicodeEncodeError:
        return False


def _has_lone_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


#: below this many unique rows the per-sample phase runs in this process (cheap text functions / heavy ones)
_POOL_MIN_ROWS = 20_000
_POOL_MIN_ROWS_HEAVY = 256


class TRLRewardFunc:
    """A picklable TRL reward function for one component (or the total when ``component`` is None)."""

    def __init__(self, program: Program, component: str | None, mask_total: bool = True) -> None:
        self.program = program
        self.component = component
        self.mask_total = mask_total  # None where the spec masks the total (TRL then skips the completion)
        self.__name__ = component or "reward"

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **kwargs: Any) -> list[float | None]:
        prog = self.program
        state = kwargs.pop("trainer_state", None)
        step = int(getattr(state, "global_step", 0) or 0)
        n = len(completions or [])
        given: dict[str, Any] = {"completion": list(completions or [])}
        if prompts is not None:
            given["prompt"] = list(prompts)
        for inp in prog.inputs:
            if inp.used and inp.name not in given:
                for key in (inp.column, inp.name):
                    if key in kwargs:
                        given[inp.name] = list(kwargs[key])
                        break
        # TRL calls every reward function with the same completions list: score it once, serve each component
        cached = getattr(prog, "_trl_last", None)
        if cached is not None and cached[0] is completions and cached[1] == step:
            out = cached[2]
        else:
            cols = prog.columns(n, given)
            out = prog.score_columns(cols, n, step=step, raw=given)
            prog._trl_last = (completions, step, out)  # type: ignore[attr-defined]
        values = out.total if self.component is None else out.components[self.component]
        if self.mask_total:
            return [None if v != v or t != t else float(v) for v, t in zip(values, out.total)]
        return [None if v != v else float(v) for v in values]

    def __reduce__(self) -> tuple:
        return (TRLRewardFunc, (self.program, self.component, self.mask_total))
