"""With one repeat there is no interval, and the terminal and the page say why, in the same
words (methods/uncertainty.md: one repeat has no spread to estimate)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from click.testing import CliRunner

from tests.runs_factory import make_run, tuned_run
from tokenwatt.cli import cli

ONE = {
    "repeat_goodputs": (4600.0,),
    "repeat_passes": (True,),
    "ttft_p99s": (320.0,),
    "tpot_p99s": (44.6,),
    "powers_w": (640.0,),
    "throttled": (100,),
}


def test_one_repeat_says_why_there_is_no_interval(tmp_path: Path) -> None:
    paths = []
    tuned = tuned_run(goodput=5100.0, **{**ONE, "repeat_goodputs": (5100.0,)})
    for run in (make_run(goodput=4600.0, **ONE), tuned):
        path = tmp_path / f"{run.label}.json"
        path.write_text(run.model_dump_json(), encoding="utf-8")
        paths.append(str(path))
    reports = tmp_path / "reports"
    args = ["report", *paths, "--title", "One", "--out", str(reports / "one.json")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "vllm-default" in line and "│" in line]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip().strip("│").split("│")]
    # The compact table: configuration, goodput, vs baseline (the baseline says so), …
    assert cells[1:3] == ["4,600.0 [no interval: 1 repeat]", "baseline"]
    data = json.loads(CliRunner().invoke(cli, [*args, "--force", "--json"]).output)
    assert data["configs"][0]["goodput_ci_tok_s"] is None
    docs = tmp_path / "docs"
    built = CliRunner().invoke(cli, ["build", "--reports", str(reports), "--out", str(docs)])
    assert built.exit_code == 0, built.output
    page = html.unescape(next(docs.rglob("one.md")).read_text(encoding="utf-8"))
    assert "| 4,600.0 (no interval: 1 repeat) |" in page
