"""Sampler overhead: CPU share of one core used by the power sampler at 1 Hz and 10 Hz.

Runs the real :class:`tokenwatt.telemetry.PowerMeter` (real clock, real background thread)
over the NVML adapter with the fake NVML module from the tests, and measures the sampler
thread's own CPU time (``pthread_getcpuclockid``) against wall time. Target: < 1% of a core.

The fake answers from Python, so the figure is the sampler's and adapter's own cost; a real
NVML call adds a few tens of µs of driver time per GPU per reading on top.

    python benchmarks/sampler_overhead.py [--seconds 10] [--gpus 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.telemetry.fake_nvml import FakeGpu, FakeNvml, SineTrace
from tokenwatt.telemetry import PowerMeter
from tokenwatt.telemetry.board_nvidia import NvmlSource


def measure(hz: float, seconds: float, gpus: int) -> dict[str, float]:
    """Run one window of ``seconds`` at ``hz``; return CPU share (% of one core) and counts."""
    fake = FakeNvml(
        [
            FakeGpu(
                uuid=f"GPU-{i:04d}",
                bus_id=f"00000000:{i + 16:02X}:00.0",
                trace=SineTrace(600, 40, 9),
            )
            for i in range(gpus)
        ],
        now=time.monotonic,
    )
    meter = PowerMeter(NvmlSource(environ={}, nvml=fake.module), hz)
    meter.start_window()
    thread = meter._thread
    assert thread is not None and thread.ident is not None
    cpu_clock = time.pthread_getcpuclockid(thread.ident)
    cpu0, wall0 = time.clock_gettime(cpu_clock), time.monotonic()
    threading.Event().wait(seconds)
    cpu1, wall1 = time.clock_gettime(cpu_clock), time.monotonic()
    window = meter.stop_window()
    meter.close()
    share = 100.0 * (cpu1 - cpu0) / (wall1 - wall0)
    return {
        "hz": hz,
        "gpus": gpus,
        "seconds": round(wall1 - wall0, 2),
        "samples": window.samples,
        "sampler_cpu_ms": round(1000 * (cpu1 - cpu0), 2),
        "cpu_share_pct_of_one_core": round(share, 3),
        "cpu_ms_per_sample": round(1000 * (cpu1 - cpu0) / max(window.samples, 1), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="window length per rate (s)")
    parser.add_argument("--gpus", type=int, default=8, help="fake GPUs read per sample")
    args = parser.parse_args()
    results = [measure(hz, args.seconds, args.gpus) for hz in (1.0, 10.0)]
    for r in results:
        print(
            f"{r['hz']:>4g} Hz, {r['gpus']} GPUs: {r['samples']} samples in {r['seconds']} s, "
            f"sampler CPU {r['sampler_cpu_ms']} ms = {r['cpu_share_pct_of_one_core']}% of one core "
            f"({r['cpu_ms_per_sample']} ms per sample)"
        )
    print(json.dumps({"target_pct": 1.0, "results": results}))
    return 0 if all(r["cpu_share_pct_of_one_core"] < 1.0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
