"""Are the actual sends Poisson? K-S p-values of wire arrivals, and what precise sends cost.

An instant streaming server (aiohttp, one token, its own process so that it does not share
the client's event loop) answers every POST. For each rate the load generator sends a
bounded number of requests (``--count``) once per way of waiting for the send time
(``--timers``, :mod:`tokenwatt.collect.load.sends`): the loop's own ``timerfd`` (the
default), the process's one timer thread (``thread``), each request yielding for its last
1.5 ms and spinning its last 0.3 ms (``spin``, the design before them), and a plain
``asyncio.sleep`` (``plain``, millisecond-bunched). Printed per run:
the K-S p-value of the gaps of the schedule (the control), of ``dispatched_s`` and of
``sent_s`` against the exponential of the target mean; send lag p50/p99; and the client's
CPU time per second of window (``time.process_time``), whose differences are the costs of
the waits; and how close two sends can go (``close µs``: the median gap between the sends of
the pairs the schedule put under 20 µs apart). One process sends one request at a time, so no
two of its sends are closer than one send's write (the socket's ``send`` and aiohttp's work
round it); the K-S test sees the schedule's shortest gaps missing once there are enough of them
(its ``p`` falls with ``--count`` at a fixed rate).

With ``--workers 1,2`` (the default) each rate is also sent by a pool of worker processes
(:class:`tokenwatt.collect.load.pool.workers.WorkerPool`: one schedule, round-robin by arrival, each
worker its own event loop), precise sends only; the K-S test is of the union of their sends.

Usage: python benchmarks/wire_arrivals.py [--rates 200,500,1000] [--count 2000]
    [--workers 1,2] [--timers timerfd,thread,spin,plain]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tokenwatt.collect.load.loadgen import LoadConfig, WindowResult, run_window  # noqa: E402
from tokenwatt.collect.load.pool.workers import WorkerPool  # noqa: E402
from tokenwatt.collect.load.sends import SendTimerKind  # noqa: E402
from tokenwatt.collect.load.window_plan import WindowPlan  # noqa: E402
from tokenwatt.collect.workload.workload import RequestSpec  # noqa: E402
from tokenwatt.records.spec.spec import SloSpec  # noqa: E402

SERVER = (Path(__file__).resolve().parent / "instant_server.py").read_text()
"""The instant server's script (``benchmarks/instant_server.py``), run with ``python -c``."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("the instant server did not start")


def _config(endpoint: str) -> LoadConfig:
    return LoadConfig(
        endpoint=endpoint,
        model="m",
        slo=SloSpec(ttft_p99_ms=10_000, tpot_p99_ms=10_000),
        max_concurrency=256,
        request_timeout_s=30.0,
    )


SPEC = RequestSpec(prompt=[1, 2], max_tokens=1)


async def _one(endpoint: str, rate: float, count: int, timer: SendTimerKind) -> str:
    cpu0 = time.process_time()
    result = await run_window(
        _config(endpoint),
        WindowPlan(
            rate_rps=rate,
            duration_s=count / rate,
            warmup_s=0.0,
            seed=7,
            keep_load=False,
            send_timer=timer,
        ),
        itertools.repeat(SPEC),
    )
    cpu_per_s = (time.process_time() - cpu0) / (count / rate)
    return _line(result, rate, timer, "1", cpu_per_s)


def _pooled(pool: WorkerPool, endpoint: str, rate: float, count: int) -> str:
    result = pool.run_window(
        _config(endpoint),
        WindowPlan(rate_rps=rate, duration_s=count / rate, warmup_s=0.0, seed=7, keep_load=False),
        itertools.repeat(SPEC),
    )
    return _line(result, rate, "timerfd", str(pool.workers), float("nan"))


def _line(result: WindowResult, rate: float, timer: str, workers: str, cpu_per_s: float) -> str:
    exponential = stats.expon(scale=1 / rate).cdf
    reqs = result.requests
    p = {
        # Sorted: the wire's order (two workers' sends may swap places).
        name: stats.kstest(np.diff(np.sort([getattr(r, name) for r in reqs])), exponential).pvalue
        for name in ("scheduled_s", "dispatched_s", "sent_s")
    }
    lag = np.array([r.sent_s - r.scheduled_s for r in reqs]) * 1e3
    errors = sum(r.error is not None for r in reqs)
    pairs = sorted((r.scheduled_s, r.sent_s) for r in reqs)
    close = [abs(b[1] - a[1]) for a, b in itertools.pairwise(pairs) if b[0] - a[0] < 20e-6]
    close_us = f"{np.median(close) * 1e6:8.1f}" if close else "     n/a"
    return (
        f"{rate:6.0f} {workers:>7} {timer:>6} {len(reqs):6d} {p['scheduled_s']:9.3g} "
        f"{p['dispatched_s']:11.3g} {p['sent_s']:9.3g} {np.percentile(lag, 50):8.3f} "
        f"{np.percentile(lag, 99):8.3f} {cpu_per_s:9.3f} {errors:6d} {close_us}"
    )


def main() -> None:
    """Start the instant server, run every rate with and without precise sends, print."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rates", default="200,500,1000")
    ap.add_argument("--count", type=int, default=2000, help="requests per run")
    ap.add_argument("--workers", default="1,2", help="pool sizes to run (1: one process)")
    ap.add_argument(
        "--timers", default="timerfd,thread,spin,plain", help="ways of waiting, one process"
    )
    a = ap.parse_args()
    sizes = [int(x) for x in a.workers.split(",")]
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    with contextlib.ExitStack() as stack:
        stack.callback(server.wait, timeout=10)
        stack.callback(server.terminate)
        _wait_listening(port)
        endpoint = f"http://127.0.0.1:{port}/v1"
        pools = {n: stack.enter_context(WorkerPool(n)) for n in sizes if n > 1}
        print(
            "  rate workers  timer  sends  KS sched  KS dispatch   KS sent  lag p50  lag p99"
            "  cpu s/s  errors  close µs"
        )
        for rate in (float(x) for x in a.rates.split(",")):
            for n in sizes:
                if n > 1:
                    print(_pooled(pools[n], endpoint, rate, a.count), flush=True)
                    continue
                for timer in a.timers.split(","):
                    print(asyncio.run(_one(endpoint, rate, a.count, timer)), flush=True)


if __name__ == "__main__":
    main()
