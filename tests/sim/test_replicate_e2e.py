"""``tokenwatt replicate`` end to end on the simulator: a note made by ``collect`` and
``report`` is measured again; the replication agrees when nothing changed, and disagrees,
naming the figure, when the engine was restarted slower (``--time-scale 3``: every step
three times as long). The site then shows both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.sim.sim_process import REPO, start_sim
from tokenwatt.records import ReplicationV1


def _tokenwatt(root: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "tokenwatt", *args],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _spec(root: Path) -> Path:
    data = yaml.safe_load((REPO / "tests" / "fixtures" / "sim.spec.yaml").read_text("utf-8"))
    data["measurement"]["repeats"] = 3  # intervals need repeats: three, in full mode
    data["power"]["idle_s"] = 0
    (root / "specs").mkdir()
    path = root / "specs" / "sim.spec.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    shutil.copy2(REPO / "specs" / "sim-suite.jsonl", root / "specs" / "sim-suite.jsonl")
    return path


def test_replications_agree_then_disagree_when_the_engine_slowed(tmp_path: Path) -> None:
    root = tmp_path
    _spec(root)
    sim = start_sim("--seed", "0")
    try:
        done = _tokenwatt(
            root,
            "collect",
            "--spec",
            "specs/sim.spec.yaml",
            "--label",
            "sim-base",
            "--role",
            "baseline",
            "--mode",
            "full",
            "--out",
            "runs/sim-base.json",
            "--endpoint",
            sim.endpoint,
            "--no-progress",
            "--no-accuracy",
        )
        assert done.returncode == 0, done.stdout + done.stderr
        done = _tokenwatt(root, "report", "runs/sim-base.json", "--title", "Sim note", "--demo")
        assert done.returncode == 0, done.stdout + done.stderr
        published = (root / "reports" / "sim-note.json").read_bytes()
        same = _tokenwatt(
            root,
            "replicate",
            "reports/sim-note.json",
            "--endpoint",
            sim.endpoint,
            "--no-progress",
        )
    finally:
        sim.stop()
    assert same.returncode == 0, same.stdout + same.stderr
    assert "replication agrees" in same.stdout, same.stdout
    slow = start_sim("--seed", "0", "--time-scale", "3")
    try:
        changed = _tokenwatt(
            root,
            "replicate",
            "reports/sim-note.json",
            "--endpoint",
            slow.endpoint,
            "--no-progress",
        )
    finally:
        slow.stop()
    assert changed.returncode == 3, changed.stdout + changed.stderr
    assert "SLO goodput (tok/s): published" in changed.stdout
    assert "→ disagree" in changed.stdout and "replication disagrees" in changed.stdout
    records = sorted((root / "replications").glob("*.json"))
    reps = [ReplicationV1.model_validate_json(p.read_text("utf-8")) for p in records]
    assert [r.verdict for r in sorted(reps, key=lambda r: r.measured_at)] == [
        "agrees",
        "disagrees",
    ]
    for rep in reps:  # each cites its own run record, which the archive keeps
        assert (root / rep.run_file).is_file() and rep.config == "sim-base"
    # No temporary spec is left beside the original.
    assert sorted(p.name for p in (root / "specs").iterdir()) == [
        "sim-suite.jsonl",
        "sim.spec.yaml",
    ]
    # The original report is unchanged, and the site shows both replications.
    assert (root / "reports" / "sim-note.json").read_bytes() == published
    built = _tokenwatt(root, "build", "--out", "docs")
    assert built.returncode == 0, built.stdout + built.stderr
    page = (root / "docs" / "reports" / "sim-note.md").read_text("utf-8")
    assert page.count("### 20") >= 2 and "**disagrees** (SLO goodput" in page
    index = (root / "docs" / "index.md").read_text("utf-8")
    assert "**replication disagrees**" in index
