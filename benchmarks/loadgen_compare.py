"""``--compare`` of ``benchmarks/loadgen.py``: the clients side by side at fixed rates, and
ours at twice the highest rate ``vllm bench serve`` holds.

For each ``CHUNKS:RATE`` of ``--points`` one nginx stub serves ``CHUNKS``-chunk streams and
every client runs at ``RATE`` req/s for ``--seconds``, interleaved for ``--rounds`` rounds
(the order turned by one each round): ours as it ships (``--timer timerfd`` on uvloop), ours
on asyncio's own loop (``ours asyncio``: what uvloop buys), ours with ``--timer spin`` on
asyncio (the previous design: every request spins its last 1.5 ms), vLLM's
``bench serve`` and AIPerf (``benchmarks/peers.py``: which CPU each counts). One table then
gives, per point and client, the median over rounds of client CPU per chunk, held ratio
(request throughput over the rate) and errors, and for ours the lowest K-S p of the sent gaps
and the median send-lag p99; and per point two verdicts: ours' (timerfd) CPU per chunk at
most half of bench serve's (the median of each round's ratio of the two, which the machine's
drift between runs moves far less than the ratio of the two medians: the part of it that
moves both clients alike largely cancels out of each round's ratio), and its K-S p above 0.01
in every round.

Then, unless ``--no-walk``, per stream length of ``--points``: bench serve walks
``--chunk-rates`` / length, and ours (timerfd) runs ``--rounds`` times at twice the highest
rate it held, each after the machine settled, for the verdict send-lag p99 under 5 ms there
(the median of the trials').
"""

from __future__ import annotations

import argparse
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from loadgen_trials import run_ours, trial_line, walk
from peers import run_aiperf, run_vllm
from sse_stub import start_nginx

Figures = dict[str, Any]
Trial = Callable[[float], Figures]


def parse_points(text: str) -> list[tuple[int, float]]:
    """``"32:800,256:600"`` as [(32, 800.0), (256, 600.0)]."""
    pairs = (point.split(":") for point in text.split(","))
    return [(int(chunks), float(rate)) for chunks, rate in pairs]


def trials(
    args: argparse.Namespace, folder: Path, peers: tuple[str | None, str | None], url: str,
    chunks: int,
) -> dict[str, Trial]:  # fmt: skip
    """Every compared client's trial at a rate, against the stub at ``url``."""
    python, aiperf = peers
    core, seconds = args.client_core, args.seconds

    def ours(timer: str, loop: str = "uvloop") -> Trial:
        return lambda r: run_ours(url, r, seconds, chunks, 1, core, loop, timer)

    got = {
        "ours timerfd": ours("timerfd"),
        "ours asyncio": ours("timerfd", "asyncio"),
        "ours spin": ours("spin", "asyncio"),
    }
    if python is not None:
        got["vllm"] = lambda r: run_vllm(python, folder, url, r, seconds, chunks, core)
    if aiperf is not None:
        got["aiperf"] = lambda r: run_aiperf(aiperf, folder, url, r, seconds, chunks, core)
    return got


def compare_point(
    args: argparse.Namespace, folder: Path, peers: tuple[str | None, str | None], chunks: int,
    rate: float,
) -> dict[str, list[Figures]]:  # fmt: skip
    """``--rounds`` interleaved rounds of every client at ``rate`` on ``chunks``-chunk
    streams; each client's figures, one per round it finished."""
    nginx, url = start_nginx(folder, args.server_core, chunks)
    try:
        clients = trials(args, folder, peers, url, chunks)
        names = list(clients)
        got: dict[str, list[Figures]] = {name: [] for name in names}
        print(f"\n{chunks}-chunk streams at {rate:g} req/s, {args.seconds:g} s per trial")
        for round_ in range(args.rounds):
            turn = round_ % len(names)
            for name in names[turn:] + names[:turn]:
                settle()
                try:
                    figures = clients[name](rate)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    tail = (str(exc).strip().splitlines() or ["?"])[-1]
                    print(f"  {name:12s} failed: {tail[-200:]}", flush=True)
                    continue
                got[name].append({**figures, "round": round_})
                print(trial_line(name, rate, figures), flush=True)
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
    return got


def _cpu_times() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)  # idle + iowait, all


