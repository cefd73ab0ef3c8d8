"""GPU check (needs an NVIDIA GPU; about 3 minutes): what the fakes in tests/telemetry cannot
show, on the real driver, through the same sources and meter the collector uses.

Rows (one table; exit status 1 on any disagreement):

- ``counter vs samples, idle`` / ``… loaded``: NVML's energy counter against the trapezoid
  integral of NVML_FI_DEV_POWER_INSTANT samples at 10 Hz, with the engine idle and under
  a bf16 matmul load (torch); agree within :data:`AGREE_PCT`;
- ``power averaging``: on a step from idle to load, how much later
  ``nvmlDeviceGetPowerUsage`` (documented as a one-second average on Ampere, except GA100,
  and newer) crosses half the step than the instant field does; 0.2–2 s is an average of
  about a second, about 0 s an instant reading;
- ``throttle reasons``: the clock-event reasons read under load, every bit known;
- ``engine-process mapping``: a child process holding a CUDA context in its own process
  group (as ``collect`` starts an engine) is found by
  :mod:`tokenwatt.telemetry.gpu_selection` on the GPU it runs on;
- ``tokenwatt collect on vLLM``: where ``vllm`` imports and ``TOKENWATT_CHECK_MODEL`` names
  a local model directory, a short smoke ``collect`` launching vLLM with board power; its
  windows' power must be valid and measured on the engine's GPU.

    CUDA_VISIBLE_DEVICES=0 python benchmarks/gpu_nvml_check.py [--window 40] [--hz 10]

Exit status: 0 all rows pass or are skipped with a reason, 1 a disagreement, 2 no NVIDIA GPU
(NVML does not initialise or sees none): the message says so and nothing else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tokenwatt.analysis.power.power import trapezoid_energy_j
from tokenwatt.errors import TelemetryError
from tokenwatt.records.run.power import PowerWindow
from tokenwatt.telemetry import PowerMeter
from tokenwatt.telemetry.board_nvidia import NvmlSource
from tokenwatt.telemetry.gpu_selection import engine_pids_from

AGREE_PCT = 3.0
"""Counter against integrated instant samples at 10 Hz: largest disagreement (%)."""

Row = tuple[str, str, str]  # (check, PASS/FAIL/SKIP, detail)


def _load(stop: threading.Event, size: int) -> None:
    """Back-to-back bf16 matmuls on the first visible GPU until ``stop``."""
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(20):
            a @ b  # the product is the load
        torch.cuda.synchronize()


def _measure(meter: PowerMeter, seconds: float) -> PowerWindow:
    meter.start_window()
    threading.Event().wait(seconds)
    return meter.stop_window()


def _agreement_row(name: str, window: PowerWindow) -> Row:
    """Counter energy against the trapezoid of the window's timeline samples."""
    times = [t for t, _ in window.timeline]
    watts = [w for _, w in window.timeline]
    if window.energy_method != "counter" or not window.energy_j or len(times) < 2:
        return name, "FAIL", f"no counter energy ({window.energy_method}); {window.notes}"
    integrated = trapezoid_energy_j(times, watts) * window.duration_s / (times[-1] - times[0])
    diff = 100.0 * (integrated - window.energy_j) / window.energy_j
    ok = abs(diff) <= AGREE_PCT and window.valid
    detail = (
        f"counter {window.energy_j:.0f} J, samples {integrated:.0f} J ({diff:+.2f}%, limit "
        f"{AGREE_PCT:g}%), mean {window.mean_power_w or 0:.0f} W"
    )
    if not window.valid:
        detail += "; invalid: " + "; ".join(window.invalid_reasons)
    return name, "PASS" if ok else "FAIL", detail


def _crossing_s(series: list[tuple[float, float]], level: float) -> float | None:
    return next((t for t, w in series if w >= level), None)


def _averaging_row(source: NvmlSource, start_load: Any, seconds: float = 6.0) -> Row:
    """Sample instant and averaged power at 20 Hz across an idle→load step."""
    nv, handle = source.nv, source._handles[0]
    instant: list[tuple[float, float]] = []
    average: list[tuple[float, float]] = []
    t0 = time.monotonic()
    started = False
    while (t := time.monotonic() - t0) < seconds:
        if not started and t >= 1.0:
            start_load()
            started = True
        instant.append((t, source._instant_mw(handle) / 1000.0))
        average.append((t, nv.nvmlDeviceGetPowerUsage(handle) / 1000.0))
        time.sleep(0.05)
    low = min(w for _, w in instant[:10])
    high = max(w for _, w in instant[-20:])
    if high - low < 50:
        return "power averaging", "FAIL", f"no load step seen ({low:.0f} → {high:.0f} W)"
    half = (low + high) / 2
    ti, ta = _crossing_s(instant, half), _crossing_s(average, half)
    if ti is None or ta is None:
        return "power averaging", "FAIL", "a reading never crossed half the step"
    lag = ta - ti
    kind = "an average of about a second" if 0.2 <= lag <= 2.0 else "an instant reading"
    detail = f"step {low:.0f} → {high:.0f} W; nvmlDeviceGetPowerUsage lags by {lag:.2f} s: {kind}"
    return "power averaging", "PASS" if -0.2 <= lag <= 2.0 else "FAIL", detail


