"""How fast can the load generator drive an instant streaming server? (prints figures)

Setup (issues 3 and 13): Debian's nginx answers every POST with a prebuilt SSE body --
``--chunks`` token chunks (32 and 256 by default), a usage chunk and ``[DONE]``, shaped
like vLLM's -- from one worker pinned to one core (``benchmarks/sse_stub.py``); the client
under test is pinned to another core. For each stream length and client it walks up Poisson
rates (offered chunk rates ``--chunk-rates`` divided by the stream length) until two in a row
miss, and reports the highest rate it *holds*: every request answered, request throughput
within 1% of the schedule's rate (the span of the schedule over the span from the start to
the last completion, as vLLM ``bench serve`` computes its request throughput) and, for ours,
which records its send times, the actual sends' gaps passing a Kolmogorov-Smirnov test
against the target exponential (p > 0.01, as ``benchmarks/wire_arrivals.py`` tests them).

Side by side, per stream length: ours in one process and with ``--workers`` worker processes
(one schedule; every worker shares the client core, so 2 workers show what the split costs
or gains on one core; ``--timer``: how its sends wait for their times, timerfd by default),
vLLM's own ``vllm bench serve`` (when a vLLM install is found: ``TOKENWATT_VLLM_PYTHON`` or
``~/.cache/tokenwatt/vllm-venv/bin/python``) and NVIDIA's AIPerf (``TOKENWATT_AIPERF`` or
``~/.cache/tokenwatt/aiperf-venv/bin/aiperf``); the peers' K-S is n/a, they do not record
send times (``benchmarks/peers.py``). Per trial: chunks per second on the client core, and
client CPU time per streamed chunk (``time.process_time`` plus the workers' CPU from /proc,
which other jobs on the machine disturb far less than wall-clock rates). Ours: CPU over the
measured window only, per chunk arrived in it (start-up, imports and the window's summary
left out); vLLM: CPU from its "Starting main benchmark run" to its result (so its own
metrics computation is in it) per chunk completed; AIPerf: its whole process tree's CPU from
its profiling phase's start to its results (start-up and exports left out), per chunk.
Ours, in one process, also: its waits per request sent in the window (``waits/req``: the
event loop thread's voluntary context switches, each a sleep or a wait of the loop that
blocked; a wait costs 15-22 µs of CPU on this VM, ``benchmarks/wait_cost.py``).

``--compare`` instead runs, per ``CHUNKS:RATE`` of ``--points``, ours (as it ships; on
asyncio's own loop; and ``--timer spin``, the previous design), bench serve and AIPerf at
that fixed rate, interleaved for ``--rounds`` rounds, and prints one table (medians over
rounds: CPU per chunk, held ratio, errors; ours' lowest K-S p and send-lag p99) with the
verdicts "ours' CPU per chunk at most half of bench serve's" and "K-S p > 0.01"; then,
unless ``--no-walk``, per stream length, bench serve's walk over ``--chunk-rates`` and ours
``--rounds`` times at twice the highest rate it held (each on a settled machine), for
"send-lag p99 under 5 ms" (the median of those trials; ``benchmarks/loadgen_compare.py``).

``--compare-http`` first measures httpx against aiohttp in a closed loop (the choice of HTTP
client); ``--event-loop asyncio`` runs ours on asyncio's own loop (uvloop by default).
``--floor`` instead measures the client CPU per request of ours beside clients that only
read each response (bare aiohttp, on asyncio and on uvloop, and a bare asyncio Protocol with
httptools' parser), the same seeded Poisson schedule each, alternating, at
``--floor-rates``: how much of ours is the HTTP library's (``benchmarks/loadgen_floor.py``).
About 5 minutes with the defaults, most of it the peers' start-up (about 20 s per trial for
vLLM, 5 s for AIPerf).

Usage: python benchmarks/loadgen.py [--chunks 32,256] [--chunk-rates 16000,...]
    [--workers 1,2] [--seconds 3] [--timer timerfd|thread|spin|plain]
    [--event-loop uvloop|asyncio]
    [--skip-vllm] [--skip-aiperf] [--compare-http]
    [--floor [--floor-rates 300,1000] [--rounds 2]]
    [--compare [--points 32:800,256:600] [--rounds 2] [--no-walk]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the modules beside this script

from loadgen_compare import run_compare
from loadgen_floor import _closed_loop, compare_http, floor_child, run_floor
from loadgen_trials import ROOT, Best, run_ours, trial_ours, walk
from peers import prepare_peers, run_aiperf, run_vllm
from sse_stub import CHUNKS, sse_body, start_nginx

DEFAULT_CHUNK_RATES = [16_000, 32_000, 48_000, 64_000, 80_000, 96_000, 112_000]
TIMERS = ("timerfd", "thread", "spin", "plain")
LOOPS = ("uvloop", "asyncio")

# ---------------------------------------------------------------------- SSE decoder ---


def sse_throughput(repeats: int = 2000) -> None:
    """Decode the benchmark body whole, in 1 KB reads and with CRLF; and a 1 MB event."""
    sys.path.insert(0, str(ROOT))
    from tokenwatt.collect.load.sse import SseDecoder

    body = sse_body().encode()
    cases = {
        "one read": [body],
        "1 KB reads": [body[i : i + 1024] for i in range(0, len(body), 1024)],
        "CRLF, one read": [body.replace(b"\n", b"\r\n")],
    }
    for name, pieces in cases.items():
        start, events = time.process_time(), 0
        for _ in range(repeats):
            decoder = SseDecoder()
            for piece in pieces:
                events += len(decoder.feed_data(piece))
        spent = time.process_time() - start
        print(f"  {name:15s} {spent / events * 1e6:5.2f} µs/event ({events / spent:,.0f} events/s)")
    big = b"data: " + b"x" * 1_000_000 + b"\n\n"
    start = time.process_time()
    decoder = SseDecoder()
    got = [d for i in range(0, len(big), 1024) for d in decoder.feed_data(big[i : i + 1024])]
    assert len(got) == 1 and len(got[0]) == 1_000_000
    print(f"  1 MB event in 1 KB reads: {(time.process_time() - start) * 1e3:.1f} ms")


# --------------------------------------------------------------------------- main ---


def table(chunks: int, results: dict[str, Best]) -> None:
    """The side-by-side rows of one stream length."""
    print(f"\n{chunks}-chunk streams: highest Poisson rate held (1%, no errors, K-S p > 0.01 for "
          "ours), chunks/s on the client core, client CPU per chunk at that rate")  # fmt: skip
    for name, best in results.items():
        if best is None:
            print(f"  {name:12s} none held")
            continue
        rate, f = best
        print(f"  {name:12s} {rate:7.1f} req/s  {f['chunks_per_s']:8.0f} chunks/s  "
              f"{f['cpu_us_per_chunk']:5.2f} µs/chunk")  # fmt: skip


def parser() -> argparse.ArgumentParser:
    """The command line of this script (its module docstring says what each mode does)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--chunks", default="32,256", help="stream lengths (token chunks)")
    ap.add_argument(
        "--chunk-rates",
        default=",".join(str(r) for r in DEFAULT_CHUNK_RATES),
        help="offered chunk rates (chunks/s); each stream length walks rate = this / chunks",
    )
    ap.add_argument("--workers", default="1,2", help="worker counts of ours (1: one process)")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured window per trial (s)")
    ap.add_argument("--client-core", type=int, default=0)
    ap.add_argument("--server-core", type=int, default=1)
    ap.add_argument("--event-loop", choices=LOOPS, default="uvloop", help="ours' event loop")
    ap.add_argument("--timer", choices=TIMERS, default="timerfd", help="ours' send wait")
    ap.add_argument("--compare-http", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--skip-aiperf", action="store_true")
    ap.add_argument("--floor", action="store_true", help="per-request CPU beside bare clients")
    ap.add_argument("--floor-rates", default="300,1000", help="request rates of --floor (req/s)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of --floor and --compare")
    ap.add_argument("--compare", action="store_true", help="clients side by side, verdicts")
    ap.add_argument("--points", default="32:800,256:600", help="--compare's CHUNKS:RATE pairs")
    ap.add_argument("--no-walk", action="store_true", help="--compare without the 2x-rate part")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--floor-child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--http-child", nargs=2, metavar=("CLIENT", "URL"), help=argparse.SUPPRESS)
    return ap


def child(args: argparse.Namespace) -> None:
    """The child processes' side: one trial's figures on stdout."""
    if args.child:
        url, rate, seconds, chunks, workers = args.child
        figures = trial_ours(url, float(rate), float(seconds), int(chunks), int(workers),
                             args.event_loop, args.timer)  # fmt: skip
        print(json.dumps(figures))
    elif args.floor_child:
        client, url, chunks, rate, seconds = args.floor_child
        if client.startswith("ours"):
            figures = trial_ours(url, float(rate), float(seconds), int(chunks), 1,
                                 args.event_loop, args.timer)  # fmt: skip
            print(float(figures["cpu_us_per_chunk"]) * int(chunks))
        else:
            print(floor_child(client, url, int(chunks), float(rate), float(seconds)))
    else:
        print(asyncio.run(_closed_loop(*args.http_child)))


def main() -> None:
    """Run the mode the options ask for (a child trial, --floor, --compare or the walk)."""
    args = parser().parse_args()
    if args.child or args.floor_child or args.http_child:
        child(args)
        return
    chunk_rates = [float(r) for r in args.chunk_rates.split(",")]
    with tempfile.TemporaryDirectory(prefix="tw-loadgen-") as tmp:
        folder = Path(tmp)
        if args.floor:
            print(f"load average {os.getloadavg()[0]:.2f} (other jobs disturb every figure)")
            run_floor(args, folder)
            return
        peers = prepare_peers(folder, not args.skip_vllm, not args.skip_aiperf)
        print(f"instant server: nginx on core {args.server_core}; clients on core "
              f"{args.client_core}; {args.seconds:g} s per trial; load average "
              f"{os.getloadavg()[0]:.2f} (other jobs disturb every figure)")  # fmt: skip
        if args.compare:
            run_compare(args, folder, *peers)
            return
        print("SSE decoder (this process, unpinned):")
        sse_throughput()
        for chunks in (int(c) for c in args.chunks.split(",")):
            run_length(args, folder, peers, chunks, [r / chunks for r in chunk_rates])


def run_length(
    args: argparse.Namespace, folder: Path, peers: tuple[str | None, str | None], chunks: int,
    rates: list[float],
) -> None:  # fmt: skip
    """Every client against one nginx stub serving ``chunks``-chunk streams."""
    nginx, url = start_nginx(folder, args.server_core, chunks)
    results: dict[str, Best] = {}
    python, aiperf = peers
    core, seconds = args.client_core, args.seconds
    try:
        print(f"\n{chunks}-chunk stream, {len(sse_body(chunks))} bytes")
        if args.compare_http and chunks == CHUNKS:
            print("HTTP clients:")
            compare_http(url, core)
        start = 0
        for workers in (int(w) for w in args.workers.split(",")):
            name = f"ours x{workers}" + (" asyncio" if args.event_loop == "asyncio" else "")
            results[name] = best = walk(
                name,
                lambda r, w=workers: run_ours(
                    url, r, seconds, chunks, w, core, args.event_loop, args.timer
                ),
                rates[start:],
            )
            # More workers hold at least what fewer held: start their walk one step lower.
            if best is not None:
                start = max(rates.index(best[0]) - 1, 0)
        if python is not None:
            results["vllm"] = walk(
                "vllm", lambda r: run_vllm(python, folder, url, r, seconds, chunks, core), rates
            )
        if aiperf is not None:
            results["aiperf"] = walk(
                "aiperf", lambda r: run_aiperf(aiperf, folder, url, r, seconds, chunks, core), rates
            )
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
    table(chunks, results)


if __name__ == "__main__":
    main()
