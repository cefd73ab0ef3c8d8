"""Tables piped out of ``show`` and ``report`` keep one line per row.

Real ``python -m tokenwatt`` child processes with stdout, stderr and stdin off any terminal
and no ``COLUMNS``: rich alone would take 80 columns and wrap each row over several lines.
(The end-of-run table of ``collect`` is checked the same way in tests/sim/test_show.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.runs_factory import make_run, tuned_run

REPO = Path(__file__).resolve().parents[2]


def piped(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``tokenwatt ARGS`` with every standard stream a pipe (or /dev/null)."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    base["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "tokenwatt", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("│").split("│")]


def test_show_piped_keeps_each_window_on_one_line(tmp_path: Path) -> None:
    run = make_run()
    path = tmp_path / "run.json"
    path.write_text(run.model_dump_json(), encoding="utf-8")
    done = piped("show", str(path), "--wide", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "repeat 2" in line]
    assert len(lines) == 1, done.stdout
    w = run.repeats[1].window
    assert cells(lines[0]) == [
        "#7 repeat 2 of 2 at 9 req/s",
        "9",
        "9",
        str(w.requests),
        "0",
        "0",
        "113 / 340 / 340",
        "30.7 / 39.5 / 43.9",
        "- / - / -",
        "- / - / -",
        "4,544.6",
        "meets the SLO",
    ]
    assert len(lines[0]) > 80
    assert "\x1b" not in done.stdout  # no colour off a terminal


def test_show_piped_honours_an_explicit_columns(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(make_run().model_dump_json(), encoding="utf-8")
    done = piped("show", str(path), cwd=tmp_path, env={"COLUMNS": "60"})
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 60


def test_report_piped_keeps_each_configuration_on_one_line(tmp_path: Path) -> None:
    paths = []
    for run in (make_run(), tuned_run()):
        path = tmp_path / f"{run.label}.json"
        path.write_text(run.model_dump_json(), encoding="utf-8")
        paths.append(str(path))
    out = tmp_path / "r.json"
    args = ("report", *paths, "--title", "KV cache", "--out", str(out), "--wide")
    done = piped(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "vllm-fp8kv" in line and "│" in line]
    assert len(lines) == 1, done.stdout
    row = cells(lines[0])
    assert row[:2] == ["vllm-fp8kv", "tuned"]
    assert row[3] == "+10.6%"
