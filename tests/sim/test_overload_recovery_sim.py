"""The SLO search comes back from the overload it looks for, on the simulated engine.

As ``tests/engines/test_overload_recovery.py`` on llama.cpp: a search started far past the
simulated engine's capacity and one started below it, each on a freshly started
``tokenwatt sim`` (its KV cache and queue empty). The sim's queue keeps every request it
accepted until it ends or is aborted, so a window whose tail or idle check let a backlog
through would show it in the windows after the overload.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.overload_checks import assert_agrees, assert_independent_windows, assert_went_down
from tests.sim.sim_process import REPO, start_sim
from tokenwatt.records import RunRecord, load_spec

SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"
TOP_RPS = 480.0
"""The overloaded search's start (req/s): several times what the sim serves under the SLO."""
LOW_RPS = TOP_RPS / 64
"""The clean search's start: on the same grid of powers of two as the overloaded one."""


def _search(tmp_path: Path, start_rps: float) -> RunRecord:
    data: dict[str, Any] = load_spec(SPEC).model_dump(mode="json", exclude_none=True)
    data["sweep"] = {
        "start_rps": start_rps, "growth": 2, "max_rps": TOP_RPS, "min_rps": LOW_RPS,
        "bisect_steps": 2, "backoff": 0.5, "max_backoffs": 1,
    }  # fmt: skip
    spec = tmp_path / f"sim-{start_rps:g}.spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / f"sim-{start_rps:g}.json"
    sim = start_sim("--profile", "fp8-kv", "--seed", "0")
    try:
        argv = [
            sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec), "--label",
            f"from-{start_rps:g}", "--role", "baseline", "--endpoint", sim.endpoint,
            "--no-progress", "--no-accuracy", "--out", str(out),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False
        )
    finally:
        sim.stop()
    assert done.returncode in (0, 1) and out.is_file(), done.stderr[-3000:]
    return RunRecord.model_validate_json(out.read_text())


def test_a_sim_search_started_far_past_capacity_finds_what_a_clean_search_finds(
    tmp_path: Path,
) -> None:
    over, clean = _search(tmp_path, TOP_RPS), _search(tmp_path, LOW_RPS)
    assert_went_down(over, TOP_RPS)
    assert_independent_windows(over)
    assert_independent_windows(clean)
    # The sim's service is deterministic but for its arrivals: the two agree within one
    # growth step and one back-off, as on llama.cpp.
    assert_agrees(over, clean, factor=4)
