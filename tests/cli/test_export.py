"""``tokenwatt export``: every configuration of the 30-note archive as CSV and Parquet,
read back; bad input refused with exit 2 and nothing written."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests import archive_factory as factory
from tokenwatt import analysis
from tokenwatt.cli import cli


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("archive")
    factory.write_archive(root)
    return root


def _export(archive: Path, *outs: Path) -> object:
    args = ["export", "--reports", str(archive / "reports")]
    for out in outs:
        args += ["--out", str(out)]
    return CliRunner().invoke(cli, args)


def test_csv_and_parquet_hold_every_configuration(archive: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    csv_path, parquet_path = tmp_path / "a.csv", tmp_path / "a.parquet"
    result = _export(archive, csv_path, parquet_path)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    expected = analysis.archive_rows(factory.report(n, i) for i, n in enumerate(factory.notes()))
    with csv_path.open(encoding="utf-8", newline="") as f:
        lines = list(csv.DictReader(f))
    table = pq.read_table(parquet_path).to_pylist()
    assert len(lines) == len(table) == len(expected) == 62
    assert list(lines[0]) == list(analysis.COLUMNS)
    by_csv = {(r["note"], r["config"]): r for r in lines}
    by_pq = {(r["note"], r["config"]): r for r in table}
    for row in expected:
        key = (row.note, row.config)
        assert by_pq[key]["goodput_per_card"] == pytest.approx(row.goodput_per_card)
        cell = by_csv[key]["goodput_per_card"]
        assert (float(cell) if cell else None) == pytest.approx(row.goodput_per_card)
        assert by_pq[key]["frontier_goodput"] is row.frontier_goodput
        assert by_csv[key]["frontier_goodput"] == str(row.frontier_goodput)
        assert by_pq[key]["fingerprint"] == row.fingerprint
    gatefail = by_pq[("a-two", "a-gatefail")]
    assert (gatefail["gate"], gatefail["frontier_goodput"]) == ("fail", False)
    # Missing figures are nulls in Parquet and empty cells in CSV, never 0 or NaN.
    inconc = by_pq[("a-three", "a-inconc")]
    assert inconc["tpot_p99_ms"] is None and inconc["goodput_low"] is None
    assert by_csv[("a-three", "a-inconc")]["tpot_p99_ms"] == ""
    assert not any(isinstance(v, float) and math.isnan(v) for r in table for v in r.values())


def test_parquet_columns_are_typed(archive: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "t.parquet"
    assert _export(archive, out).exit_code == 0  # type: ignore[attr-defined]
    schema = pq.read_schema(out)
    assert str(schema.field("cards").type) == "int64"
    assert str(schema.field("demo").type) == "bool"
    assert str(schema.field("goodput_low").type) == "double"
    assert str(schema.field("mode").type) == "string"


def test_an_unknown_suffix_is_refused_before_anything_is_written(
    archive: Path, tmp_path: Path
) -> None:
    good, bad = tmp_path / "a.csv", tmp_path / "a.xlsx"
    result = _export(archive, good, bad)
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert f"{bad}: --out: must end in .csv or .parquet" in result.output  # type: ignore[attr-defined]
    assert not good.exists() and not bad.exists()


def test_a_bad_report_names_its_file_and_field_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "arch"
    factory.write_archive(root, fillers=1)
    broken = root / "reports" / "a-one.json"
    broken.write_text(
        broken.read_text(encoding="utf-8").replace('"title": "Demo', '"title": 7, "x": "'),
        encoding="utf-8",
    )
    out = tmp_path / "a.csv"
    result = _export(root, out)
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert str(broken) in result.output and "title" in result.output  # type: ignore[attr-defined]
    assert not out.exists()


def test_two_reports_with_one_id_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "arch"
    factory.write_archive(root, fillers=0)
    twin = root / "reports" / "twin.json"
    twin.write_bytes((root / "reports" / "a-one.json").read_bytes())
    out = tmp_path / "a.csv"
    result = _export(root, out)
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert f"{twin}: id: the id 'a-one' is already used by" in result.output  # type: ignore[attr-defined]
    assert not out.exists()


def test_one_target_that_cannot_be_written_writes_no_other(archive: Path, tmp_path: Path) -> None:
    good, bad = tmp_path / "a.csv", tmp_path / "missing" / "a.parquet"
    result = _export(archive, good, bad)
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert f"{bad}: --out: its folder {bad.parent} does not exist" in result.output  # type: ignore[attr-defined]
    assert not good.exists()


def test_rows_say_which_notes_are_simulated_and_retracted_notes_leave_the_frontier(
    tmp_path: Path,
) -> None:
    reports = factory.write_archive(tmp_path, fillers=0)
    rows = analysis.archive_rows(reports)
    assert all(r.simulated for r in rows)
    a_one = next(r for r in reports if r.id == "a-one")
    a_one.status = "retracted"
    again = {r.config: r for r in analysis.archive_rows(reports)}
    assert not again["a-base"].frontier_goodput and not again["a-fast"].frontier_goodput
    # Without a-one's points, a-thin (40, 500) beats a-base2 (20, 400) and a-base3 alone.
    on = {c for c, r in again.items() if r.model == "model-a" and r.frontier_goodput}
    assert on == {"a-thin"}
