"""Issue 23's scale figures, each baseline beside ours in one run (docs/scale.md).

    python benchmarks/bench_scale.py [--samples 512] [--ray-rows 20000] [--workers-rows 0] [--runs 3] [--server-runs 3]
    python benchmarks/bench_scale.py --only server --server-against REF --clients 16,64   # beside REF's server

1. verl, ``specs/quality_grpo.reward``, ``--samples`` distinct samples: a per-sample ``compute_score`` (one
   ``Program.score`` call per sample, as verl's reward loop calls a custom function) against the batched manager's
   path (every sample of the worker's chunk submitted at once to the batcher, as ``RewardlangRewardManager.run_single``
   tasks are) and against our ``compute_score`` called from verl's default pool of 6 threads. Fresh programs, and each
   side's samples differ by a comment, so no side reads another's caches.
2. ``rewardlang serve`` under 16 concurrent clients (``--clients``) (32 rows per request, and one row per request as OpenRLHF
   sends) against in-process batch scoring of the same number of rows (one ``Program.score`` call), in turns
   (``--server-runs``, fresh rows each time), medians: throughput ratios. With ``--server-against REF`` (issue
   38): at each ``--clients`` count C, C closed-loop clients post C x ``--per-request`` rows with one row per
   request and with ``--per-request`` (32) rows per request, to this tree's server and to git REF's (a detached
   worktree), both running, alternating: per tree, the throughput ratio one-row / batched (target >= 0.8), p50/p99
   per-row latency of each, the server's CPU per row (its process tree: what the ratio is where the server has
   the cores to itself), and whether every row's score is equal across runs.
3. ``rewardlang score --ray local --workers 2`` against the local run on ``--ray-rows`` rows of
   ``specs/codepo_text.reward`` (outputs compared byte for byte): Ray's overhead. Needs Ray (skipped, said so,
   without it).
4. With ``--workers-rows N``: ``rewardlang score specs/codepo.reward --workers 1`` against ``--workers 2`` on N
   distinct CodePO rows, alternating, ``--runs`` each, medians of wall time and of CPU time (the command and its
   worker processes), and each run's time spent ready to run but waiting for a CPU another job held (a quiet
   machine: ~0; on a shared machine it says which pairs were disturbed).
5. ``--only stops``: the same rows scored quiet, beside CPU hogs, with the server's process tree stopped (SIGSTOP)
   and continued, quiet again: every row whose result differs is named (a verdict must not depend on the machine).
6. ``--only http``: the server's CPU per request with httptools' parser against h11 (``REWARDLANG_SERVER_HTTP``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SPEC = os.path.join(ROOT, "specs", "quality_grpo.reward")
ENV = {**os.environ, "PYTHONPATH": ROOT}


TAGS = {"per-sample": "per-samp", "threads": "threads-", "manager": "manager-", "in-process": "in-procs",
        "server--": "server--", "server-1": "server-1"}


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def samples(n: int, side: str) -> list[dict]:
    """``n`` distinct quality_grpo rows: the shipped samples with a comment naming the side and the sample."""
    with open(os.path.join(ROOT, "examples", "code_samples.jsonl"), encoding="utf-8") as f:
        base = [json.loads(x) for x in f]
    out = []
    for i in range(n):
        r = dict(base[i % len(base)])
        # the same length on every side, so that the values compare (quality reads comment lines)
        tag = f"{abs(hash(side)) % 10**8:08d}" if side not in TAGS else TAGS[side]
        r["completion"] = r["completion"].replace("```python\n", f"```python\n# {tag} sample {i:05d}\n", 1)
        out.append(r)
    return out


def cols(rows: list[dict]) -> dict:
    return {k: [r[k] for r in rows] for k in ("completion", "tests", "entry_point", "prompt")}


def bench_verl(n: int) -> None:
    from rewardlang.integrations.batching import Batcher, SpecScorer
    from rewardlang.integrations.verl import verl_row
    from rewardlang.compiler import load_program

    prog = load_program(SPEC)
    prog.score(**cols(samples(2, "warm-a")))  # imports, sandbox slots: not timed on either side
    per = samples(n, "per-sample")
    t0 = time.perf_counter()
    base = [prog.score(**cols([r])).total[0] for r in per]
    t_base = time.perf_counter() - t0
    prog.close()

    def batched(side: str, submit_all: bool) -> tuple[float, list[float], dict]:
        b = Batcher(SpecScorer(SPEC), window_s=0.02, max_batch=max(n, 1))
        b.score([verl_row(b.scorer, "he", r["completion"], r["tests"],
                          {"entry_point": r["entry_point"], "prompt": r["prompt"]}) for r in samples(2, "warm-" + side)])
        b.batch_sizes.clear()
        rows = [verl_row(b.scorer, "he", r["completion"], r["tests"],
                         {"entry_point": r["entry_point"], "prompt": r["prompt"]}) for r in samples(n, side)]
        t = time.perf_counter()
        if submit_all:  # the manager: one run_single task per sample, all started at once
            async def run() -> list:
                return await asyncio.gather(*(asyncio.wrap_future(b.submit([row])) for row in rows))
            res = [x[0] for x in asyncio.run(run())]
        else:  # compute_score in verl's default executor (min(32, cores + 4) threads)
            with ThreadPoolExecutor(min(32, (os.cpu_count() or 1) + 4)) as ex:
                res = [x[0] for x in ex.map(lambda row: b.score([row]), rows)]
        dt = time.perf_counter() - t
        sizes = dict(b.batch_sizes)
        b.close()
        b.scorer.close()
        return dt, [x["score"] for x in res], sizes

    t_fn, s_fn, sizes_fn = batched("threads", submit_all=False)
    t_mgr, s_mgr, sizes_mgr = batched("manager", submit_all=True)
    nan = [math.isnan(b) for b in base]
    same = all(abs((0.0 if x else b) - m) < 1e-9 and m == f for b, x, m, f in zip(base, nan, s_mgr, s_fn))
    print(f"[verl] {n} samples of quality_grpo.reward; scores equal across sides: {same} "
          f"(masked ones as 0.0: {sum(nan)})")
    print(f"  per-sample compute_score (one Program.score per sample): {t_base:.2f} s ({n / t_base:.1f} samples/s)")
    print(f"  our compute_score from {min(32, (os.cpu_count() or 1) + 4)} threads: {t_fn:.2f} s "
          f"(batches: {sum(sizes_fn.values())}, largest {max(sizes_fn)})  ratio {t_base / t_fn:.1f}x")
    print(f"  batched manager path: {t_mgr:.2f} s (batches: {sum(sizes_mgr.values())}, largest {max(sizes_mgr)})"
          f"  ratio {t_base / t_mgr:.1f}x")


def _tree_cpu(root: int, exclude: tuple[int, ...] = ()) -> float:
    """CPU seconds (user + system) of process ``root`` and its descendants, with what each has reaped of its own
    children (``/proc/PID/stat``: utime, stime, cutime, cstime), leaving out the subtrees of ``exclude``."""
    kids: dict[int, list[tuple[int, float]]] = {}
    tck = os.sysconf("SC_CLK_TCK")
    own = 0.0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu = sum(int(x) for x in fields[11:15]) / tck
            if int(d) == root:
                own = cpu
            kids.setdefault(int(fields[1]), []).append((int(d), cpu))
    total, todo = own, [root]
    while todo:
        for pid, cpu in kids.get(todo.pop(), []):
            if pid not in exclude:
                total += cpu
                todo.append(pid)
    return total


def bench_server(n: int, clients: int = 16, runs: int = 1) -> None:
    """In-process batch scoring, then the server at ``n // clients`` and at 1 row per request, ``runs`` times in
    turn (fresh rows every time: nothing is read from a cache), medians: the machine's load changes between runs,
    not within one turn. Each side's CPU time is measured beside its wall time: the in-process scoring's (this
    process and its sandbox and analyser processes), the server's (its process tree), and the clients' (this
    process's threads: urllib, a new connection per request as OpenRLHF's ``requests.post``), which share the
    machine's cores with the server here as they would not in a real run."""
    from rewardlang.compiler import load_program

    prog = load_program(SPEC)
    prog.score(**cols(samples(2, "warm-b")))
    p = subprocess.Popen([sys.executable, "-m", "rewardlang", "serve", SPEC, "--port", "0"], stderr=subprocess.PIPE,
                         text=True, env=ENV, cwd=ROOT)
    try:
        m = re.search(r":(\d+) ", p.stderr.readline())
        assert m, "the server did not start"
        url = f"http://127.0.0.1:{m.group(1)}"

        def post(path: str, body: dict) -> dict:
            req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.loads(r.read())

        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=5)
                break
            except OSError:
                time.sleep(0.1)
        post("/score", {"rows": samples(2, "warm-c")})
        print(f"[server] {n} rows of quality_grpo.reward, {clients} concurrent clients, {runs} turn(s)")
        times: dict[str, list[float]] = {"in": [], "many": [], "one": []}
        cpu: dict[str, list[tuple[float, float]]] = {"in": [], "many": [], "one": []}  # (scoring side, clients)
        me = os.getpid()
        for turn in range(runs):
            rows = samples(n, "in-process" if turn == 0 else f"in-process-{turn}")
            c0 = _tree_cpu(me, exclude=(p.pid,))
            t0 = time.perf_counter()
            prog.score(**cols(rows))
            times["in"].append(time.perf_counter() - t0)
            cpu["in"].append((_tree_cpu(me, exclude=(p.pid,)) - c0, 0.0))
            line = [f"in-process {times['in'][-1]:.2f} s (CPU {cpu['in'][-1][0]:.2f} s)"]
            for per_request, side, key in ((max(1, n // clients), "server--", "many"), (1, "server-1", "one")):
                srows = samples(n, side if turn == 0 else f"{side}-{turn}")
                done: list = []
                before = post_metrics(url)

                def client(k: int, srows: list = srows, per: int = per_request, done: list = done) -> None:
                    mine = srows[k * (n // clients):(k + 1) * (n // clients)] if per > 1 else srows[k::clients]
                    for j in range(0, len(mine), per):
                        done.extend(x["score"] for x in post("/score", {"rows": mine[j:j + per]})["results"])

                s0, k0 = _tree_cpu(p.pid), _tree_cpu(me, exclude=(p.pid,))
                t0 = time.perf_counter()
                threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                times[key].append((time.perf_counter() - t0) * n / len(done))
                cpu[key].append(((_tree_cpu(p.pid) - s0) * n / len(done),
                                 (_tree_cpu(me, exclude=(p.pid,)) - k0) * n / len(done)))
                after = post_metrics(url)
                batches = after["batches"] - before["batches"]
                line.append(f"{per_request} row(s)/request {times[key][-1]:.2f} s ({batches} batches, mean "
                            f"{len(done) / max(batches, 1):.1f} rows; CPU: server {cpu[key][-1][0]:.2f} s, "
                            f"clients {cpu[key][-1][1]:.2f} s)")
            print(f"  turn {turn + 1}: " + "; ".join(line) + f"  [{load()}]")
        t_in = statistics.median(times["in"])
        print(f"  in-process batch scoring (one Program.score): median {t_in:.2f} s ({n / t_in:.1f} rows/s), CPU "
              f"median {statistics.median(c for c, _ in cpu['in']):.2f} s")
        for key, per_request in (("many", max(1, n // clients)), ("one", 1)):
            t_srv = statistics.median(times[key])
            print(f"  rewardlang serve, {per_request} row(s) per request: median {t_srv:.2f} s ({n / t_srv:.1f} "
                  f"rows/s); server / in-process throughput {t_in / t_srv:.2f}x (target >= 0.8); CPU medians: "
                  f"server {statistics.median(c for c, _ in cpu[key]):.2f} s, clients "
                  f"{statistics.median(c for _, c in cpu[key]):.2f} s")
    finally:
        prog.close()
        p.terminate()
        p.wait(60)


def start_server(cmd: list[str], root: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """Run ``cmd`` (a server that prints ``http://127.0.0.1:PORT`` on stderr) from the tree at ``root`` (its own
    PYTHONPATH; ``env`` added to the environment), wait for its ``/health``; (process, url)."""
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": root, **(env or {})},
                         cwd=root)
    seen = ""
    m = None
    for _ in range(100):  # the spec's warnings, if any, come first
        line = p.stderr.readline()
        seen += line
        m = re.search(r"http://127\.0\.0\.1:(\d+) ", line)
        if m or not line:
            break
    assert m, f"{cmd} in {root} did not start: {seen}"
    url = f"http://127.0.0.1:{m.group(1)}"
    threading.Thread(target=p.stderr.read, daemon=True).start()  # never let its log fill the pipe
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/health", timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    return p, url


def _start_server(root: str, spec: str = SPEC, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """``rewardlang serve spec`` of the tree at ``root`` on a free port; (process, url)."""
    return start_server([sys.executable, "-m", "rewardlang", "serve", spec, "--port", "0"], root, env)


class Pauses:
    """The intervals in which this process did not run at all for ``gap`` seconds or more: stopped from outside
    (on a shared machine, whoever runs a timed job may SIGSTOP the others' jobs, this benchmark's server and
    clients alike, and resume them minutes later). A run's wall time and its requests' latencies leave them out
    (:meth:`within`): they are time in which nothing of the benchmark ran. A process that is only starved (a low
    priority beside busy cores) still runs every few hundred milliseconds, far below ``gap``: that time counts."""

    def __init__(self, gap: float = 5.0, tick: float = 0.1) -> None:
        self.gap = gap
        self.tick = tick
        self.intervals: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(self.tick):
            now = time.perf_counter()
            if now - last >= self.gap:
                self.intervals.append((last, now))
            last = now

    def within(self, a: float, b: float) -> float:
        """Seconds of pauses between ``a`` and ``b`` (``time.perf_counter`` values)."""
        return sum(max(0.0, min(b, e) - max(a, s)) for s, e in self.intervals)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _clients(url: str, rows: list[dict], per_request: int, clients: int, cpu: list[float] | None = None
             ) -> tuple[float, int, list[float], list[dict | None]]:
    """``clients`` closed-loop threads post ``rows`` to ``url``/score, ``per_request`` at a time, each sending its
    next request when it has the answer to the previous one, a new connection per request (as OpenRLHF's aiohttp
    session per call); (seconds, rows answered, each row's latency: its request's, each row's whole result by
    index: ``score``, ``rl_masked``, ``rl_<component>``, ``error``). Seconds in which this process was stopped from
    outside (:class:`Pauses`) are left out of both, and said. ``cpu``, when given, gets the CPU seconds this process
    (the clients' threads) used for the run: on one machine the clients share the cores with the server."""
    n = len(rows)
    scores: list[dict | None] = [None] * n
    latencies: list[float] = []
    lock = threading.Lock()
    pauses = Pauses()
    spans: list[tuple[float, float, int]] = []  # each request's start, end and rows

    def post(body: dict) -> dict:
        req = urllib.request.Request(url + "/score", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        # an hour: a stop from outside (above) must not end the run
        with urllib.request.urlopen(req, timeout=3600) as r:
            return json.loads(r.read())

    def client(k: int) -> None:
        mine = list(range(k * (n // clients), (k + 1) * (n // clients))) if per_request > 1 else \
            list(range(k, n, clients))
        for j in range(0, len(mine), per_request):
            idx = mine[j:j + per_request]
            t = time.perf_counter()
            res = post({"rows": [rows[i] for i in idx]})["results"]
            with lock:
                spans.append((t, time.perf_counter(), len(idx)))
                for i, x in zip(idx, res):
                    scores[i] = x

    t0 = time.perf_counter()
    p0 = time.process_time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t1 = time.perf_counter()
    if cpu is not None:
        cpu.append(time.process_time() - p0)
    pauses.close()
    stopped = pauses.within(t0, t1)
    if stopped:
        print(f"    (this process was stopped from outside for {stopped:.0f} s of the run: left out of its time and "
              "latencies)", flush=True)
    for a, b, k in spans:
        latencies.extend([b - a - pauses.within(a, b)] * k)
    return t1 - t0 - stopped, sum(s is not None for s in scores), latencies, scores


def differing(runs: dict[str, list[dict | None]], rows: list[dict] | None = None) -> list[str]:
    """The rows whose result is not the same in every run: one line per (row, key) that differs, naming the row
    (its index, and its task when ``rows`` gives it), the key (``score``, ``rl_masked``, ``rl_<component>``) and
    each run's value, with each run's ``error`` (why a masked row is masked) where it has one. ``runs`` maps a
    run's name to its results by row index (what :func:`_clients` returns); every run scored the same rows (or
    rows that differ only by a comment of equal length). Empty when every row is the same in every run.

        >>> for line in differing({"a": [{"score": 1.0, "rl_masked": 0.0, "rl_c": 1.0, "error": None}],
        ...                        "b": [{"score": 0.0, "rl_masked": 1.0, "rl_c": 0.0, "error": "infra"}]}):
        ...     print(line)
        row 0 score: a 1.0; b 0.0 (infra)
        row 0 rl_masked: a 0.0; b 1.0 (infra)
        row 0 rl_c: a 1.0; b 0.0 (infra)
    """
    out = []
    names = list(runs)
    n = max((len(r) for r in runs.values()), default=0)
    for i in range(n):
        got = {k: (runs[k][i] if i < len(runs[k]) else None) for k in names}
        keys: list[str] = []
        for r in got.values():
            for key in (r or {"score": None}):
                if key != "error" and key not in keys:
                    keys.append(key)
        task = ""
        if rows is not None and i < len(rows):
            t = rows[i].get("prompt_id") or rows[i].get("entry_point")
            task = f" ({t})" if t else ""
        for key in keys:
            vals = [None if got[k] is None else got[k].get(key) for k in names]
            if all(v == vals[0] for v in vals):
                continue
            shown = "; ".join(f"{k} {v}" + (f" ({got[k]['error']})" if got[k] and got[k].get("error") else "")
                              for k, v in zip(names, vals))
            out.append(f"row {i}{task} {key}: {shown}")
    return out


def _pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, math.ceil(q * len(ys)) - 1))] if ys else float("nan")


def bench_server_against(ref: str, clients_list: list[int], per_request: int = 32, runs: int = 2,
                         ref_env: dict[str, str] | None = None) -> None:
    """Issue 38's figures: at each number of closed-loop clients C, ``C * per_request`` rows posted by C clients
    with one row per request and with ``per_request`` rows per request, to this tree's server and to git
    ``ref``'s (a detached worktree), both running and serving ``ref``'s ``quality_grpo.reward``, sides and trees alternating turn by turn (fresh rows for every
    run: nothing is read from a cache). Per tree and C: throughput of each (medians over turns), the ratio
    one-row / batched (target >= 0.8), p50/p99 per-row latency (a row's latency is its request's), and whether
    every row's score is the same in every run (the rows of every run differ only by a comment of equal length)."""
    tmp = tempfile.mkdtemp(prefix="rewardlang-bench-")
    old = os.path.join(tmp, "tree")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", old, ref], check=True)
    procs: list[subprocess.Popen] = []
    try:
        sha = subprocess.run(["git", "-C", old, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        ref_name = f"{ref} ({sha})" + "".join(f" {k}={v}" for k, v in (ref_env or {}).items())
        sides = {"this tree": ROOT, ref_name: old}
        urls = {}
        pids = {}
        # both serve REF's spec: this tree reads every spec an older one does, not always the other way round
        spec = os.path.join(old, "specs", "quality_grpo.reward")
        for name, root in sides.items():
            p, url = _start_server(root, spec, ref_env if name == ref_name else None)
            procs.append(p)
            urls[name] = url
            pids[name] = p.pid
            # warm: compile, sandbox slots, analyser helpers
            _clients(url, samples(2 * max(clients_list), f"warm-{name}"), 1, max(clients_list))
        print(f"[server against {ref}] quality_grpo.reward; closed-loop clients {clients_list}, 1 and "
              f"{per_request} rows per request, C x {per_request} rows per run, {runs} alternating turn(s)  "
              f"[{load()}]", flush=True)
        times: dict[tuple[str, int, int], list[float]] = {}
        lats: dict[tuple[str, int, int], list[float]] = {}
        cpus: dict[tuple[str, int, int], list[float]] = {}  # the server's CPU seconds per row (its process tree)
        client_cpus: dict[tuple[str, int, int], list[float]] = {}  # the clients' CPU seconds per row (this process)
        batches: dict[tuple[str, int, int], list[int]] = {}  # the batches the server scored in each run
        busy: dict[tuple[str, int, int], list[float]] = {}  # the share of each run's wall time spent scoring
        results: dict[int, dict[str, list[dict | None]]] = {}  # per run size: each run's results by row
        for c in clients_list:
            n = c * per_request
            for turn in range(runs):
                order = list(sides) if turn % 2 == 0 else list(sides)[::-1]
                line = []
                for per in ((per_request, 1) if turn % 2 == 0 else (1, per_request)):
                    for name in order:
                        rows = samples(n, f"{name}-{c}-{per}-{turn}")
                        c0 = _tree_cpu(pids[name])
                        m0 = post_metrics(urls[name])
                        mine: list[float] = []
                        dt, got, lat, scores = _clients(urls[name], rows, per, c, mine)
                        cpus.setdefault((name, c, per), []).append((_tree_cpu(pids[name]) - c0) / n)
                        client_cpus.setdefault((name, c, per), []).append(mine[0] / n)
                        m1 = post_metrics(urls[name])
                        # how the server coalesced: its batches, and the share of the run it spent scoring
                        # (`scoring_seconds`: servers from issue 38 on; an older one does not say)
                        batches.setdefault((name, c, per), []).append(m1["batches"] - m0["batches"])
                        if "scoring_seconds" in m1:
                            busy.setdefault((name, c, per), []).append(
                                (m1["scoring_seconds"] - m0["scoring_seconds"]) / dt)
                        assert got == n, (got, n)
                        results.setdefault(n, {})[f"{'this' if name == 'this tree' else 'ref'} C={c} {per}/req turn "
                                                  f"{turn + 1}"] = scores
                        times.setdefault((name, c, per), []).append(dt)
                        lats.setdefault((name, c, per), []).extend(lat)
                        line.append(f"{'this' if name == 'this tree' else 'ref'} {per}/req {n / dt:.1f} rows/s "
                                    f"({batches[(name, c, per)][-1]} batches)")
                print(f"  C={c} turn {turn + 1}: " + "; ".join(line) + f"  [{load()}]", flush=True)
        diffs = [f"C={n // per_request}: {d}" for n, runs_n in results.items() for d in
                 differing(runs_n, samples(n, "names"))]
        print(f"  every row's result (score, mask, each component) equal in every run (both trees, both request "
              f"sizes): {not diffs}" + "".join(f"\n    {d}" for d in diffs[:200])
              + (f"\n    ... and {len(diffs) - 200} more" if len(diffs) > 200 else ""), flush=True)
        for c in clients_list:
            n = c * per_request
            for name in sides:
                t1 = statistics.median(times[(name, c, 1)])
                tb = statistics.median(times[(name, c, per_request)])
                l1, lb = lats[(name, c, 1)], lats[(name, c, per_request)]
                print(f"  C={c:<3d} {name[:40]:40s} 1 row/request {n / t1:6.1f} rows/s (p50 {_pct(l1, .5):.2f} s, "
                      f"p99 {_pct(l1, .99):.2f} s); {per_request} rows/request {n / tb:6.1f} rows/s (p50 "
                      f"{_pct(lb, .5):.2f} s, p99 {_pct(lb, .99):.2f} s); one-row / batched {tb / t1:.2f}x "
                      f"(target >= 0.8)")
                k1 = statistics.median(cpus[(name, c, 1)])
                kb = statistics.median(cpus[(name, c, per_request)])
                print(f"  {'':28s} server CPU per row (its process tree): 1 row/request {k1 * 1e3:.1f} ms, "
                      f"{per_request} rows/request {kb * 1e3:.1f} ms; batched / one-row {kb / k1:.2f}x")
                # the clients run on the same cores: what they take, and the ratio the CPU alone allows (both sides
                # keeping every core busy, a row costs the server's CPU plus the clients')
                q1 = statistics.median(client_cpus[(name, c, 1)])
                qb = statistics.median(client_cpus[(name, c, per_request)])
                print(f"  {'':28s} clients' CPU per row (this process): 1 row/request {q1 * 1e3:.1f} ms, "
                      f"{per_request} rows/request {qb * 1e3:.1f} ms; CPU-bound ceiling of one-row / batched, "
                      f"(server + clients) batched / one-row: {(kb + qb) / (k1 + q1):.2f}x")
                shown = []
                for per in (1, per_request):
                    nb = batches[(name, c, per)]
                    b = busy.get((name, c, per))
                    shown.append(f"{per} row(s)/request: mean batch {n * len(nb) / max(sum(nb), 1):.1f} rows"
                                 + (f", scoring {statistics.median(b):.0%} of the run" if b else ""))
                print(f"  {'':28s} batches: " + "; ".join(shown))
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", old], check=False)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def bench_http(n: int = 1024, clients: int = 16, runs: int = 2) -> None:
    """What HTTP costs the server per request, by parser: this tree's server on ``codepo_text.reward`` (no sandbox,
    no tools: a row costs well under a millisecond, so the request's own handling is most of the CPU) run twice,
    with httptools' compiled parser (the default where it is installed) and with ``REWARDLANG_SERVER_HTTP=h11``,
    ``clients`` closed-loop clients posting ``n`` one-row requests, the two alternating ``runs`` times (fresh rows
    every run): the server's CPU per request (its process tree) and the throughput, medians."""
    spec = os.path.join(ROOT, "specs", "codepo_text.reward")
    with open(os.path.join(ROOT, "examples", "code_samples.jsonl"), encoding="utf-8") as f:
        base = [{"prompt": r["prompt"], "completion": r["completion"]} for r in map(json.loads, f)]
    procs = {}
    try:
        for name, env in (("httptools", {"REWARDLANG_SERVER_HTTP": "auto"}), ("h11", {"REWARDLANG_SERVER_HTTP": "h11"})):
            p, url = _start_server(ROOT, spec, env)
            procs[name] = (p, url)
            assert post_metrics(url).get("http_parser") == name, post_metrics(url).get("http_parser")
        cpu: dict[str, list[float]] = {k: [] for k in procs}
        rate: dict[str, list[float]] = {k: [] for k in procs}
        print(f"[http] {n} one-row requests of codepo_text.reward from {clients} clients, per parser  [{load()}]",
              flush=True)
        for turn in range(runs + 1):  # turn 0 warms both (not counted)
            for name in (list(procs) if turn % 2 == 0 else list(procs)[::-1]):
                p, url = procs[name]
                rows = []
                for i in range(n):
                    r = dict(base[i % len(base)])
                    r["completion"] = r["completion"] + f"\n# {name:9s} {turn} {i:06d}"
                    rows.append(r)
                c0 = _tree_cpu(p.pid)
                dt, got, _lat, _res = _clients(url, rows, 1, clients)
                assert got == n
                if turn:
                    cpu[name].append((_tree_cpu(p.pid) - c0) / n)
                    rate[name].append(n / dt)
        for name in procs:
            print(f"  {name:9s}: server CPU {statistics.median(cpu[name]) * 1e3:.2f} ms a request "
                  f"({', '.join(f'{x * 1e3:.2f}' for x in cpu[name])}), {statistics.median(rate[name]):.0f} requests/s")
        print(f"  h11 / httptools, server CPU per request: "
              f"{statistics.median(cpu['h11']) / statistics.median(cpu['httptools']):.2f}x  [{load()}]", flush=True)
    finally:
        for p, _ in procs.values():
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, parents before children (``/proc``)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [root]
    while todo:
        x = todo.pop(0)
        out.append(x)
        todo.extend(kids.get(x, []))
    return out


def _signal_tree(root: int, sig: int) -> int:
    """Send ``sig`` to ``root`` and its descendants (this benchmark's own server tree); how many got it."""
    n = 0
    for pid in _descendants(root):
        try:
            os.kill(pid, sig)
            n += 1
        except (ProcessLookupError, PermissionError):
            pass
    return n


def bench_stops(clients: int = 16, per_request: int = 4, stop_s: float = 40.0, every_s: float = 3.0,
                hogs: int = 2, max_stops: int = 3) -> None:
    """The scores must not depend on the machine's load (issue 38's score mismatch): this tree's server scores
    the same ``clients * per_request * 4`` rows of ``quality_grpo.reward`` (each run's rows differ only by a
    comment of equal length, so that no run reads another's cache) (1) on a quiet machine, (2) with ``hogs``
    busy-looping processes at this process's priority, (3) with the server's whole process tree (the server, its
    sandbox slots and their programs, the analysers' helpers and their runs) stopped with SIGSTOP for ``stop_s``
    seconds every ``every_s`` seconds of its running (at most ``max_stops`` times), then continued (as a job's owner on a shared machine may
    stop the other jobs), and (4) quiet again. Every row's result (score, mask, each component) is compared with
    the first run's, and each run's masked rows and infrastructure failures are shown (``/metrics``): a row may
    be masked by a stop (an infrastructure failure, counted), never given another value."""
    import signal

    n = clients * per_request * 4
    p, url = _start_server(ROOT)
    hog_procs: list[subprocess.Popen] = []
    try:
        _clients(url, samples(2 * clients, "warm-stops"), 1, clients)
        runs: dict[str, list[dict | None]] = {}

        def one(name: str, disturb: Any = None) -> None:
            m0 = post_metrics(url)
            done = threading.Event()
            t = threading.Thread(target=disturb, args=(done,), daemon=True) if disturb else None
            if t:
                t.start()
            t0 = time.perf_counter()
            try:
                _dt, got, _lat, res = _clients(url, samples(n, f"stops-{name:>5s}"), per_request, clients)
            finally:
                done.set()
                if t:
                    t.join()
            m1 = post_metrics(url)
            runs[name] = res
            delta = {k: m1[k] - m0[k] for k in ("masked_rows", "infra_failures", "sandbox_timeouts",
                                                "tool_timeouts") if k in m1}
            print(f"  {name}: {got} rows in {time.perf_counter() - t0:.1f} s; {delta}  [{load()}]", flush=True)

        def stopper(done: threading.Event) -> None:
            k = 0
            while k < max_stops and not done.wait(every_s):
                _signal_tree(p.pid, signal.SIGSTOP)
                k += 1
                done.wait(stop_s)
                _signal_tree(p.pid, signal.SIGCONT)
            print(f"    (the server's process tree was stopped {k} time(s) for {stop_s:.0f} s)", flush=True)

        def hogging(done: threading.Event) -> None:
            for _ in range(hogs):
                hog_procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            done.wait()
            for h in hog_procs:
                h.kill()
                h.wait()
            hog_procs.clear()

        print(f"[stops] {n} rows of quality_grpo.reward, {clients} clients, {per_request} rows per request  "
              f"[{load()}]", flush=True)
        one("quiet")
        one("hogs", hogging)
        one("stops", stopper)
        one("quiet2")
        diffs = differing(runs, samples(n, "names"))
        print(f"  every row's result equal in every run: {not diffs}" + "".join(f"\n    {d}" for d in diffs[:200]),
              flush=True)
    finally:
        _signal_tree(p.pid, signal.SIGCONT)
        for h in hog_procs:
            h.kill()
        p.terminate()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def post_metrics(url: str) -> dict:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return json.loads(r.read())


def _codepo_rows(path: str, n: int) -> None:
    from benchmarks.bench_codepo_full import REASONINGS
    from benchmarks.corpus import as_completion, load_corpus

    corpus = load_corpus()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            r = corpus[i % len(corpus)]
            f.write(json.dumps({"prompt": f"{r.task_id}#{i // len(corpus)}", "reference": r.reference,
                                "completion": as_completion(r.candidate + f"\n# variant {i}",
                                                            REASONINGS[i % len(REASONINGS)])}) + "\n")


def bench_ray(n: int) -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        print("[ray] skipped: Ray is not installed (pip install \"rewardlang[ray]\")")
        return
    spec = os.path.join(ROOT, "specs", "codepo_text.reward")
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "rows.jsonl")
        _codepo_rows(data, n)
        base = [sys.executable, "-m", "rewardlang", "score", spec, "-i", data, "--no-progress", "--no-summary"]
        t0 = time.perf_counter()
        subprocess.run(base + ["-o", os.path.join(d, "local.jsonl")], check=True, env=ENV, capture_output=True)
        t_local = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(base + ["-o", os.path.join(d, "ray.jsonl"), "--ray", "local", "--workers", "2"], check=True,
                       env=ENV, capture_output=True)
        t_ray = time.perf_counter() - t0
        same = _read(os.path.join(d, "local.jsonl")) == _read(os.path.join(d, "ray.jsonl"))
    print(f"[ray] {n} rows of codepo_text.reward, whole commands; outputs byte-identical: {same}")
    print(f"  rewardlang score (local): {t_local:.2f} s;  --ray local --workers 2: {t_ray:.2f} s;  "
          f"overhead {t_ray - t_local:+.2f} s ({t_ray / t_local:.2f}x)")


def _run_timed(argv: list[str]) -> tuple[float, float]:
    """Run a command; its wall time and the seconds its processes' threads were ready to run but waited for a CPU
    (``/proc/PID/task/TID/schedstat``, polled every 0.2 s, summed over the command's process tree): held by other
    jobs, or by more of its own threads than there are cores; on a quiet machine ~0 for one worker."""
    waits: dict[tuple[int, int], float] = {}
    with tempfile.TemporaryFile() as err_f:  # not a pipe: nothing reads it while the command runs
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=err_f)
        _watch(p, waits)
        wall = time.perf_counter() - t0  # at the command's exit (the poller runs beside the wait)
        err_f.seek(0)
        err = err_f.read().decode(errors="replace")
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}):\n{err}")
    return wall, sum(waits.values())


def _watch(p: subprocess.Popen, waits: dict[tuple[int, int], float]) -> None:
    """Wait for ``p``, sampling its process tree's schedstat into ``waits`` meanwhile."""

    def poll() -> None:
        while p.poll() is None:
            sample()
            time.sleep(0.2)  # a scan costs ~1.5 ms of this process's CPU: under 1% of a core

    def sample() -> None:
        for pid in _descendants(p.pid):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        waits[(pid, int(tid))] = int(f.read().split()[1]) / 1e9
                except (OSError, ValueError, IndexError):
                    pass

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    p.wait()
    watcher.join()


def bench_workers(n: int, runs: int) -> None:
    import resource

    spec = os.path.join(ROOT, "specs", "codepo.reward")
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "rows.jsonl")
        _codepo_rows(data, n)
        times: dict[int, list[float]] = {1: [], 2: []}
        cpu: dict[int, list[float]] = {1: [], 2: []}
        wait: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(runs):
            for w in (1, 2):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t, q = _run_timed([sys.executable, "-m", "rewardlang", "score", spec, "-i", data, "-o",
                                   os.path.join(d, f"w{w}.jsonl"), "--workers", str(w), "--no-progress",
                                   "--no-summary"])
                times[w].append(t)
                wait[w].append(q)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and its worker processes
                cpu[w].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            print(f"  pair: --workers 1 {times[1][-1]:.2f} s (waited for a CPU {wait[1][-1]:.2f} s), --workers 2 "
                  f"{times[2][-1]:.2f} s (waited {wait[2][-1]:.2f} s): {times[1][-1] / times[2][-1]:.2f}x  ({load()})",
                  flush=True)
        same = _read(os.path.join(d, "w1.jsonl")) == _read(os.path.join(d, "w2.jsonl"))
    m1, m2 = statistics.median(times[1]), statistics.median(times[2])
    c1, c2 = statistics.median(cpu[1]), statistics.median(cpu[2])
    print(f"[workers] {n} distinct rows of codepo.reward, {runs} alternating runs each; outputs identical: {same}")
    print(f"  --workers 1: median {m1:.2f} s ({', '.join(f'{t:.1f}' for t in times[1])}); --workers 2: median "
          f"{m2:.2f} s ({', '.join(f'{t:.1f}' for t in times[2])}); speed-up {m1 / m2:.2f}x (target >= 1.6)")
    print(f"  CPU (user + sys, the command and its workers): --workers 1 median {c1:.2f} s, --workers 2 median "
          f"{c2:.2f} s ({c2 / c1:.2f}x: what the second worker costs beyond the work)")
    print(f"  ready but waiting for a CPU (median): --workers 1 {statistics.median(wait[1]):.2f} s, --workers 2 "
          f"{statistics.median(wait[2]):.2f} s (other jobs', or the command's own threads beyond the cores)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--ray-rows", type=int, default=20000)
    ap.add_argument("--workers-rows", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--server-runs", type=int, default=3, help="turns of the server part (medians)")
    ap.add_argument("--clients", default="16",
                    help="concurrent clients of the server part (OpenRLHF has one per rollout in flight); with "
                         "--server-against, a comma-separated list (16,64)")
    ap.add_argument("--per-request", type=int, default=32,
                    help="rows per request of the batched side of --server-against")
    ap.add_argument("--only", default="verl,server,ray,workers",
                    help="parts to run; not in the default: `stops` (the scores under load and under stops), "
                         "`http` (the server's CPU per request, httptools against h11)")
    ap.add_argument("--stop-s", type=float, default=40.0, help="`stops`: seconds the server's tree is stopped")
    ap.add_argument("--server-against", metavar="REF",
                    help="the server part: this tree's server beside git REF's, alternating turns (throughput ratio)")
    ap.add_argument("--against-env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable of REF's server only (e.g. REWARDLANG_SERVER_HTTP=h11 with "
                         "--server-against HEAD: the same tree on h11)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(load())
    if "verl" in only:
        bench_verl(args.samples)
    if "server" in only and args.server_against:
        bench_server_against(args.server_against, [int(c) for c in str(args.clients).split(",")],
                             per_request=args.per_request, runs=args.server_runs,
                             ref_env=dict(kv.split("=", 1) for kv in args.against_env))
    elif "server" in only:
        bench_server(args.samples, clients=int(args.clients), runs=args.server_runs)
    if "stops" in only:
        bench_stops(stop_s=args.stop_s)
    if "http" in only:
        bench_http()
    if "ray" in only and args.ray_rows:
        bench_ray(args.ray_rows)
    if "workers" in only and args.workers_rows:
        bench_workers(args.workers_rows, args.runs)
    print(load())


if __name__ == "__main__":
    main()
