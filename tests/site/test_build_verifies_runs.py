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
from tokenwatt.records.run.run_input import RunInput
from tokenwatt.site.build import build_site
from tokenwatt.site.files.archive_audit import changed_runs


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


def test_a_run_deleted_from_the_archive_fails_the_build_but_one_never_shipped_does_not(
    tmp_path: Path,
) -> None:
    report = _archive(tmp_path)
    (tmp_path / "runs" / "vllm-default.json").unlink()
    (problem,) = changed_runs(report, tmp_path)
    assert (problem.file, problem.field) == (str(report), "run_files[0].sha256")
    assert problem.message.startswith("runs/vllm-default.json is missing from the archive")
    assert "tokenwatt erratum REPORT --run runs/vllm-default.json --text WHY" in problem.message
    # An archive of reports only (no runs/ folder) ships no run records: nothing to check.
    (tmp_path / "runs" / "vllm-fp8kv.json").unlink()
    (tmp_path / "runs").rmdir()
    assert changed_runs(report, tmp_path) == []


def _erratum(report: Path, *args: str) -> tuple[int, str]:
    from click.testing import CliRunner

    from tokenwatt.cli import cli

    done = CliRunner().invoke(cli, ["erratum", str(report), *args])
    return done.exit_code, done.output


def test_an_erratum_accepts_a_changed_run_and_the_page_says_so(tmp_path: Path) -> None:
    """`tokenwatt erratum` records the change (dated, with its reason, on the page); the
    build then accepts the run record as it is, and fails again if it changes once more."""
    report = _archive(tmp_path)
    run = tmp_path / "runs" / "vllm-fp8kv.json"
    run.write_text(run.read_text().replace('"label": "vllm-fp8kv"', '"label": "vllm-fp8kv" '))
    assert changed_runs(report, tmp_path)
    code, output = _erratum(report, "--run", "runs/vllm-fp8kv.json", "--text", "re-indented <b>")
    assert code == 0, output
    assert "accepts runs/vllm-fp8kv.json (SHA-256 " in output
    assert changed_runs(report, tmp_path) == []
    build_site(tmp_path / "reports", tmp_path / "docs")
    page = next((tmp_path / "docs" / "reports").glob("*.md")).read_text(encoding="utf-8")
    assert '!!! info "Update ' in page and "re&#45;indented &#60;b&#62;" in page
    run.write_text(run.read_text() + "\n")
    (problem,) = changed_runs(report, tmp_path)
    assert "has changed since the report was made" in problem.message
    # A second erratum, and then a removal, each accepted in turn.
    assert _erratum(report, "--run", "runs/vllm-fp8kv.json", "--text", "again")[0] == 0
    run.unlink()
    assert changed_runs(report, tmp_path)
    code, output = _erratum(report, "--run", "runs/vllm-fp8kv.json", "--text", "withdrawn")
    assert code == 0 and "(removed)" in output, output
    assert changed_runs(report, tmp_path) == []


def test_an_erratum_for_a_run_not_cited_or_not_changed_is_refused(tmp_path: Path) -> None:
    report = _archive(tmp_path)
    before = report.read_bytes()
    code, output = _erratum(report, "--run", "runs/other.json", "--text", "x")
    assert code == 2 and "--run: runs/other.json is not a run record" in output, output
    assert "runs/vllm-default.json, runs/vllm-fp8kv.json" in output
    code, output = _erratum(report, "--run", "runs/vllm-default.json", "--text", "x")
    assert code == 2 and "there is no change to record" in output, output
    assert report.read_bytes() == before


def test_an_erratum_through_a_symlinked_report_sees_the_archive_build_sees(tmp_path: Path) -> None:
    """The archive is the folder above the reports folder given, as for the build: a report
    that is a link to a file elsewhere gets an erratum about the run it cites here, and
    stays a link."""
    report = _archive(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    target = store / report.name
    report.rename(target)
    report.symlink_to(target)
    run = tmp_path / "runs" / "vllm-fp8kv.json"
    run.write_text(run.read_text() + "\n")
    code, output = _erratum(report, "--run", "runs/vllm-fp8kv.json", "--text", "  ")
    assert code == 2 and "--text: is blank" in output, output
    code, output = _erratum(report, "--run", "runs/vllm-fp8kv.json", "--text", "reformatted")
    assert code == 0 and "(removed)" not in output, output
    assert report.is_symlink() and changed_runs(report, tmp_path) == []
    run.unlink()
    run.mkdir()
    code, output = _erratum(report, "--run", "runs/vllm-fp8kv.json", "--text", "x")
    assert code == 2 and "is not a file" in output, output
