"""What the load generator's tests over real HTTP share: the config and request helpers,
and an instant streaming server's script (:data:`INSTANT_SERVER`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from aiohttp import web
from streaming_server import ScriptedServer, stream

from tokenwatt.collect.load.loadgen import LoadConfig, WindowResult, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.spec import SloSpec

SLO = SloSpec(ttft_p99_ms=2000, tpot_p99_ms=1000)


def config(base: str, **kw: object) -> LoadConfig:
    settings: dict[str, object] = {"max_concurrency": 16, "request_timeout_s": 5.0}
    settings.update(kw)
    return LoadConfig(endpoint=base, model="tiny", slo=SLO, **settings)  # type: ignore[arg-type]


def same(prompt: list[int] | str = [11, 12, 13], max_tokens: int = 4) -> Iterator[RequestSpec]:  # noqa: B006
    return itertools.repeat(RequestSpec(prompt=prompt, max_tokens=max_tokens))


async def one_window(
    cfg: LoadConfig, *, rate: float = 40.0, duration: float = 0.25
) -> WindowResult:
    return await run_window(
        cfg, WindowPlan(rate_rps=rate, duration_s=duration, warmup_s=0.0, seed=3), same()
    )


def script(server: ScriptedServer, pieces: list[bytes]) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, pieces)

    server.handler = handler


INSTANT_SERVER = """
import sys
from aiohttp import web
BODY = (b'data: {"choices":[{"text":" a"}]}\\n\\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\\n\\n'
        b"data: [DONE]\\n\\n")
async def handle(request):
    await request.read()
    return web.Response(body=BODY, content_type="text/event-stream")
app = web.Application()
app.router.add_post("/v1/completions", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""
