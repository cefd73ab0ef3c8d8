"""What the load generator's tests over real HTTP share: the config and request helpers,
and an instant streaming server's script (:data:`INSTANT_SERVER`)."""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from streaming_server import ScriptedServer, stream

from tokenwatt.collect.load.loadgen import LoadConfig, WindowResult, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.spec.spec import SloSpec

BOTH_LOOPS = pytest.mark.asyncio(loop_factories=["asyncio", "uvloop"])
"""Runs an async test on asyncio's own loop and on uvloop (the load's default), as
``conftest.pytest_asyncio_loop_factories`` provides them."""

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


INSTANT_SERVER = (
    Path(__file__).resolve().parents[3] / "benchmarks" / "instant_server.py"
).read_text()
"""The instant streaming server's script (``benchmarks/instant_server.py``), for ``python -c``."""


def serve_script(script: str) -> tuple[subprocess.Popen[bytes], str]:
    """Run a server ``script`` (``python -c script PORT``) on a free port of 127.0.0.1: the
    process and its ``/v1`` base URL, once it listens (RuntimeError after 20 s)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-c", script, str(port)])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/v1"
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the server did not start")
