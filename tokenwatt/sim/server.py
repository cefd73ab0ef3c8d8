"""The simulated engine's HTTP server (aiohttp): an OpenAI-compatible API over the model.

Serves ``/v1/completions`` and ``/v1/chat/completions`` (streamed as server-sent events or
not), ``/v1/models``, ``/version`` and ``/metrics`` (Prometheus text with vLLM's metric
names plus ``tokenwatt_sim_power_watts`` and ``tokenwatt_sim_energy_joules_total``). One
asyncio task runs the scheduler of :mod:`tokenwatt.sim.engine` in real time: it plans an
iteration, sleeps until the iteration's end and hands each request of the batch its token.

Iterations are laid end to end on the model's own timeline (each starts where the previous
one ended), so a late wake-up of the event loop delays delivery a little but does not slow
the simulated engine; only when the loop falls more than 50 ms behind does the model
re-anchor to the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tokenwatt.records import SIM_VERSION
from tokenwatt.sim.engine import Engine, Iteration, Profile, SimRequest
from tokenwatt.sim.suite import SuiteAnswers

DEFAULT_MAX_TOKENS = 16
RESYNC_MS = 50.0


class BadRequestError(Exception):
    """A request the simulated engine refuses with HTTP 400 (message says why)."""


@dataclass
class _Parsed:
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    text_tokens: list[str] | None
    chat: bool


def _count_text_tokens(text: str) -> int:
    """Rough token count of text (≈ 4 characters per token): the sim has no tokenizer."""
    return max(1, math.ceil(len(text) / 4))


class SimServer:
    """State of one simulated engine: the model, the scheduler task and the counters."""

    def __init__(
        self,
        profile: Profile,
        *,
        seed: int = 0,
        model: str = "tokenwatt-sim",
        answers: SuiteAnswers | None = None,
    ) -> None:
        self.profile = profile
        self.seed = seed
        self.model = model
        self.answers = answers
        self.engine = Engine(profile)
        self.queues: dict[SimRequest, asyncio.Queue[int]] = {}
        self.alive: dict[SimRequest, Callable[[], bool]] = {}
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.energy_j = 0.0
        self.power_w = profile.idle_power_w
        self._power_since = time.perf_counter()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- power -------------------------------------------------------------------------

    def _set_power(self, watts: float) -> None:
        now = time.perf_counter()
        self.energy_j += self.power_w * (now - self._power_since)
        self._power_since = now
        self.power_w = watts

    def energy_now_j(self) -> float:
        """Energy (J) since start: the power model integrated over time."""
        return self.energy_j + self.power_w * (time.perf_counter() - self._power_since)

    # -- scheduler ---------------------------------------------------------------------

    @staticmethod
    def _now_ms() -> float:
        return time.perf_counter() * 1000.0

    async def _run(self) -> None:
        model_ms: float | None = None
        while True:
            for req, alive in list(self.alive.items()):
                if not alive():
                    self._abort(req)
            if self.engine.idle:
                self._set_power(self.profile.idle_power_w)
                self._wake.clear()
                await self._wake.wait()
                model_ms = None
            now = self._now_ms()
            if model_ms is None or now - model_ms > RESYNC_MS:
                model_ms = now
            it = self.engine.begin(model_ms)
            if it is None:  # only waiting requests and none fits: wait for a change
                self._wake.clear()
                await self._wake.wait()
                model_ms = None
                continue
            self._set_power(self.profile.power_w(len(it.batch)))
            delay_s = (it.end_ms - self._now_ms()) / 1000.0
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            self._deliver(it)
            model_ms = it.end_ms

    def _deliver(self, it: Iteration) -> None:
        batch = [r for r in it.batch if not r.aborted]
        it.batch = batch
        self.engine.complete(it)
        self.generation_tokens_total += len(batch)
        for req in batch:
            queue = self.queues.get(req)
            if queue is not None:
                queue.put_nowait(req.generated)

    def _abort(self, req: SimRequest) -> None:
        """Free a request whose client went away and wake its handler with -1."""
        self.engine.abort(req)
        queue = self.queues.pop(req, None)
        if queue is not None:
            queue.put_nowait(-1)
        self.alive.pop(req, None)

    @staticmethod
    async def _next(queue: asyncio.Queue[int]) -> int:
        index = await queue.get()
        if index < 0:
            raise ConnectionResetError("the client went away")
        return index

    async def start(self) -> None:
        """Start the scheduler task (call inside the server's event loop)."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Cancel the scheduler task."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- requests ----------------------------------------------------------------------

    def _parse(self, body: Any, chat: bool) -> _Parsed:
        if not isinstance(body, dict):
            raise BadRequestError("the request body must be a JSON object")
        text: str | None = None
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise BadRequestError("'messages' must be a non-empty list")
            contents = [m.get("content") for m in messages if isinstance(m, dict)]
            if not contents or not all(isinstance(c, str) for c in contents):
                raise BadRequestError("every message needs a string 'content'")
            text = str(contents[-1])
            prompt_tokens = sum(_count_text_tokens(str(c)) for c in contents)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
                prompt = prompt[0]
            if isinstance(prompt, str):
                text = prompt
                prompt_tokens = _count_text_tokens(prompt)
            elif (
                isinstance(prompt, list)
                and prompt
                and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
            ):
                prompt_tokens = len(prompt)
            else:
                raise BadRequestError("'prompt' must be a string or a non-empty list of token ids")
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens", DEFAULT_MAX_TOKENS))
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise BadRequestError("'max_tokens' must be a positive integer")
        options = body.get("stream_options") or {}
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        text_tokens: list[str] | None = None
        if self.answers is not None and text is not None:
            seed = body.get("seed")
            answer = self.answers.answer(text, seed if isinstance(seed, int) else None)
            if answer is not None:
                text_tokens = re.findall(r"\s*\S+", answer)  # one "token" per word
                max_tokens = min(max_tokens, len(text_tokens))
        if not self.engine.fits_ever(prompt_tokens, max_tokens):
            raise BadRequestError(
                f"prompt ({prompt_tokens}) + max_tokens ({max_tokens}) exceeds the KV cache "
                f"({self.profile.kv_capacity_tokens} tokens)"
            )
        return _Parsed(
            prompt_tokens, max_tokens, bool(body.get("stream")), include_usage, text_tokens, chat
        )

    def _token_text(self, parsed: _Parsed, index: int) -> str:
        if parsed.text_tokens is not None:
            return parsed.text_tokens[index]
        return f" w{(self.seed * 7919 + index * 31 + parsed.prompt_tokens) % 1000}"

    def _submit(
        self, parsed: _Parsed, alive: Callable[[], bool]
    ) -> tuple[SimRequest, asyncio.Queue[int]]:
        req = SimRequest(parsed.prompt_tokens, parsed.max_tokens, self._now_ms())
        queue: asyncio.Queue[int] = asyncio.Queue()
        self.queues[req] = queue
        self.alive[req] = alive
        self.requests_total += 1
        self.prompt_tokens_total += parsed.prompt_tokens
        self.engine.add(req)
        self._wake.set()
        return req, queue

    def _release(self, req: SimRequest) -> None:
        if not req.done:
            self.engine.abort(req)
        self.queues.pop(req, None)
        self.alive.pop(req, None)

    async def handle(self, request: web.Request, chat: bool) -> web.StreamResponse:
        """Serve one completion request (streamed or not)."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the request body is not valid JSON")
        try:
            parsed = self._parse(body, chat)
        except BadRequestError as exc:
            return _error(400, str(exc))
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        base = {
            "id": rid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": created,
            "model": self.model,
        }

        def alive() -> bool:
            transport = request.transport
            return transport is not None and not transport.is_closing()

        finish = "stop" if parsed.text_tokens is not None else "length"
        usage = {
            "prompt_tokens": parsed.prompt_tokens,
            "completion_tokens": parsed.max_tokens,
            "total_tokens": parsed.prompt_tokens + parsed.max_tokens,
        }
        req, queue = self._submit(parsed, alive)
        if not parsed.stream:
            pieces: list[str] = []
            try:
                for _ in range(req.max_tokens):
                    pieces.append(self._token_text(parsed, await self._next(queue) - 1))
            except ConnectionError:
                return web.Response(status=499)
            finally:
                self._release(req)
            text = "".join(pieces)
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            obj = "chat.completion" if chat else "text_completion"
            return web.json_response({**base, "object": obj, "choices": [choice], "usage": usage})

        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await response.prepare(request)
            if chat:
                role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
                await _send(response, {**base, "choices": [{**role, "finish_reason": None}]})
            for _ in range(req.max_tokens):
                i = await self._next(queue)
                piece = self._token_text(parsed, i - 1)
                done = i == parsed.max_tokens
                c: dict[str, Any] = {"index": 0, "finish_reason": finish if done else None}
                if chat:
                    c["delta"] = {"content": piece}
                else:
                    c.update(text=piece, logprobs=None)
                await _send(response, {**base, "choices": [c]})
            if parsed.include_usage:
                await _send(response, {**base, "choices": [], "usage": usage})
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away; its KV blocks are freed below
        finally:
            self._release(req)
        return response


async def _send(response: web.StreamResponse, obj: dict[str, Any]) -> None:
    await response.write(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "BadRequestError", "code": status}},
        status=status,
    )


class _SimCollector(Collector):
    """Builds the ``/metrics`` families from the server's state at scrape time."""

    def __init__(self, sim: SimServer) -> None:
        self.sim = sim

    def collect(self) -> list[Metric]:
        sim, engine, p = self.sim, self.sim.engine, self.sim.profile
        labels = ["model_name", "engine"]
        values = [sim.model, "0"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric(values, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric(values, value)
            return c

        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=["block_size", "num_gpu_blocks", "cache_dtype", "engine"],
        )
        info.add_metric([str(p.block_size), str(p.num_gpu_blocks), p.kv_dtype, "0"], 1.0)
        return [
            gauge("vllm:num_requests_running", "Running requests", len(engine.running)),
            gauge("vllm:num_requests_waiting", "Waiting requests", engine.queued),
            gauge("vllm:kv_cache_usage_perc", "KV-cache usage (1 = 100%)", engine.kv_usage),
            counter("vllm:num_preemptions", "Preemptions (never, in the sim)", 0),
            counter("vllm:prompt_tokens", "Prefill tokens", sim.prompt_tokens_total),
            counter("vllm:generation_tokens", "Generated tokens", sim.generation_tokens_total),
            counter("vllm:request_success", "Finished requests", engine.finished),
            info,
            gauge("tokenwatt_sim_power_watts", "Simulated board power (W)", sim.power_w),
            counter("tokenwatt_sim_energy_joules", "Simulated energy (J)", sim.energy_now_j()),
        ]


def create_app(sim: SimServer) -> web.Application:
    """The aiohttp application serving ``sim``; the scheduler starts with the app."""
    app = web.Application()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SimCollector(sim))

    async def completions(request: web.Request) -> web.StreamResponse:
        return await sim.handle(request, chat=False)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await sim.handle(request, chat=True)

    async def models(request: web.Request) -> web.Response:
        entry = {
            "id": sim.model,
            "object": "model",
            "created": 0,
            "owned_by": "tokenwatt-sim",
            "max_model_len": sim.profile.kv_capacity_tokens,
        }
        return web.json_response({"object": "list", "data": [entry]})

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": SIM_VERSION, "profile": sim.profile.name})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain")

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/version", version)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)

    async def on_startup(app: web.Application) -> None:
        await sim.start()

    async def on_cleanup(app: web.Application) -> None:
        await sim.stop()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


async def start_server(sim: SimServer, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving ``sim`` on ``host:port`` (0 picks a free port).

    Returns:
        The runner (``await runner.cleanup()`` stops it) and the port actually bound.

    Raises:
        OSError: the address cannot be bound.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()  # not leaked when the address is in use or unknown
        raise
    runner = web.AppRunner(create_app(sim), access_log=None)
    await runner.setup()
    site = web.SockSite(runner, sock)
    await site.start()
    return runner, int(sock.getsockname()[1])