def settle(idle: float = 0.9, limit_s: float = 15.0) -> None:
    """Wait until the machine's cores were at least ``idle`` idle over half a second (the last
    trial's processes gone: AIPerf's and vLLM's wind down after their result), at most
    ``limit_s``; says so when they never were."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        idle0, all0 = _cpu_times()
        time.sleep(0.5)
        idle1, all1 = _cpu_times()
        if (idle1 - idle0) >= idle * max(all1 - all0, 1):
            return
    print(f"  (the machine stayed busier than {1 - idle:.0%} for {limit_s:g} s: figures disturbed)")


def median(runs: list[Figures], key: str) -> float | None:
    """The median of ``key`` over the rounds that have it, or None when none has."""
    values = [f[key] for f in runs if f.get(key) is not None]
    return float(np.median(values)) if values else None


def cell(value: float | None, spec: str) -> str:
    """``value`` formatted with ``spec`` (a format spec with a width), or "n/a" in that width."""
    width = int(spec.split(".")[0] or 0)
    return "n/a".rjust(width) if value is None else format(value, spec)


def print_table(results: dict[tuple[int, float], dict[str, list[Figures]]], rounds: int) -> None:
    """The one table of ``--compare``, then a verdict line per point."""
    print(f"\nMedian of {rounds} round(s): client CPU per chunk, held ratio (request "
          "throughput / rate), errors; ours: lowest K-S p, median send-lag p99")  # fmt: skip
    print(f"  {'chunks':>6s} {'req/s':>6s}  {'client':12s} {'CPU µs/chunk':>12s} "
          f"{'held ratio':>10s} {'errors':>6s} {'K-S p min':>9s} {'lag p99 ms':>10s} "
          "held")  # fmt: skip
    for (chunks, rate), got in results.items():
        for name, runs in got.items():
            ks = [f["ks_p"] for f in runs if f["ks_p"] is not None]
            print(f"  {chunks:6d} {rate:6g}  {name:12s} "
                  f"{cell(median(runs, 'cpu_us_per_chunk'), '12.2f')} "
                  f"{cell(median(runs, 'held_ratio'), '10.3f')} "
                  f"{cell(median(runs, 'errors'), '6.0f')} {cell(min(ks, default=None), '9.3f')} "
                  f"{cell(median(runs, 'send_lag_p99_ms'), '10.2f')} "
                  f"{sum(f['held'] for f in runs)}/{len(runs)}")  # fmt: skip
    for (chunks, rate), got in results.items():
        if got.get("aiperf"):
            print(f"  {chunks}:{rate:g} {aiperf_note(got['aiperf'])}")
    print()
    for (chunks, rate), got in results.items():
        print(f"  {chunks}:{rate:g}  {verdicts(got)}")


def aiperf_note(runs: list[Figures]) -> str:
    """What AIPerf records beside the table's figures (``benchmarks/peers.py``)."""
    ks = [f["start_ks_p"] for f in runs if f.get("start_ks_p") is not None]
    return (f"AIPerf: whole run's CPU (start-up, exports) "
            f"{cell(median(runs, 'cpu_whole_run_us_per_chunk'), '.1f')} µs/chunk; its "
            f"requests' starts: K-S p min {cell(min(ks, default=None), '.3f')}, credit-to-start "
            f"p99 {cell(median(runs, 'credit_to_start_p99_ms'), '.2f')} ms")  # fmt: skip


def paired_ratios(got: dict[str, list[Figures]], name: str) -> list[float]:
    """``name``'s CPU per chunk over bench serve's, round by round (the rounds both finished):
    the two ran within one round, seconds to a minute apart, so the part of the machine's
    drift between runs that moves both alike (it moved bench serve's figure by a third and
    ours by a fifth between runs on this VM) largely cancels out of each ratio."""
    serve = {f["round"]: f["cpu_us_per_chunk"] for f in got.get("vllm", [])}
    return [f["cpu_us_per_chunk"] / serve[f["round"]] for f in got[name] if f["round"] in serve]


