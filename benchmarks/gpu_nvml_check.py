"""GPU check (needs an NVIDIA GPU; under 5 minutes): NVML's energy counter against the
integral of instantaneous power during a steady matrix-multiply load, plus throttle reasons
and clocks, through the same :class:`tokenwatt.telemetry.PowerMeter` the collector uses.

Phases: an idle window (10 s), a warm-up of the load (20 s, not measured), a loaded window
(60 s) sampled at 10 Hz. Pass when the trapezoid integral of the NVML_FI_DEV_POWER_INSTANT
samples agrees with the counter difference within 3% in the loaded window. Without torch the
load phase is skipped (idle check only) and the summary says so.

    CUDA_VISIBLE_DEVICES=0 python benchmarks/gpu_nvml_check.py [--window 60] [--hz 10]

Prints one JSON summary; exit status 0 on pass, 1 on fail, 2 when no GPU is found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tokenwatt.analysis.power import trapezoid_energy_j
from tokenwatt.errors import TelemetryError
from tokenwatt.records.power import PowerWindow
from tokenwatt.telemetry import PowerMeter
from tokenwatt.telemetry.board_nvidia import NvmlSource

AGREE_PCT = 3.0


def _load(stop: threading.Event, size: int) -> dict[str, Any]:
    """Back-to-back bf16 matmuls on GPU 0 until ``stop``; returns TFLOP/s achieved."""
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    n, t0 = 0, time.monotonic()
    while not stop.is_set():
        for _ in range(20):
            a @ b  # the product is the load
        torch.cuda.synchronize()
        n += 20
    dt = time.monotonic() - t0
    return {"matmuls": n, "size": size, "tflops": round(2 * size**3 * n / dt / 1e12, 1)}


def _agreement(window: PowerWindow) -> dict[str, Any]:
    times = [t for t, _ in window.timeline]
    watts = [w for _, w in window.timeline]
    integrated = trapezoid_energy_j(times, watts) if len(times) > 1 else None
    counter = window.energy_j if window.energy_method == "counter" else None
    diff = None
    if integrated is not None and counter:
        diff = round(100.0 * (integrated - counter) / counter, 3)
    return {
        "valid": window.valid,
        "invalid_reasons": window.invalid_reasons,
        "samples": window.samples,
        "duration_s": round(window.duration_s, 3),
        "energy_counter_j": None if counter is None else round(counter, 1),
        "energy_integrated_instant_j": None if integrated is None else round(integrated, 1),
        "diff_pct": diff,
        "mean_power_w": None if window.mean_power_w is None else round(window.mean_power_w, 1),
        "power_method": window.power_method,
        "sm_clock_mhz_mean": window.sm_clock_mhz_mean,
        "mem_clock_mhz_mean": window.mem_clock_mhz_mean,
        "temperature_c_max": window.temperature_c_max,
        "throttle_counts": window.throttle_counts,
        "notes": window.notes,
    }


def _measure(meter: PowerMeter, seconds: float) -> PowerWindow:
    meter.start_window()
    threading.Event().wait(seconds)
    return meter.stop_window()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=60.0, help="loaded window (s)")
    parser.add_argument("--idle", type=float, default=10.0, help="idle window (s)")
    parser.add_argument("--warmup", type=float, default=20.0, help="load warm-up (s)")
    parser.add_argument("--hz", type=float, default=10.0, help="sampling rate (Hz)")
    parser.add_argument("--size", type=int, default=8192, help="matmul size")
    args = parser.parse_args()
    summary: dict[str, Any] = {"check": "nvml energy counter vs integrated instant power"}
    try:
        source = NvmlSource(environ=os.environ, gpus=[0])
    except TelemetryError as exc:
        print(json.dumps(summary | {"error": str(exc)}))
        return 2
    with PowerMeter(source, args.hz) as meter:
        ident = meter.identity()
        summary["gpu"] = {
            "name": ident.accelerator,
            "driver": ident.driver,
            "uuid": ident.device_ids[0],
            "rated_bw_tbs": ident.rated_bw_tbs_per_gpu,
            "memory_bytes": ident.memory_bytes_per_gpu,
        }
        summary["idle"] = _agreement(_measure(meter, args.idle))
        try:
            import torch

            has_cuda = bool(torch.cuda.is_available())
        except ImportError:
            has_cuda = False
        if not has_cuda:
            summary["loaded"] = None
            summary["note"] = "torch with CUDA not available: load phase skipped"
        else:
            stop = threading.Event()
            result: dict[str, Any] = {}
            worker = threading.Thread(target=lambda: result.update(_load(stop, args.size)))
            worker.start()
            threading.Event().wait(args.warmup)
            loaded = _measure(meter, args.window)
            stop.set()
            worker.join(timeout=60)
            summary["load"] = result
            summary["loaded"] = _agreement(loaded)
    checked = summary.get("loaded") or summary["idle"]
    diff = checked["diff_pct"]
    summary["agree_within_pct"] = AGREE_PCT
    summary["pass"] = bool(checked["valid"] and diff is not None and abs(diff) <= AGREE_PCT)
    print(json.dumps(summary, indent=2))
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
