"""Do the instruments disturb the load generator? Send-lag p99 with and without them (prints).

Setup (issue 8): the scripted engine of ``tests/collect/scripted_engine.py`` in a child
process answers every completion at once; one window of Poisson arrivals at ``--rate``
req/s for ``--seconds`` s (after a 0.5 s warm-up) runs through
:class:`tokenwatt.collect.measure.window.WindowRunner` with

(a) no instruments (no power meter, ``/metrics`` not read);
(b) a ``command`` power source that takes 1 s per reading (a slow BMC), sampled at 1 Hz;
(c) a ``/metrics`` that never answers;
(d) both.

The cases run interleaved, ``--rounds`` times each; it prints each window's send-lag p50,
p99 and max (ms: actual send − scheduled send) and each case's median p99 beside (a)'s.
Target: (b)–(d) within 1 ms of (a). Before issue 8 the power source was read on the load's
event loop: (b) pushed send lag to hundreds of milliseconds.

Usage: python benchmarks/instrument_lag.py [--rate 200] [--seconds 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "collect"))
sys.path.insert(0, str(ROOT))  # scripted_engine imports tests.server_process

from scripted_engine import MODEL, EngineProcess, start_engine  # noqa: E402

from tokenwatt.collect.load.loadgen import WindowResult  # noqa: E402
from tokenwatt.collect.measure.instruments import Instruments  # noqa: E402
from tokenwatt.collect.measure.progress import Progress  # noqa: E402
from tokenwatt.collect.measure.window import WindowPlan, WindowRunner  # noqa: E402
from tokenwatt.collect.workload.workload import workload_for  # noqa: E402
from tokenwatt.records import load_spec  # noqa: E402
from tokenwatt.records.spec.spec import PowerSpec, Spec  # noqa: E402
from tokenwatt.telemetry.command import CommandSource  # noqa: E402
from tokenwatt.telemetry.meter import PowerMeter  # noqa: E402

CASES = ("a: none", "b: 1 s power", "c: hung /metrics", "d: both")


def spec_for(endpoint: str) -> Spec:
    spec = load_spec(ROOT / "tests" / "fixtures" / "sim.spec.yaml")
    return spec.model_copy(
        update={
            "hardware": spec.hardware.model_copy(update={"adapter": "none"}),
            "engine": spec.engine.model_copy(update={"endpoint": endpoint, "model": MODEL}),
        }
    )


def slow_meter(folder: Path) -> PowerMeter:
    script = folder / "power.py"
    script.write_text("import time\ntime.sleep(1.0)\nprint(300)\n")
    power = PowerSpec(source="command", command=shlex.join([sys.executable, str(script)]))
    return PowerMeter(CommandSource(power), sampling_hz=1.0)


class Lags:
    """Captures each window's requests (the runner keeps only the summary)."""

    def __init__(self) -> None:
        self.last: WindowResult | None = None


def run_case(
    case: str, engines: dict[str, EngineProcess], folder: Path, plan: WindowPlan
) -> tuple[float, float, float]:
    """(p50, p99, max) send lag (ms) of one window."""
    import tokenwatt.collect.measure.window as window

    hung = case.startswith(("c", "d"))
    engine = engines["hang" if hung else "idle"]
    meter = slow_meter(folder) if case.startswith(("b", "d")) else None
    captured = Lags()
    real = window.run_window

    async def keep(*args: object, **kwargs: object) -> WindowResult:
        captured.last = await real(*args, **kwargs)  # type: ignore[arg-type]
        return captured.last

    window.run_window = keep  # type: ignore[assignment]
    try:
        spec = spec_for(engine.endpoint)
        with Instruments(engine.endpoint, meter=meter, scrape=hung) as instruments:
            runner = WindowRunner(
                spec,
                api_key=None,
                workload=workload_for(spec),
                instruments=instruments,
                progress=Progress(enabled=False),
            )
            runner.run(plan)
    finally:
        window.run_window = real  # type: ignore[assignment]
    assert captured.last is not None
    lags = [
        (r.sent_s - r.scheduled_s) * 1e3
        for r in captured.last.requests
        if r.in_window and r.sent_s is not None
    ]
    return (
        float(np.percentile(lags, 50)),
        float(np.percentile(lags, 99)),
        max(lags),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    plan = WindowPlan(rate_rps=args.rate, duration_s=args.seconds, warmup_s=0.5, seed=1)
    engines = {"idle": start_engine("idle"), "hang": start_engine("hang")}
    p99s: dict[str, list[float]] = {c: [] for c in CASES}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{args.rate:g} req/s, {args.seconds:g} s windows; send lag in ms")
            print(f"{'case':<18} {'p50':>7} {'p99':>7} {'max':>7}")
            for _ in range(args.rounds):
                for case in CASES:
                    p50, p99, top = run_case(case, engines, Path(tmp), plan)
                    p99s[case].append(p99)
                    print(f"{case:<18} {p50:7.3f} {p99:7.3f} {top:7.3f}", flush=True)
    finally:
        for e in engines.values():
            e.stop()
    base = statistics.median(p99s[CASES[0]])
    print("\nmedian p99 per case (difference from a):")
    for case in CASES:
        m = statistics.median(p99s[case])
        print(f"{case:<18} {m:7.3f} ms  ({m - base:+.3f} ms)")


if __name__ == "__main__":
    main()
