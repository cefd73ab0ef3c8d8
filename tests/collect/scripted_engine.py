"""A scripted OpenAI-style engine in a child process (real HTTP on 127.0.0.1, aiohttp).

It answers every completion at once (``max_tokens`` token chunks, usage, ``[DONE]``), lists
one model,
and its ``/metrics`` behaves as ``--metrics`` says:

* ``idle``: vLLM's running and waiting gauges at 0;
* ``hang``: never answers (the connection stays open);
* ``busy:N``: 1 running request for the first N scrapes, then 0;
* ``hang-after:K:N``: idle gauges for the first K scrapes, then N scrapes that never
  answer (an overloaded engine's ``/metrics``), then idle again; ``hang-after:K``: never
  answers again after the first K;
* ``never-idle``: 2 running and 1 waiting, always;
* ``none``: 404;
* ``other``: a page without running or waiting gauges.

With ``--vocab N`` it refuses, as llama.cpp's server does, a prompt of token ids that holds
one at or above N: HTTP 400 with llama.cpp's error body ("Prompt contains invalid tokens").

``GET /stats`` returns ``{"metrics_scrapes": …, "prompts": …, "distinct_prompts": …}``.
Run as ``python scripted_engine.py --metrics MODE``; it prints ``serving <url>`` when
ready. A child process, so that its CPU time does not share the test's interpreter lock
with the load generator whose send lag the tests measure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.server_process import ServerProcess, start_server_process

MODEL = "scripted"
INVALID_TOKENS = "Prompt contains invalid tokens"
"""llama.cpp's message for a prompt token id outside the model's vocabulary."""


def _sse(obj: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def body(prompt: object, max_tokens: int) -> bytes:
    """An honest answer: ``max_tokens`` one-token chunks, then usage that counts the prompt's
    token ids and the tokens sent."""
    n_prompt = len(prompt) if isinstance(prompt, list) else 16
    chunks = [
        _sse({"choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}]})
        for i in range(max_tokens)
    ]
    usage = {
        "prompt_tokens": n_prompt,
        "completion_tokens": max_tokens,
        "total_tokens": n_prompt + max_tokens,
    }
    return b"".join([*chunks, _sse({"choices": [], "usage": usage}), b"data: [DONE]\n\n"])


class Engine:
    """The server's state: its /metrics mode and what it has seen."""

    def __init__(self, metrics: str, vocab: int | None = None) -> None:
        self.mode = metrics
        self.vocab = vocab
        self.busy_for = int(metrics.split(":")[1]) if metrics.startswith("busy:") else 0
        self.hang_from, self.hang_until = 0, 0
        if metrics.startswith("hang-after:"):
            parts = [int(x) for x in metrics.split(":")[1:]]
            self.hang_from = parts[0]
            self.hang_until = parts[0] + parts[1] if len(parts) > 1 else 10**9
        self.scrapes = 0
        self.prompts: list[str] = []

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body_in = await request.json()
        prompt = body_in.get("prompt")
        self.prompts.append(json.dumps(prompt))
        if self.vocab is not None and isinstance(prompt, list) and max(prompt) >= self.vocab:
            # The body llama.cpp's server answers with (tests/engines: the real one).
            error = {"code": 400, "message": INVALID_TOKENS, "type": "invalid_request_error"}
            return web.json_response({"error": error}, status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        # The client cancels the requests still open when a window ends: not an error here.
        with contextlib.suppress(ConnectionError):
            await resp.prepare(request)
            await resp.write(body(body_in.get("prompt"), int(body_in.get("max_tokens", 4))))
            await resp.write_eof()
        return resp

    async def models(self, _request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": MODEL, "owned_by": "scripted"}]})

    async def metrics(self, _request: web.Request) -> web.Response:
        self.scrapes += 1
        if self.mode == "hang" or self.hang_from < self.scrapes <= self.hang_until:
            await asyncio.Event().wait()
        if self.mode == "none":
            raise web.HTTPNotFound()
        if self.mode == "other":
            return web.Response(text="# TYPE up gauge\nup 1\n", content_type="text/plain")
        running, waiting = 0, 0
        if self.mode == "never-idle":
            running, waiting = 2, 1
        elif self.scrapes <= self.busy_for:
            running = 1
        text = (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="{MODEL}"}} {running}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            f'vllm:num_requests_waiting{{model_name="{MODEL}"}} {waiting}\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def stats(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "metrics_scrapes": self.scrapes,
                "prompts": len(self.prompts),
                "distinct_prompts": len(set(self.prompts)),
            }
        )


async def serve(mode: str, vocab: int | None = None) -> None:
    engine = Engine(mode, vocab)
    app = web.Application()
    app.router.add_post("/v1/completions", engine.completions)
    app.router.add_get("/v1/models", engine.models)
    app.router.add_get("/metrics", engine.metrics)
    app.router.add_get("/stats", engine.stats)
    http = TestServer(app, host="127.0.0.1", port=0)
    await http.start_server(shutdown_timeout=0.1)
    print(f"serving http://127.0.0.1:{http.port}", flush=True)
    await asyncio.Event().wait()


class EngineProcess(ServerProcess):
    """A running scripted engine: its process and root URL."""

    def stats(self) -> dict[str, int]:
        """What the engine has seen (see the module docstring)."""
        import httpx

        data: dict[str, int] = httpx.get(self.url + "/stats", timeout=5.0, trust_env=False).json()
        return data


def start_engine(metrics: str, vocab: int | None = None) -> EngineProcess:
    """Start the scripted engine with ``--metrics METRICS`` (and ``--vocab VOCAB``) and
    wait for its URL.

    Raises:
        RuntimeError: it did not start.
    """
    argv = [sys.executable, str(Path(__file__).resolve()), "--metrics", metrics]
    argv += ["--vocab", str(vocab)] if vocab is not None else []
    return EngineProcess(*start_server_process(argv))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", default="idle")
    parser.add_argument("--vocab", type=int, default=None)
    args = parser.parse_args()
    asyncio.run(serve(args.metrics, args.vocab))
