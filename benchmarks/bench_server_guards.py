"""What the reward server's guards against its clients cost (issue 32, class 3): ``rewardlang serve`` beside the
same app under plain uvicorn (its own h11 protocol and listening socket: no deadlines, no connection bound, no
per-value charge), one tree, one spec, in alternating turns, so the machine's load falls on both alike.

    python benchmarks/bench_server_guards.py [--spec specs/codepo_text.reward] [--samples 512] [--turns 5]

The default spec is the cheap one (no sandbox): the server's own costs per request are the largest share there.
Both sides get fresh rows every turn (nothing is answered from a cache), 16 concurrent clients, a new connection
per request (as OpenRLHF's aiohttp session per call), at 32 rows and at 1 row per request; the throughput ratio is
guarded / plain (medians; >= 0.95 is the target) with the load beside each turn, and the server process's own CPU
per row (the figure the machine's load disturbs least).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from bench_scale import _clients, load, samples, start_server  # noqa: E402

PLAIN = """
import socket, sys, uvicorn
from rewardlang.integrations.server import make_app
app = make_app(sys.argv[1])
sock = socket.create_server(("127.0.0.1", 0))
sys.stderr.write(f"plain uvicorn: http://127.0.0.1:{sock.getsockname()[1]} \\n")
sys.stderr.flush()
uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, http="h11")).run(
    sockets=[sock])
"""


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (its own, not its children's)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=os.path.join(ROOT, "specs", "codepo_text.reward"))
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--clients", type=int, default=16)
    a = ap.parse_args()
    sides = {"guarded (rewardlang serve)": [sys.executable, "-m", "rewardlang", "serve", a.spec, "--port", "0"],
             "plain uvicorn": [sys.executable, "-c", PLAIN, a.spec]}
    procs, urls, pids = [], {}, {}
    try:
        for name, cmd in sides.items():
            p, url = start_server(cmd, ROOT)
            procs.append(p)
            urls[name] = url
            pids[name] = p.pid
            _clients(url, samples(2 * a.clients, f"warm-{name}"), 1, a.clients)
        print(f"{a.samples} rows of {os.path.basename(a.spec)}, {a.clients} concurrent clients, {a.turns} "
              f"alternating turns  [{load()}]")
        times: dict[tuple[str, int], list[float]] = {}
        cpu: dict[tuple[str, int], list[float]] = {}
        per = (32, 1)
        for turn in range(a.turns):
            order = list(sides) if turn % 2 == 0 else list(sides)[::-1]
            line = []
            for k in per:
                for name in order:
                    rows = samples(a.samples, f"{name}-{k}-{turn}")
                    c0 = cpu_s(pids[name])
                    dt, got, _, _ = _clients(urls[name], rows, k, a.clients)
                    assert got == a.samples, (got, a.samples)
                    times.setdefault((name, k), []).append(dt)
                    cpu.setdefault((name, k), []).append(cpu_s(pids[name]) - c0)
                    line.append(f"{name.split()[0]} {k}/req {a.samples / dt:.0f} rows/s")
            print(f"  turn {turn + 1}: " + "; ".join(line) + f"  [{load()}]")
        g, p_ = list(sides)
        for k in per:
            tg, tp = statistics.median(times[(g, k)]), statistics.median(times[(p_, k)])
            cg, cp = statistics.median(cpu[(g, k)]), statistics.median(cpu[(p_, k)])
            print(f"  {k} row(s) per request: guarded {a.samples / tg:.1f} rows/s, plain {a.samples / tp:.1f} rows/s "
                  f"(medians); throughput ratio {tp / tg:.2f}x (target >= 0.95); server CPU per row guarded "
                  f"{1000 * cg / a.samples:.2f} ms, plain {1000 * cp / a.samples:.2f} ms: {cp / cg:.2f}x")
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
