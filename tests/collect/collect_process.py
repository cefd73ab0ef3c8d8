"""`tokenwatt collect` as a real child process against the scripted engine: a spec pointed
at it, the process started, waited on and finished (bounded), for the tests that send it
signals or faults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from tokenwatt.records import load_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_engine import MODEL

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
"""Upper bound on any wait here (s): about the machine, not the tool."""


def write_spec(
    tmp_path: Path,
    endpoint: str,
    *,
    warmup_s: float = 0.2,
    window_s: float = 3.0,
    power: dict[str, object] | None = None,
) -> Path:
    """sim.spec.yaml pointed at ``endpoint``: short windows, a search from 20 to 40 req/s."""
    data = load_spec(REPO / "tests" / "fixtures" / "sim.spec.yaml").model_dump(mode="json")
    data["hardware"]["adapter"] = "none"
    data["engine"].update(endpoint=endpoint, model=MODEL)
    data["measurement"].update(
        warmup_s=warmup_s, window_s=window_s, search_window_s=window_s, request_timeout_s=5.0
    )
    data["sweep"].update(start_rps=20.0, max_rps=40.0)
    data["power"] = power or {"source": "none"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def start_collect(spec: Path, out: Path) -> subprocess.Popen[str]:
    """``python -m tokenwatt collect`` on ``spec``, writing ``out``, without accuracy."""
    cmd = [
        sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec), "--label", "proc",
        "--role", "baseline", "--out", str(out), "--no-accuracy", "--no-progress",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env
    )


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    """Poll ``predicate`` until true, at most :data:`WAIT_S`; fail if the process ends first."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if predicate():
            return
        time.sleep(0.05)
    if proc.poll() is not None:
        _, err = proc.communicate()
        raise AssertionError(f"the collector ended early ({proc.returncode}): {err[-2000:]}")
    raise AssertionError("the collector did not get there in time")


def finish(proc: subprocess.Popen[str]) -> str:
    """Wait for the process (killed after :data:`WAIT_S`); its standard error."""
    try:
        _, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return stderr


def probes(out: Path) -> int:
    """Probes in the checkpointed record (0 before the first checkpoint)."""
    return len(json.loads(out.read_text())["probes"]) if out.exists() else 0
