"""End to end against ``tokenwatt sim``: a smoke-mode ``collect`` prints what the mode
replaced before the first window, and its run record keeps it (``mode_overrides``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.sim.sim_process import REPO, start_sim
from tokenwatt.records import RunRecord
from tokenwatt.records.spec.mode import ModeOverride

SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"


def test_smoke_mode_prints_and_records_what_it_replaced(tmp_path: Path) -> None:
    data = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    data["measurement"]["repeats"] = 2  # smoke: 1
    data["accuracy"]["suite"] = str(SPEC.parent / "sim-suite.jsonl")  # limit 20, smoke: 5
    data["sweep"].update(start_rps=20, max_rps=40)
    spec = tmp_path / "smoke.spec.yaml"
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = tmp_path / "run.json"
    sim = start_sim("--profile", "fp8-kv", "--seed", "0")
    try:
        cmd = [sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec), "--mode"]
        cmd += ["smoke", "--label", "sim", "--role", "baseline", "--out", str(out)]
        cmd += ["--endpoint", sim.endpoint, "--no-progress", "--no-accuracy"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False
        )
    finally:
        sim.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.splitlines()[:2] == [
        "smoke mode: warm-up 0.3 s, search window 1 s, measurement window 1 s, 1 repeat; "
        "search from 20 req/s ×2 up to 40 req/s, 3 bisection steps; accuracy not run "
        "(--no-accuracy); idle power 0 s",
        # accuracy.limit 20 → 5 is in the record, but the suite does not run: not printed.
        "smoke mode replaced spec values: measurement.repeats 2 → 1; power.idle_s not set → 0",
    ]
    record = RunRecord.model_validate_json(out.read_text(encoding="utf-8"))
    assert record.mode == "smoke"
    assert record.mode_overrides == [
        ModeOverride(field="measurement.repeats", spec_value=2, effective_value=1),
        ModeOverride(field="accuracy.limit", spec_value=20, effective_value=5),
        ModeOverride(field="power.idle_s", spec_value=None, effective_value=0.0),
    ]
    assert record.spec.measurement.repeats == 1 and record.spec.accuracy.limit == 5
