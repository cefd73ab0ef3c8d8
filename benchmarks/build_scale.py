"""How `tokenwatt build` scales: N synthetic report records, cold and with nothing changed.

Usage: python benchmarks/build_scale.py [N ...]   (default: 100 1000)

For each N, writes N valid, varied report records (derived from the archive's first record;
every other one with sweep probes, a 120-sample power timeline and an MBU breakdown; five
models on four accelerators, so the frontier page has twenty frontiers) into a temporary
folder, then runs `python -m tokenwatt build` three times in fresh processes:
cold (no docs, no page cache; the vega-embed bundle cache is kept, as after a first build),
unchanged (nothing to do), and after touching one record. Prints wall time and peak memory
(max RSS of the child process). Targets on a 2-core machine: 1,000 records ≤ 30 s cold and
≤ 2 s with nothing changed.
"""

from __future__ import annotations

import copy
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "reports" / "lab-h100-qwen3-30b-a3b-kv-cache.json"


def make_records(n: int, folder: Path) -> None:
    seed = json.loads(SEED.read_text(encoding="utf-8"))
    rng = random.Random(n)
    folder.mkdir(parents=True)
    for i in range(n):
        data = copy.deepcopy(seed)
        data["id"] = f"synthetic-{i:05d}"
        data["title"] = f"Synthetic lab note {i}"
        data["status"] = "draft" if i % 3 else "published"
        data["published"] = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        # Five models on four accelerators: twenty frontiers of about a hundred points each.
        data["model"]["name"] = f"Model-{i % 5}"
        data["hardware"]["accelerator"] = f"Accelerator {i % 4}"
        for j, cfg in enumerate(data["configs"]):
            cfg["goodput_tok_s"] = round(rng.uniform(3000, 6000), 1)
            cfg["tpot_p99_ms"] = round(rng.uniform(20, 50), 1)
            cfg["node_power_kw"] = round(rng.uniform(0.55, 0.7), 3)
            cfg["accuracy"]["score"] = round(rng.uniform(85, 97), 1)
            if i % 2:
                cfg["sweep"] = [
                    {
                        "rate_rps": float(r),
                        "slo_pass": r < 16,
                        "ttft_p99_ms": 100.0 * r,
                        "tpot_p99_ms": 3.0 * r,
                    }
                    for r in (2, 4, 8, 16)
                ]
                cfg["power_timeline"] = [
                    {
                        "t_s": float(t),
                        "power_w": 600.0 + rng.uniform(-20, 20),
                        "throttle": ["sw_power_cap"] if rng.random() < 0.5 else [],
                    }
                    for t in range(120)
                ]
                cfg["mbu_breakdown"] = {"weights_gbs": 1000.0, "kv_gbs": 500.0 + 400 * j}
        base = data["configs"][0]["accuracy"]["score"]
        for cfg in data["configs"]:
            cfg["accuracy"]["delta_pts"] = round(cfg["accuracy"]["score"] - base, 1)
        path = folder / f"{data['id']}.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def timed_build(reports: Path, docs: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one `tokenwatt build` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tokenwatt", "build", "--reports", str(reports), "--out", str(docs)],
        check=True,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024


def main(sizes: list[int]) -> None:
    print(f"{'N':>6} {'cold s':>8} {'unchanged s':>12} {'one changed s':>14} {'peak MiB':>9}")
    with tempfile.TemporaryDirectory(prefix="tokenwatt-bench-") as tmp:
        root = Path(tmp)
        for n in sizes:
            reports, docs = root / f"reports-{n}", root / f"site-{n}" / "docs"
            make_records(n, reports)
            cache = docs.parent / ".tokenwatt-cache"
            # Keep only the vega-embed bundle (made once per vl-convert version) in the cache.
            empty = root / "reports-empty"
            empty.mkdir(exist_ok=True)
            timed_build(empty, docs)
            shutil.rmtree(docs)
            shutil.rmtree(cache / "pages", ignore_errors=True)
            cold, peak = timed_build(reports, docs)
            unchanged, _ = timed_build(reports, docs)
            first = reports / "synthetic-00000.json"
            data = json.loads(first.read_text(encoding="utf-8"))
            data["title"] += " (edited)"
            first.write_text(json.dumps(data, indent=2), encoding="utf-8")
            one, _ = timed_build(reports, docs)
            print(f"{n:>6} {cold:>8.2f} {unchanged:>12.2f} {one:>14.2f} {peak:>9.0f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 1000])