def _throttle_row(window: PowerWindow) -> Row:
    unknown = [r for r in window.throttle_counts if r.startswith("other_")]
    counts = ", ".join(f"{k} {v}" for k, v in window.throttle_counts.items()) or "none set"
    status = "FAIL" if unknown else "PASS"
    return "throttle reasons", status, f"{counts} of {window.samples} samples"


def _mapping_row(uuid: str) -> Row:
    """A CUDA child in its own process group must be found on ``uuid``'s GPU."""
    code = (
        "import torch, sys, time; torch.zeros(1, device='cuda'); "
        "print('ready', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True, text=True
    )
    try:
        if child.stdout is None or child.stdout.readline().strip() != "ready":
            return "engine-process mapping", "FAIL", "the CUDA child did not start"
        pids = engine_pids_from(child.pid)
        source = NvmlSource(environ=os.environ, engine_pids=pids)
        try:
            sel = source.selection
            assert sel is not None
            chosen = [d.uuid for d in sel.devices]
            ok = sel.method == "engine processes" and chosen == [uuid]
            detail = f"pid {child.pid} → {sel.method}: {', '.join(chosen)}"
            if sel.notes:
                detail += "; " + "; ".join(sel.notes)
            return "engine-process mapping", "PASS" if ok else "FAIL", detail
        finally:
            source.close()
    finally:
        os.killpg(child.pid, 9)
        child.wait()


def _vllm_row() -> Row:
    """A short smoke ``collect`` launching vLLM on the local model, with board power."""
    model = os.environ.get("TOKENWATT_CHECK_MODEL")
    try:
        import vllm  # noqa: F401
    except ImportError:
        return "tokenwatt collect on vLLM", "SKIP", "vllm is not installed"
    if not model or not Path(model).is_dir():
        return "tokenwatt collect on vLLM", "SKIP", "TOKENWATT_CHECK_MODEL names no local model"
    out = Path(tempfile.mkdtemp()) / "vllm-check.json"
    cmd = [
        sys.executable, "-m", "tokenwatt", "collect", "--model", model, "--mode", "smoke",
        "--engine-cmd", f"{sys.executable} -m vllm.entrypoints.openai.api_server --model "
        f"{model} --port {{port}} --gpu-memory-utilization 0.5",
        "--rate", "2", "--duration", "20", "--input-tokens", "64", "--output-tokens", "32",
        "--no-accuracy", "--no-progress", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=420, check=False)
    if done.returncode != 0 or not out.is_file():
        return "tokenwatt collect on vLLM", "FAIL", f"exit {done.returncode}: {done.stderr[-300:]}"
    record = json.loads(out.read_text())
    powers = [r.get("power") for r in record.get("repeats", []) if r.get("power")]
    bad = [p for p in powers if not p["valid"]]
    chosen = {p.get("device_selection") for p in powers}
    ok = bool(powers) and not bad and chosen == {"engine processes"}
    detail = (
        f"{len(powers)} windows, {len(bad)} invalid, devices chosen by {sorted(map(str, chosen))}"
    )
    if bad:
        detail += ": " + "; ".join(bad[0]["invalid_reasons"])
    return "tokenwatt collect on vLLM", "PASS" if ok else "FAIL", detail


def _table(rows: list[Row]) -> str:
    width = max(len(r[0]) for r in rows)
    lines = [f"{'check':<{width}}  result  detail", f"{'-' * width}  ------  ------"]
    lines += [f"{name:<{width}}  {status:<6}  {detail}" for name, status, detail in rows]
    return "\n".join(lines)


def _run(args: argparse.Namespace, source: NvmlSource) -> list[Row]:
    rows: list[Row] = []
    try:
        import torch

        has_cuda = bool(torch.cuda.is_available())
    except ImportError:
        has_cuda = False
    with PowerMeter(source, args.hz) as meter:
        uuid = meter.identity().device_ids[0]
        rows.append(_agreement_row("counter vs samples, idle", _measure(meter, args.idle)))
        if not has_cuda:
            rows.append(("load, averaging, throttle, mapping", "SKIP", "no torch with CUDA"))
            return rows
        stop = threading.Event()
        worker = threading.Thread(target=_load, args=(stop, args.size), daemon=True)
        rows.append(_averaging_row(source, worker.start))
        loaded = _measure(meter, args.window)
        stop.set()
        worker.join(timeout=60)
        rows.append(_agreement_row("counter vs samples, loaded", loaded))
        rows.append(_throttle_row(loaded))
    rows.append(_mapping_row(uuid))
    rows.append(_vllm_row())
    return rows


def main() -> int:
    """Run the checks and print the table; see the module docstring for the exit status."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--window", type=float, default=40.0, help="loaded window (s)")
    parser.add_argument("--idle", type=float, default=10.0, help="idle window (s)")
    parser.add_argument("--hz", type=float, default=10.0, help="sampling rate (Hz)")
    parser.add_argument("--size", type=int, default=8192, help="matmul size")
    args = parser.parse_args()
    try:
        source = NvmlSource(environ=os.environ, gpus=[0])
    except TelemetryError as exc:
        print(f"gpu_nvml_check: no NVIDIA GPU to check on this machine: {exc}", file=sys.stderr)
        return 2
    name = source.identity().accelerator
    rows = _run(args, source)
    print(f"GPU: {name}")
    print(_table(rows))
    return 1 if any(status == "FAIL" for _, status, _ in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
