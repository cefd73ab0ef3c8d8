"""`tokenwatt build` checks every run record a report cites against the SHA-256 the report
keeps: a run edited after `report` fails the build naming the report, the run and the fix;
one left as it was, or not shipped, builds."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis import summarise
from tokenwatt.errors import RecordError
from tokenwatt.records.run_input import RunInput
from tokenwatt.site.build import build_site, changed_runs


def _archive(root: Path) -> Path:
    """runs/ with two run records and reports/ with the report made from them."""
    (root / "runs").mkdir()
    (root / "reports").mkdir()
    inputs = []
    for run in (make_run(), tuned_run()):
        path = root / "runs" / f"{run.label}.json"
        path.write_text(run.model_dump_json(indent=2), encoding="utf-8")
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        inputs.append(RunInput(f"runs/{run.label}.json", sha, run))
    report = summarise(inputs, title="Verified")
    out = root / "reports" / f"{report.id}.json"
    out.write_text(report.model_dump_json(indent=2), encoding="utf-8")
    return out


def test_an_unchanged_archive_builds_and_an_edited_run_fails_the_build(tmp_path: Path) -> None:
    report = _archive(tmp_path)
    assert changed_runs(report, tmp_path) == []
    build_site(tmp_path / "reports", tmp_path / "docs")
    run = tmp_path / "runs" / "vllm-fp8kv.json"
    run.write_text(run.read_text().replace('"goodput_tok_s": 5056.9', '"goodput_tok_s": 2528.4'))
    with pytest.raises(RecordError) as info:
        build_site(tmp_path / "reports", tmp_path / "docs")
    (problem,) = info.value.problems
    assert (problem.file, problem.field) == (str(report), "run_files[1].sha256")
    assert problem.message.startswith("runs/vllm-fp8kv.json has changed since the report")
    assert "make the report again from the run records (tokenwatt report)" in problem.message


def test_a_cited_run_that_is_not_shipped_is_no_problem_here(tmp_path: Path) -> None:
    report = _archive(tmp_path)
    (tmp_path / "runs" / "vllm-default.json").unlink()
    assert changed_runs(report, tmp_path) == []
