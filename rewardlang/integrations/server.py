"""``rewardlang serve``: a reward server (starlette + uvicorn) that batches concurrent requests.

Endpoints:

- ``POST /`` and ``POST /get_reward``: OpenRLHF's remote reward protocol, ``{"query": [...], "prompts": [...],
  "labels": [...]}`` -> ``{"rewards", "scores", "extra_logs"}`` (as :func:`rewardlang.integrations.openrlhf.
  reward_func`: scalars for one sample, which is what OpenRLHF 0.11 sends and reads, lists for several).
- ``POST /score``: ``{"rows": [{column: value, ...}, ...]}`` -> ``{"results": [{"score", "rl_masked",
  "rl_<component>"...}, ...]}``, the rows of ``rewardlang score``'s input.
- ``GET /health``: ``{"status": "ok", "spec", "sandbox_level"}``; ``GET /metrics``: requests, rows, batch sizes,
  mean latency, masked rows, bad rows, infrastructure failures, rejected requests, rows waiting, sandbox level.

Requests that arrive within ``window_s`` are scored as one batch (up to ``max_batch`` rows) through one compiled
program and one sandbox pool. More than ``max_pending`` waiting rows: the request is answered 503 ``overloaded`` at
once. A malformed request is answered 400 (bad JSON, with its line and column) or 422 (a field, named). SIGTERM or
Ctrl-C: no new connection is accepted, every accepted request is answered, then the server exits.

Example (the app without a socket; ``rewardlang serve SPEC --port P`` runs it under uvicorn)::

    >>> from rewardlang.integrations.server import make_app
    >>> app = make_app("specs/codepo_text.reward")
    >>> [r.path for r in app.routes]
    ['/', '/get_reward', '/score', '/health', '/metrics']
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

from rewardlang.integrations.batching import Batcher, Overloaded, SpecScorer
from rewardlang.integrations.openrlhf import merge_masked, openrlhf_rows, to_openrlhf

__all__ = ["make_app", "serve"]


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _body(request: Any) -> dict:
    raw = await request.body()
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise _BadRequest(400, f"the body is not UTF-8: {exc}")
    except json.JSONDecodeError as exc:
        raise _BadRequest(400, f"the body is not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}")
    if not isinstance(data, dict):
        raise _BadRequest(422, f"the body must be a JSON object, not {type(data).__name__}")
    return data


def _list_field(data: dict, name: str, of: type | None = None) -> list:
    if name not in data:
        raise _BadRequest(422, f"field `{name}` is missing")
    v = data[name]
    if not isinstance(v, list):
        raise _BadRequest(422, f"field `{name}` must be a list, not {type(v).__name__}")
    if of is not None:
        for i, x in enumerate(v):
            if not isinstance(x, of):
                raise _BadRequest(422, f"field `{name}`[{i}] must be {of.__name__}, not {type(x).__name__}")
    return v


def make_app(spec: str, *, program: Any = None, window_s: float = 0.02, max_batch: int = 512,
             max_pending: int = 8192) -> Any:
    """The ASGI app for ``spec`` (an already loaded ``program`` may be given); its batcher starts with the app's
    lifespan and is drained at shutdown."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    state: dict[str, Any] = {}

    def batcher() -> Batcher:
        if "batcher" not in state:
            state["batcher"] = Batcher(SpecScorer(spec, program=program), window_s=window_s, max_batch=max_batch,
                                       max_pending=max_pending)
        return state["batcher"]

    def error(status: int, message: str) -> JSONResponse:
        headers = {"Retry-After": "1"} if status == 503 else None
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    async def openrlhf(request: Request) -> JSONResponse:
        try:
            data = await _body(request)
            queries = _list_field(data, "query", str)
            prompts = _list_field(data, "prompts", str)
            labels = _list_field(data, "labels") if "labels" in data else [None] * len(queries)
            if not (len(queries) == len(prompts) == len(labels)):
                raise _BadRequest(422, f"{len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels: "
                                       "one of each per sample")
            b = batcher()
            try:
                rows = openrlhf_rows(b.scorer, queries, prompts, labels)
            except ValueError as exc:
                raise _BadRequest(422, str(exc))
            good = [r for r in rows if r is not None]
            scored = await asyncio.wrap_future(b.submit(good)) if good else []
            results = merge_masked(b.scorer, rows, scored)
        except _BadRequest as exc:
            return error(exc.status, str(exc))
        except Overloaded as exc:
            return error(503, str(exc))
        return JSONResponse(to_openrlhf(results, scalar=True))

    async def score(request: Request) -> JSONResponse:
        try:
            data = await _body(request)
            rows = _list_field(data, "rows", dict)
            b = batcher()
            fut = b.submit(rows)
            results = await asyncio.wrap_future(fut)
        except _BadRequest as exc:
            return error(exc.status, str(exc))
        except Overloaded as exc:
            return error(503, str(exc))
        return JSONResponse({"results": results})

    async def health(request: Request) -> JSONResponse:
        b = batcher()
        return JSONResponse({"status": "ok", "spec": spec, "sandbox_level": b.scorer.sandbox_level()})

    async def metrics(request: Request) -> JSONResponse:
        b = batcher()
        st = b.scorer.stats
        sizes = sorted(b.batch_sizes.elements())
        return JSONResponse({
            "requests": b.requests, "rejected_overloaded": b.rejected, "rows": st["rows"], "batches": st["batches"],
            "batch_size_mean": (sum(sizes) / len(sizes)) if sizes else 0.0,
            "batch_size_max": sizes[-1] if sizes else 0,
            "latency_mean_s": b.latency_sum / b.latency_n if b.latency_n else 0.0,
            "masked_rows": st["masked"] + st["bad_rows"], "bad_rows": st["bad_rows"],
            "infra_failures": st["infra_failures"], "pending_rows": b.pending,
            "sandbox_level": b.scorer.sandbox_level(),
            "sandbox_executions": st["sandbox.executions"],
        })

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return error(getattr(exc, "status_code", 404), f"{request.method} {request.url.path}: "
                     "POST / or /get_reward (OpenRLHF), POST /score (rows), GET /health, GET /metrics")

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Any):  # type: ignore[no-untyped-def]
        batcher()  # compile and start now, not at the first request
        yield
        b = state.pop("batcher")
        await asyncio.get_running_loop().run_in_executor(None, b.close)  # every accepted request is finished
        b.scorer.close()

    routes = [Route("/", openrlhf, methods=["POST"]), Route("/get_reward", openrlhf, methods=["POST"]),
              Route("/score", score, methods=["POST"]), Route("/health", health, methods=["GET"]),
              Route("/metrics", metrics, methods=["GET"])]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})


def serve(spec: str, *, host: str = "127.0.0.1", port: int = 8000, program: Any = None, window_s: float = 0.02,
          max_batch: int = 512, max_pending: int = 8192) -> int:
    """Run the server until SIGTERM/Ctrl-C; returns the exit code (1 when the address cannot be bound)."""
    import uvicorn

    try:
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except (OSError, OverflowError) as exc:  # in use, not an address here, a port outside 0-65535
        sys.stderr.write(f"error: cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}\n")
        return 1
    app = make_app(spec, program=program, window_s=window_s, max_batch=max_batch, max_pending=max_pending)
    bound = sock.getsockname()[1]
    sys.stderr.write(f"rewardlang: serving {spec} on http://{host}:{bound} (POST / or /get_reward, POST /score, "
                     "GET /health, GET /metrics)\n")
    sys.stderr.flush()
    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # uvicorn re-raises the signal once it has shut down; a requested stop that answered every accepted
            # request is a success (exit 0), not an interrupted command (130/143)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = _Server(config)
    server.run(sockets=[sock])
    sys.stderr.write("rewardlang: stopped (every accepted request was answered)\n")
    return 0
