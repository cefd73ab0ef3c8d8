"""End to end: ``python -m tokenwatt build`` with bad records exits 2, names every problem
as ``file: field: message``, and leaves the previously built docs folder untouched."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs_factory import make_run, tuned_run

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "tests" / "fixtures" / "seed.report.json"


def _tokenwatt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tokenwatt", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A work folder whose reports/ (the seed, and a report made by `tokenwatt report`)
    has been built into docs/."""
    work = tmp_path_factory.mktemp("e2e")
    (work / "reports").mkdir()
    (work / "reports" / "lab-h100-seed.json").write_bytes(SEED.read_bytes())
    runs = work / "runs"
    runs.mkdir()
    for run in (make_run(), tuned_run()):
        (runs / f"{run.label}.json").write_text(run.model_dump_json(), encoding="utf-8")
    made = _tokenwatt(
        "report",
        "runs/vllm-default.json",
        "runs/vllm-fp8kv.json",
        "--title",
        "From runs",
        "--id",
        "from-runs",
        cwd=work,
    )
    assert made.returncode == 0, made.stderr
    first = _tokenwatt("build", cwd=work)
    assert first.returncode == 0, first.stderr
    assert (work / "docs" / "index.md").is_file()
    return work


def test_report_from_runs_is_built_into_a_page(built: Path) -> None:
    pages = [p.name for p in (built / "docs").rglob("*.md")]
    assert any("from-runs" in name for name in pages), pages
    check = _tokenwatt("build", "--check", cwd=built)
    assert check.returncode == 0, check.stderr


def test_bad_records_exit_2_with_one_line_each_and_docs_untouched(built: Path) -> None:
    before = _tree(built / "docs")
    reports = built / "reports"
    seed = json.loads(SEED.read_text(encoding="utf-8"))
    bad_power = {**seed, "id": "bad-power"}
    bad_power["configs"] = [dict(c) for c in seed["configs"]]
    bad_power["configs"][1]["node_power_kw"] = -0.616
    two_base = {**seed, "id": "two-base", "schema_version": 2}
    two_base["configs"] = [{**c, "role": "baseline"} for c in seed["configs"]]
    bad = {
        "bad-power.json": json.dumps(bad_power),
        "two-base.json": json.dumps(two_base),
        "nan.json": SEED.read_text("utf-8").replace('"goodput_tok_s": 4572.3', '"x": NaN'),
        "unknown.json": json.dumps({**seed, "id": "unknown", "colour": "red"}),
    }
    for name, text in bad.items():
        (reports / name).write_text(text, encoding="utf-8")
    try:
        result = _tokenwatt("build", cwd=built)
    finally:
        for name in bad:
            (reports / name).unlink()
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    line_format = re.compile(r"^error: reports/[\w.-]+\.json: ([\w.\[\]]+: )?\S.*$")
    assert errors and all(line_format.match(line) for line in errors), errors
    expected = [
        "error: reports/bad-power.json: configs[1].node_power_kw: must be greater than 0",
        "error: reports/two-base.json: configs[1].role: a second baseline",
        "error: reports/nan.json: not valid JSON (line 58): NaN is not a number JSON allows",
        "error: reports/unknown.json: colour: unknown field",
    ]
    for start in expected:
        assert sum(1 for line in errors if line.startswith(start)) == 1, (start, errors)
    assert len(errors) == len(expected)
    assert _tree(built / "docs") == before
    assert not [p for p in built.iterdir() if p.name.startswith(".tokenwatt-build-")]
    # and the good records still build once the bad ones are gone
    again = _tokenwatt("build", "--check", cwd=built)
    assert again.returncode == 0, again.stderr
