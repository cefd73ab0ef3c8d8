"""``tokenwatt replicate`` refusing what it cannot measure, before measuring: labels that
are no file names, a mistyped --archive, a missing --config; nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests import archive_factory as factory
from tokenwatt.cli import cli


def _archive(tmp_path: Path, label: str = "a-base") -> Path:
    root = tmp_path / "arch"
    factory.write_archive(root, fillers=0)
    path = root / "reports" / "a-one.json"
    data = json.loads(path.read_text("utf-8"))
    data["configs"][0]["label"] = label
    path.write_text(json.dumps(data), "utf-8")
    return root


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def test_a_label_with_a_path_in_it_writes_nothing_outside_the_archive(tmp_path: Path) -> None:
    root = _archive(tmp_path, "../../../../escaped")
    before = _files(tmp_path)
    result = CliRunner().invoke(
        cli,
        ["replicate", str(root / "reports" / "a-one.json"), "--config", "../../../../escaped",
         "--endpoint", "http://127.0.0.1:1/v1", "--no-progress"],
    )  # fmt: skip
    assert result.exit_code in (1, 2), result.output
    # Nothing new anywhere: no run record, no spec beside the original, no empty folders.
    assert _files(tmp_path) == before


def test_an_archive_that_does_not_hold_the_report_is_refused(tmp_path: Path) -> None:
    root = _archive(tmp_path)
    typo = tmp_path / "typo"
    result = CliRunner().invoke(
        cli,
        ["replicate", str(root / "reports" / "a-one.json"), "--config", "a-base",
         "--archive", str(typo)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert f"{typo}: --archive: does not hold" in result.output
    assert not typo.exists()


def test_several_configurations_need_config(tmp_path: Path) -> None:
    root = _archive(tmp_path)
    report = root / "reports" / "a-one.json"
    result = CliRunner().invoke(cli, ["replicate", str(report)])
    assert result.exit_code == 2
    assert (
        f"{report}: --config: the report has 3 configurations: pass --config LABEL, one of "
        "a-base, a-fast, a-mid"
    ) in result.output


def test_a_problem_in_the_reports_spec_names_the_report_not_a_temporary_file(
    tmp_path: Path,
) -> None:
    root = _archive(tmp_path)
    report = root / "reports" / "a-one.json"
    data = json.loads(report.read_text("utf-8"))
    data["spec"]["accuracy"]["suite"] = "suites/not-here.jsonl"  # a suite this archive lacks
    report.write_text(json.dumps(data), "utf-8")
    result = CliRunner().invoke(
        cli,
        ["replicate", str(report), "--config", "a-base", "--endpoint", "http://127.0.0.1:1/v1",
         "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"{report} (the spec of a-base)" in result.output
    assert "accuracy.suite" in result.output and "not-here.jsonl" in result.output
    assert ".a-one--" not in result.output  # the temporary spec beside the original
    assert "replicating" not in result.output  # refused before the run is announced
    assert not list(root.rglob(".a-one--*"))
