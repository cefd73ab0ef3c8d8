"""The HTTP-client parts of the load-generator benchmark (``benchmarks/loadgen.py``):
``--compare-http`` (httpx against aiohttp in a closed loop, the choice of HTTP client) and
``--floor`` (the client CPU per request of ours beside clients that only read each response:
bare aiohttp, on asyncio and on uvloop, and a bare asyncio Protocol with httptools' parser,
the same seeded Poisson schedule each, alternating: how much of ours is the HTTP library's).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from loadgen_trials import LOADGEN
from sse_stub import CHUNKS, start_nginx

# -------------------------------------------------------------------- http clients ---


def compare_http(url: str, core: int) -> None:
    """Closed loop, 64 streams, 3,000 requests: httpx against aiohttp, pinned to ``core``."""
    for client in ("httpx", "aiohttp"):
        cmd = [
            "taskset",
            "-c",
            str(core),
            sys.executable,
            str(LOADGEN),
            "--http-child",
            client,
            url,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print(f"  {client:8s} {out.stdout.strip() or out.stderr[-500:]}")


async def _closed_loop(client: str, url: str, total: int = 3000, streams: int = 64) -> str:
    body = json.dumps({"model": "bench", "prompt": [1, 2, 3], "max_tokens": CHUNKS,
                       "stream": True}).encode()  # fmt: skip
    headers = {"Content-Type": "application/json"}
    left = total

    if client == "httpx":
        import httpx

        limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
        async with httpx.AsyncClient(limits=limits, timeout=None) as hx:

            async def worker_httpx() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    async with hx.stream("POST", url + "/v1/completions", content=body,
                                         headers=headers) as r:  # fmt: skip
                        async for _ in r.aiter_raw():
                            pass

            t, c = time.perf_counter(), time.process_time()
            await asyncio.gather(*(worker_httpx() for _ in range(streams)))
    else:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=streams)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def worker_aiohttp() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    async with session.post(url + "/v1/completions", data=body,
                                            headers=headers) as r:  # fmt: skip
                        async for _ in r.content.iter_any():
                            pass

            t, c = time.perf_counter(), time.process_time()
            await asyncio.gather(*(worker_aiohttp() for _ in range(streams)))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return f"{total / wall:8.0f} req/s closed loop, {cpu / total * 1e6:6.0f} µs CPU per request"


# ------------------------------------------------------ per-request floor (--floor) ---

FLOOR_CLIENTS = ("ours", "aiohttp", "aiohttp+uvloop", "httptools")
"""``--floor``: ours (precise sends, the whole hot path, on ``--event-loop``: uvloop by
default, asyncio's own loop before this project ran on uvloop), then clients that do nothing but
read each response: bare aiohttp (the library under ours), the same on uvloop, and a bare
``asyncio.Protocol`` with ``httptools``' parser (what a project-owned HTTP/1.1 client would
cost; benchmark only)."""


async def _bare_open_loop(client: str, url: str, chunks: int, rate: float, seconds: float) -> float:
    """CPU seconds per request of a do-nothing client sending a seeded Poisson schedule."""
    import numpy as np

    body = json.dumps({"model": "bench", "prompt": [1, 2, 3], "max_tokens": chunks,
                       "stream": True}).encode()  # fmt: skip
    target = url + "/v1/completions"
    one: Any
    if client.startswith("aiohttp"):
        import aiohttp

        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=4096, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )

        async def one() -> None:
            async with session.post(target, data=body,
                                    headers={"Content-Type": "application/json"}) as r:  # fmt: skip
                async for _ in r.content.iter_any():
                    pass
    else:
        one, session = _httptools_client(target, body), None
    await asyncio.gather(*(one() for _ in range(50)))  # connections open, code warm
    offsets = np.cumsum(np.random.default_rng(1).exponential(1 / rate, round(rate * seconds)))
    start, cpu0, tasks = time.perf_counter(), time.process_time(), []
    for offset in offsets.tolist():
        delay = start + offset - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    spent = time.process_time() - cpu0
    if session is not None:
        await session.close()
    return spent / len(offsets)


def _httptools_client(target: str, body: bytes) -> Any:
    """A keep-alive HTTP/1.1 client on an asyncio Protocol and httptools' parser that keeps
    each read's time and bytes (what ours keeps), for ``--floor`` only."""
    from urllib.parse import urlsplit

    import httptools

    url = urlsplit(target)
    head = f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    request = head.encode() + body
    host, port = url.hostname or "127.0.0.1", url.port or 80
    idle: list[Any] = []

    class Connection(asyncio.Protocol):
        def __init__(self) -> None:
            self.parser = httptools.HttpResponseParser(self)
            self.done: asyncio.Future[None] | None = None
            self.reads: list[tuple[float, bytes]] = []
            self.now = 0.0

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.now = time.perf_counter()
            self.parser.feed_data(data)

        def on_body(self, piece: bytes) -> None:
            self.reads.append((self.now, piece))

        def on_message_complete(self) -> None:
            done, self.done = self.done, None
            idle.append(self)
            if done is not None:
                done.set_result(None)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.done is not None and not self.done.done():
                self.done.set_exception(ConnectionError("lost"))

    async def one() -> None:
        loop = asyncio.get_running_loop()
        if idle:
            conn = idle.pop()
        else:
            _, conn = await loop.create_connection(Connection, host, port)
        conn.done, conn.reads = loop.create_future(), []
        conn.transport.write(request)
        await conn.done

    return one


def floor_child(client: str, url: str, chunks: int, rate: float, seconds: float) -> float:
    """CPU µs per request of one bare ``--floor`` client (a child process pinned to a core;
    ``loadgen.py --floor-child ours`` runs ours)."""
    if client.endswith("uvloop"):
        import uvloop

        return float(uvloop.run(_bare_open_loop(client, url, chunks, rate, seconds))) * 1e6
    return asyncio.run(_bare_open_loop(client, url, chunks, rate, seconds)) * 1e6


def run_floor(args: argparse.Namespace, folder: Path) -> None:
    """Every ``--floor`` client at every rate, alternating, ``--rounds`` times."""
    rates = [float(r) for r in args.floor_rates.split(",")]
    clients = [c for c in FLOOR_CLIENTS if c != "httptools" or importlib.util.find_spec(c)]
    if len(clients) < len(FLOOR_CLIENTS):  # no project dependency needs it
        print("httptools client: skipped (not installed: pip install httptools)")
    for chunks in (int(c) for c in args.chunks.split(",")):
        nginx, url = start_nginx(folder, args.server_core, chunks)
        try:
            print(f"\n{chunks}-chunk streams: client CPU per request (µs), per chunk in ()")
            for rate in rates:
                got: dict[str, list[float]] = {c: [] for c in clients}
                for _ in range(args.rounds):
                    for client in clients:
                        cmd = ["taskset", "-c", str(args.client_core), sys.executable, str(LOADGEN),
                               "--floor-child", client, url, str(chunks), str(rate),
                               str(args.seconds), "--timer", args.timer,
                               "--event-loop", args.event_loop]  # fmt: skip
                        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                        if out.returncode == 0:
                            got[client].append(float(out.stdout.strip().splitlines()[-1]))
                        else:  # the cell says n/a; this says why
                            why = (out.stderr.strip().splitlines() or ["no output"])[-1]
                            print(f"  {client} at {rate:g} req/s failed: {why}")
                cells = [
                    f"{c} {np.median(v):5.0f} ({np.median(v) / chunks:4.1f})" if v else f"{c} n/a"
                    for c, v in got.items()
                ]
                print(f"  {rate:6.0f} req/s: " + "; ".join(cells), flush=True)
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