def verdicts(got: dict[str, list[Figures]]) -> str:
    """One point's verdicts: ours' (timerfd) CPU per chunk at most half of bench serve's (the
    median of the rounds' paired ratios, :func:`paired_ratios`; the ratio of the two medians
    beside it), and its K-S p > 0.01 in every round."""
    ratios = paired_ratios(got, "ours timerfd")
    if not ratios:
        if not got.get("vllm"):
            none = "no vLLM"
        elif not got["ours timerfd"]:
            none = "no ours"
        else:
            none = "no round with both"
        cpu = f"CPU ≤ ½ bench serve's: n/a ({none})"
    else:
        ratio = float(np.median(ratios))
        others = {name: paired_ratios(got, f"ours {name}") for name in ("asyncio", "spin")}
        notes = "".join(f"; {n} {np.median(r):.2f}" for n, r in others.items() if r)
        ours = median(got["ours timerfd"], "cpu_us_per_chunk")
        serve = median(got["vllm"], "cpu_us_per_chunk")
        of_medians = f"; of the medians {ours / serve:.2f}" if ours and serve else ""
        each = " ".join(f"{r:.2f}" for r in ratios)
        cpu = (f"CPU ≤ ½ bench serve's: {'PASS' if ratio <= 0.5 else 'FAIL'} "
               f"(ours/serve {ratio:.2f}, the median of the rounds' {each}{of_medians}"
               f"{notes})")  # fmt: skip
    ks = [f["ks_p"] for f in got["ours timerfd"]]
    ks_verdict = "n/a" if not ks else ("PASS" if min(ks) > 0.01 else "FAIL")
    return f"{cpu};  K-S p > 0.01: {ks_verdict}" + (f" (min {min(ks):.3f})" if ks else "")


def twice_bench_serve(
    args: argparse.Namespace, folder: Path, python: str | None, lengths: list[int]
) -> None:
    """Per stream length, bench serve's walk, then ours (timerfd) at twice its highest held
    rate: the verdict send-lag p99 under 5 ms."""
    if python is None:
        print("\nSend lag at twice bench serve's rate: skipped (no vLLM install)")
        return
    for chunks in lengths:
        print(f"\n{chunks}-chunk streams: bench serve's highest rate held, then ours at twice it")
        nginx, url = start_nginx(folder, args.server_core, chunks)
        try:
            print("  " + twice_one(args, folder, python, url, chunks), flush=True)
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)


def twice_one(args: argparse.Namespace, folder: Path, python: str, url: str, chunks: int) -> str:
    """The verdict line of one stream length against the stub at ``url``: ours at twice
    bench serve's highest held rate for ``--rounds`` trials, each on a settled machine (bench
    serve's processes wind down for seconds after its result, and a trial that overlaps them
    measures them too), judged by the median of the trials' send-lag p99s."""
    core, seconds = args.client_core, args.seconds
    rates = [float(r) / chunks for r in args.chunk_rates.split(",")]
    best = walk("vllm", lambda r: run_vllm(python, folder, url, r, seconds, chunks, core), rates)
    if best is None:
        return f"{chunks} chunks: bench serve held none of the rates, so no trial at twice it"
    rate = 2 * best[0]
    lags: list[float] = []
    for _ in range(args.rounds):
        settle()
        f = run_ours(url, rate, seconds, chunks, 1, core, "uvloop", "timerfd")
        print(trial_line("ours timerfd", rate, f), flush=True)
        if f["send_lag_p99_ms"] is not None:
            lags.append(f["send_lag_p99_ms"])
    lag = float(np.median(lags)) if len(lags) == args.rounds else None
    verdict = "PASS" if lag is not None and lag < 5 else "FAIL"
    each = " ".join(f"{x:.2f}" for x in lags)
    return (f"{chunks} chunks: send-lag p99 {cell(lag, '.2f')} ms at {rate:g} req/s "
            f"(2 × bench serve's {best[0]:g}; the median of the trials' {each}; "
            f"{sum(x < 5 for x in lags)} of {args.rounds} under) < 5 ms: {verdict}")  # fmt: skip


def run_compare(args: argparse.Namespace, folder: Path, python: str | None,
                aiperf: str | None) -> None:  # fmt: skip
    """``--compare``: every point, the table and verdicts, then (unless ``--no-walk``) the
    send lag at twice bench serve's rate."""
    points = parse_points(args.points)
    results = {(c, r): compare_point(args, folder, (python, aiperf), c, r) for c, r in points}
    print_table(results, args.rounds)
    if not args.no_walk:
        twice_bench_serve(args, folder, python, sorted({c for c, _ in points}))
