"""Does the SLO search come back from the overload it looks for? (prints figures)

Issue 20: one overloaded window used to contaminate the windows after it (a tail that kept
sending for minutes, an idle check skipped), so a search that crossed its boundary could
publish a wrong number. This script runs ``--runs`` pairs of SLO searches on llama.cpp's
server serving the tiny random-weight model of the engine tests (``tests/engines``), each
search on a freshly started server (``collect --engine-cmd``):

* *overloaded*: starts at 512 req/s, far past what the tiny model serves on two cores, and
  goes down to its boundary (every window after the first follows an overloaded one);
* *clean*: starts at 2 req/s and grows to the boundary (no window follows an overload
  until the search crosses it).

For each it prints the found rate (or the result's status and reason), and for the
overloaded searches the first window's tail (seconds after the window, against its cap),
the requests cancelled at the cap, and what proved the engine idle before each later
window. Then the spread (min, max, median) of the found rates of each kind, and their
ratio. The two kinds walk the same grid of rates (powers of two, then two bisections), so
an engine that recovers fully gives the same spread for both.

Usage: python benchmarks/overload_search.py [--runs 3] [--window 3]

A pair took about 1.5 minutes on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "engines"))

from overload_search import CLEAN_START_RPS, OVERLOAD_RPS, run_search  # noqa: E402
from tiny_model import make_tiny_model  # noqa: E402

from tokenwatt.records import RunRecord  # noqa: E402


def found(record: RunRecord) -> float | None:
    """The search's found rate (req/s), None when its result is not ``measured``."""
    result = record.result
    if result is None or result.outcome()[0] != "measured":
        return None
    return result.rate_rps


def describe(record: RunRecord, kind: str) -> str:
    """One line on a search: its probes (rate and verdict), its result, and for an
    overloaded one the first window's tail and the idle proof of the later windows."""
    probes = " ".join(
        f"{p.window.rate_rps:g}{'+' if p.window.slo_pass else '-'}" for p in record.probes
    )
    result = record.result
    status, reason = result.outcome() if result is not None else ("none", "no result")
    line = f"  {kind:<10} probes {probes}  →  {status}"
    line += f" {result.rate_rps:g} req/s" if result is not None and status == "measured" else ""
    line += f" ({reason})" if reason else ""
    if kind == "overloaded" and record.probes:
        first = record.probes[0].window
        cap = f"cap {first.tail_cap_s:g} s" if first.tail_cap_s else "no cap: stopped early"
        line += (
            f"\n{'':13}first window: p99 TTFT {first.ttft_ms.p99} ms, tail {first.tail_s} s "
            f"({cap}), {first.tail_arrivals} tail arrivals, {first.cancelled_at_cap} "
            "cancelled at the cap"
        )
        proofs = [
            (p.metrics.idle_start.proven_by if p.metrics and p.metrics.idle_start else None)
            for p in record.probes[1:]
        ]
        line += f"\n{'':13}idle proven by: {sorted({str(p) for p in proofs})}"
    return line


def spread(values: list[float | None]) -> str:
    """min, median and max of the found rates; how many searches found none."""
    rates = [v for v in values if v is not None]
    missing = len(values) - len(rates)
    if not rates:
        return f"no rate found ({missing} not measured)"
    text = f"min {min(rates):g}  median {statistics.median(rates):g}  max {max(rates):g} req/s"
    return text + (f"  ({missing} not measured)" if missing else "")


def main() -> None:
    """Run the pairs and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="pairs of searches (default 3)")
    parser.add_argument("--window", type=float, default=3.0, help="window length (s)")
    args = parser.parse_args()
    results: dict[str, list[float | None]] = {"overloaded": [], "clean": []}
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny_model(Path(tmp) / "model", eos="never")
        for run in range(args.runs):
            print(f"pair {run + 1} of {args.runs}")
            for kind, start in (("overloaded", OVERLOAD_RPS), ("clean", CLEAN_START_RPS)):
                where = Path(tmp) / f"{kind}-{run}"
                where.mkdir()
                record, _ = run_search(model, where, start, window_s=args.window)
                results[kind].append(found(record))
                print(describe(record, kind), flush=True)
    print("\nfound rates (req/s):")
    for kind, values in results.items():
        print(f"  {kind:<10} {spread(values)}")


if __name__ == "__main__":
    main()
