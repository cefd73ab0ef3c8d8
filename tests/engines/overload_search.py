"""One SLO search on a freshly started llama.cpp server, started above its capacity or below it.

Shared by ``tests/engines/test_overload_recovery.py`` and ``benchmarks/overload_search.py``
(issue 20's evidence): ``collect --engine-cmd`` starts llama.cpp's server (the tiny generated
model, :data:`SLOTS` slots) for every search and stops it afterwards, so each search starts
on a fresh engine. An *overloaded* search starts at :data:`OVERLOAD_RPS`, far past what the
tiny model serves on two cores, and goes down to its boundary; a *clean* search starts at
:data:`CLEAN_START_RPS` and grows to it. Both walk the same grid of rates (powers of two, the
growth factor), so where the engine behaves alike the two bracket the same boundary.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from engine_servers import HERE, MODEL_NAME
from tiny_model import TinyModel

from tokenwatt.records import RunRecord, load_spec

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "fixtures" / "tiny-engine.spec.yaml"
SLOTS = 4
OVERLOAD_RPS = 512.0
"""Where the overloaded search starts (req/s): over ten times what the tiny model serves with
four slots on a busy 2-core machine, so its first windows queue for seconds."""
CLEAN_START_RPS = 2.0
"""Where the clean search starts (req/s): far below the boundary, 512 / 2^8."""
SLO = {"ttft_p99_ms": 1000.0, "tpot_p99_ms": 100.0}
"""The searches' SLO: loose enough that the boundary is the engine's queueing, not noise."""


def search_spec(tmp_path: Path, start_rps: float, *, window_s: float = 3.0) -> Path:
    """The tiny-engine spec with a search from ``start_rps`` (req/s) over the grid of powers
    of two up to :data:`OVERLOAD_RPS`, floor 1 req/s, two bisections, one repeat, windows of
    ``window_s`` seconds; written beside the run (``tmp_path``)."""
    data: dict[str, Any] = load_spec(SPEC).model_dump(mode="json", exclude_none=True)
    data["slo"] = dict(SLO)
    data["measurement"].update(
        warmup_s=0.5, window_s=window_s, search_window_s=window_s, repeats=1,
        request_timeout_s=30, max_concurrency=1024,
    )  # fmt: skip
    data["sweep"] = {
        "start_rps": start_rps, "growth": 2, "max_rps": OVERLOAD_RPS, "min_rps": 1,
        "bisect_steps": 2, "backoff": 0.5, "max_backoffs": 1,
    }  # fmt: skip
    path = tmp_path / f"search-{start_rps:g}.spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_search(
    tiny_model: TinyModel,
    tmp_path: Path,
    start_rps: float,
    *,
    window_s: float = 3.0,
    timeout_s: float = 400,
) -> tuple[RunRecord, str]:
    """``collect --mode quick`` of one search from ``start_rps`` (windows of ``window_s``
    seconds) on a llama.cpp server it starts and stops itself; the record and collect's
    stderr. Raises AssertionError when collect crashed (exit status other than 0, 1) or
    wrote no record."""
    serve = [sys.executable, str(HERE / "serve_llamacpp.py"), str(tiny_model.gguf)]
    cmd = shlex.join([*serve, "--port", "{port}", "--alias", MODEL_NAME, "--parallel", str(SLOTS)])
    out = tmp_path / f"search-{start_rps:g}.json"
    spec = search_spec(tmp_path, start_rps, window_s=window_s)
    argv = [
        sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec),
        "--label", f"from-{start_rps:g}", "--role", "baseline", "--mode", "quick",
        "--no-accuracy", "--no-progress", "--engine-cmd", cmd, "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode in (0, 1) and out.is_file(), done.stderr[-3000:]
    return RunRecord.model_validate_json(out.read_text()), done.stderr
