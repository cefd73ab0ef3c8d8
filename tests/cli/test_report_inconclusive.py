"""``tokenwatt report`` with an inconclusive configuration: its table row and the
conclusion say inconclusive, and no goodput change of −100% is printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.runs_factory import make_run
from tests.site.test_inconclusive_page import MINUS_100, _unrepeated
from tokenwatt.cli import cli


def test_report_says_inconclusive_and_never_minus_100(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    names = []
    for run in (make_run(), _unrepeated()):
        path = tmp_path / "runs" / f"{run.label}.json"
        path.write_text(run.model_dump_json(indent=2), encoding="utf-8")
        names.append(f"runs/{path.name}")
    result = CliRunner().invoke(
        cli, ["report", *names, "--title", "KV test", "--demo"], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert not MINUS_100.search(out), out
    row = next(line for line in out.splitlines() if "vllm-fp8kv" in line and "│" in line)
    assert "inconclusive" in row
    assert "vllm-fp8kv is inconclusive (the boundary did not repeat" in " ".join(out.split())
