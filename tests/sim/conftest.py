"""Fixtures of the simulator tests: one ``tokenwatt collect`` run against ``tokenwatt sim``
that several modules read (``test_show.py``, ``test_latency_cdf.py``), made once per
session instead of once per module."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.sim.sim_process import REPO, SimRun, start_sim
from tokenwatt.records import RunRecord

SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"


@pytest.fixture(scope="session")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimRun]:
    """``collect`` on ``sim.spec.yaml`` against ``sim --profile fp8-kv --seed 0``, label
    ``sim-fp8``, written to ``sim-run.json``; read-only for the tests that use it.

    Piped and without ``COLUMNS``, as in CI or ``| less`` (``test_show.py`` checks that the
    table keeps whole rows).
    """
    out = tmp_path_factory.mktemp("sim-run") / "sim-run.json"
    sim = start_sim("--profile", "fp8-kv", "--seed", "0")
    try:
        cmd = [sys.executable, "-m", "tokenwatt", "collect", "--spec", str(SPEC)]
        cmd += ["--label", "sim-fp8", "--role", "baseline", "--out", str(out)]
        cmd += ["--endpoint", sim.endpoint, "--no-progress", "--no-accuracy"]
        cmd += ["--wide"]  # every column (the compact table: tests/cli/test_width.py)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["PYTHONPATH"] = str(REPO)
        done = subprocess.run(
            cmd,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    finally:
        sim.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    record = RunRecord.model_validate_json(out.read_text(encoding="utf-8"))
    yield SimRun(out, record, done.stdout)
