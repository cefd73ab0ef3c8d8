"""Ours in the load-generator benchmarks (``benchmarks/loadgen.py``): one trial of the load
generator in a child process pinned to the client core, with its figures (held, K-S p of the
sent gaps, send lag, client CPU per chunk over the measured window), and the walk over rising
rates that every client's trials take."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from peers import cpu_seconds
from sse_stub import PROMPT_TOKENS

ROOT = Path(__file__).resolve().parents[1]
LOADGEN = Path(__file__).with_name("loadgen.py")
"""The script whose ``--child`` runs :func:`trial_ours` in a pinned child process."""


class CpuSampler:
    """CPU seconds of this process and of ``pids`` (its workers), sampled every 50 ms
    against ``time.perf_counter`` in a thread, so that the CPU of one stretch of time
    (the measured window) can be read off afterwards, without start-up, imports or the
    window's summary; with them the voluntary context switches of the thread that made it
    (the event loop's: its waits that blocked, a sleep or a wait for its sockets or timer),
    which on this VM cost 15-22 µs of CPU each (``benchmarks/wait_cost.py``). Read from
    /proc for that thread alone, so the sampler's own thread, the GIL hand-offs its samples
    cause and a send-timer thread are not in them. And the steal time of the cores the
    process is pinned to (/proc/stat: time the hypervisor ran something else while this VM's
    core had work), which delays sends and is no fault of the client."""

    def __init__(self, pids: list[int]) -> None:
        import threading

        self.pids = pids
        self.samples: list[tuple[float, float]] = []
        self.switches: list[float] = []  # the loop thread's, at each sample
        self._status = Path(f"/proc/self/task/{threading.get_native_id()}/status")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cores = {f"cpu{c}" for c in os.sched_getaffinity(0)}
        self.steal: list[float] = []  # the pinned cores' steal seconds, at each sample

    def _cpu(self) -> float:
        return time.process_time() + sum(cpu_seconds(pid) for pid in self.pids)

    def _switches(self) -> float:
        for line in self._status.read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return float(line.split()[1])
        return float("nan")

    def _steal(self) -> float:
        tick = os.sysconf("SC_CLK_TCK")
        lines = Path("/proc/stat").read_text().splitlines()
        # cpuN user nice system idle iowait irq softirq steal ...: the eighth figure
        return sum(int(f[8]) for f in map(str.split, lines) if f[0] in self._cores) / tick

    def _sample(self) -> None:
        self.switches.append(self._switches())
        self.steal.append(self._steal())
        self.samples.append((time.perf_counter(), self._cpu()))

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> float:
        """CPU seconds spent from ``start`` to ``end`` (perf_counter), interpolated."""
        import numpy as np

        at = np.array([t for t, _ in self.samples])
        cpu = np.array([c for _, c in self.samples])
        return float(np.interp(end, at, cpu) - np.interp(start, at, cpu))

    def waits_between(self, start: float, end: float) -> float:
        """The loop thread's voluntary context switches from ``start`` to ``end``
        (perf_counter), interpolated."""
        import numpy as np

        at = np.array([t for t, _ in self.samples])
        switches = np.array(self.switches)
        return float(np.interp(end, at, switches) - np.interp(start, at, switches))

    def steal_between(self, start: float, end: float) -> float:
        """The pinned cores' steal time (s) from ``start`` to ``end`` (perf_counter),
        interpolated (/proc/stat counts it in 10 ms ticks)."""
        import numpy as np

        at = np.array([t for t, _ in self.samples])
        steal = np.array(self.steal)
        return float(np.interp(end, at, steal) - np.interp(start, at, steal))


def trial_ours(
    url: str,
    rate: float,
    seconds: float,
    chunks: int,
    workers: int,
    event_loop: str = "uvloop",
    timer: str = "timerfd",
) -> dict[str, Any]:
    """One pinned trial of run_window (or a WorkerPool's); runs in a child process.
    ``event_loop``: the loop it runs on (:mod:`tokenwatt.collect.load.event_loop`); ``timer``:
    how sends wait for their times (:mod:`tokenwatt.collect.load.sends`)."""
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from scipy import stats

    import tokenwatt.analysis  # noqa: F401  (imported before the window, not inside it)
    from tokenwatt.collect.load.event_loop import run_load
    from tokenwatt.collect.load.loadgen import LoadConfig, run_window
    from tokenwatt.collect.load.pool.workers import WorkerPool
    from tokenwatt.collect.load.window_plan import WindowPlan
    from tokenwatt.collect.workload.workload import RequestSpec
    from tokenwatt.records.spec.spec import SloSpec

    cfg = LoadConfig(
        endpoint=url + "/v1",
        model="bench",
        slo=SloSpec(ttft_p99_ms=1000, tpot_p99_ms=1000),
        max_concurrency=4096,
        request_timeout_s=30,
    )
    spec = RequestSpec(prompt=list(range(100, 100 + PROMPT_TOKENS)), max_tokens=chunks)
    plan = WindowPlan(
        rate_rps=rate,
        duration_s=seconds,
        warmup_s=0.5,
        seed=1,
        keep_load=False,
        send_timer=timer,  # type: ignore[arg-type]  # checked by argparse's choices
        event_loop=event_loop,  # type: ignore[arg-type]  # checked by argparse's choices
    )
    if workers > 1:
        with WorkerPool(workers) as pool, CpuSampler(pool.pids()) as cpu:
            result = pool.run_window(cfg, plan, itertools.repeat(spec))
    else:
        with CpuSampler([]) as cpu:
            result = run_load(run_window(cfg, plan, itertools.repeat(spec)), plan.event_loop)
    start, end = result.window_start_s, result.window_end_s
    in_window = [r for r in result.requests if r.in_window]
    finished = [r.finished_s for r in in_window if r.finished_s is not None]
    span = (max(finished) - start) if finished else float("inf")
    arrived = sum(1 for r in result.requests for t in r.chunk_s if start <= t < end)
    sent = np.sort([r.sent_s for r in in_window])
    ks_p = stats.kstest(np.diff(sent), stats.expon(scale=1 / rate).cdf).pvalue
    # How close two sends can go: the pairs the schedule put under 20 us apart (one process
    # writes one request at a time, so none go closer than one write).
    pairs = sorted((r.scheduled_s, r.sent_s) for r in in_window)
    close = [abs(b[1] - a[1]) for a, b in itertools.pairwise(pairs) if b[0] - a[0] < 20e-6]
    s = result.summary
    return {
        "requests": len(in_window),
        "errors": s.errors,
        "held_ratio": seconds / span,
        "throughput_rps": len(in_window) / span,
        "send_lag_p99_ms": s.send_lag_p99_ms,
        "ks_p": float(ks_p),
        "close_gap_us": float(np.median(close)) * 1e6 if close else None,
        "cpu_us_per_chunk": cpu.between(start, end) / max(arrived, 1) * 1e6,
        # One process: its waits per request sent in the window (a pool's are in its workers).
        "waits_per_request": (
            cpu.waits_between(start, end) / max(len(in_window), 1) if workers == 1 else None
        ),
        "chunks_per_s": arrived / (end - start),
        "steal_ms": cpu.steal_between(start, end) * 1e3,
    }


def run_ours(
    url: str,
    rate: float,
    seconds: float,
    chunks: int,
    workers: int,
    core: int,
    event_loop: str = "uvloop",
    timer: str = "timerfd",
) -> dict[str, Any]:
    """One trial of ours in a child process pinned to ``core`` (:func:`trial_ours`' figures),
    ``held`` added: no errors, throughput within 1% of ``rate`` and sent gaps passing K-S.

    Raises:
        RuntimeError: the child failed (its stderr's tail).
    """
    cmd = ["taskset", "-c", str(core), sys.executable, str(LOADGEN), "--child", url, str(rate),
           str(seconds), str(chunks), str(workers), "--timer", timer,
           "--event-loop", event_loop]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    figures["held"] = (
        figures["errors"] == 0 and figures["held_ratio"] >= 0.99 and figures["ks_p"] > 0.01
    )
    return figures


Best = tuple[float, dict[str, Any]] | None


def trial_line(name: str, rate: float, f: dict[str, Any]) -> str:
    """One trial's figures on one line."""
    ks = "   n/a" if f["ks_p"] is None else f"{f['ks_p']:6.3f}"
    lag = f["send_lag_p99_ms"]
    close = f.get("close_gap_us")
    waits = f.get("waits_per_request")
    steal = f.get("steal_ms")
    return (
        f"  {name:12s} {rate:7.1f} req/s  held={'yes' if f['held'] else 'no ':3s} "
        f"{f['held_ratio'] * 100:5.1f}%  errors {f['errors']:4d}  K-S p {ks}  lag p99 "
        f"{'   n/a' if lag is None else f'{lag:6.2f}'} ms  "
        f"close {'  n/a' if close is None else f'{close:5.1f}'} µs  "
        f"{f['chunks_per_s']:8.0f} chunks/s  CPU {f['cpu_us_per_chunk']:6.2f} µs/chunk"
        f"  waits/req {' n/a' if waits is None else f'{waits:4.2f}'}"
        f"  steal {'n/a' if steal is None else f'{steal:3.0f}'} ms"
    )


def walk(name: str, trial: Any, rates: list[float]) -> Best:
    """Trials at rising rates until two in a row miss; the highest rate held and its figures."""
    best: Best = None
    misses = 0
    for rate in rates:
        f = trial(rate)
        print(trial_line(name, rate, f), flush=True)
        if f["held"]:
            best, misses = (rate, f), 0
        else:
            misses += 1
            if misses == 2:  # two misses in a row: past the knee
                break
    return best
