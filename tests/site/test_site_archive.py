"""The site across notes: the frontier page over a 30-note archive, and a note's
replications (section, index mark, trend chart), built by the real ``build_site``."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from tests import archive_factory as factory
from tokenwatt import analysis
from tokenwatt.errors import RecordError
from tokenwatt.records import ReplicationV1, ReportV3
from tokenwatt.site.build import build_site


def replication(rec: ReportV3, label: str, goodput: float, day: int, version: str) -> ReplicationV1:
    """A replication of ``label`` of ``rec`` that measured ``goodput`` (tok/s) with engine
    ``version``, ``day`` days after 2026-12-01."""
    old = next(c for c in rec.configs if c.label == label)
    note = factory.Note(
        "x",
        rec.model.name,
        "SIM H100",
        1,
        "tokenwatt-sim",
        version,
        (factory.Cfg(label, goodput, old.tpot_p99_ms),),
    )  # type: ignore[arg-type]
    new = factory.report(note).configs[0]
    new.settings = {**new.settings, "engine_version": version}
    checks = analysis.replication_checks(old, new)
    return ReplicationV1(
        report_id=rec.id,
        report_sha256="0" * 64,
        config=label,
        measured_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC) + dt.timedelta(days=day),
        run_file=f"runs/replications/{rec.id}--{label}--{day}.json",
        run_sha256="1" * 64,
        command=f"tokenwatt replicate reports/{rec.id}.json --config {label}",
        fingerprint="f" * 16,
        changed_settings=analysis.changed_settings(old.settings, new.settings),
        measured=new,
        figures=checks,
        verdict=analysis.replication_verdict(checks),
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, bundle_cache: Path) -> Path:
    import shutil

    root = tmp_path_factory.mktemp("archive-site")
    reports = factory.write_archive(root)
    a_one = next(r for r in reports if r.id == "a-one")
    folder = root / "replications"
    folder.mkdir()
    # Three replications of a-base: the same, the same, then under a third of the goodput.
    for day, (goodput, version) in enumerate([(1000, "0.1"), (1005, "0.2"), (300, "0.3")]):
        rep = replication(a_one, "a-base", goodput, day, version)
        (folder / f"a-one--a-base--{day}.json").write_text(rep.model_dump_json(), "utf-8")
    cache = root / "cache"
    shutil.copytree(bundle_cache, cache)
    build_site(root / "reports", root / "docs", cache_dir=cache)
    return root / "docs"


def test_frontier_page_tables_hold_the_hand_computed_frontier(site: Path) -> None:
    page = (site / "frontier.md").read_text(encoding="utf-8")
    assert "62 points from 30 notes" in page
    for (model, hardware), configs in factory.EXPECTED_FRONTIER.items():
        heading = f"## {model.replace('-', '&#45;')} on {hardware}"
        start = page.index(heading)
        end = page.find("\n## ", start + 1)
        section = page[start : end if end > 0 else None]
        shown = set(re.findall(r"\| ([ab]&#45;[a-z0-9]+) \|", section))
        assert {s.replace("&#45;", "-") for s in shown} == configs, section


def test_frontier_chart_carries_every_point_and_the_filters(site: Path) -> None:
    page = (site / "frontier.md").read_text(encoding="utf-8")
    blob = page.split('<script type="application/json" id="tw-spec-frontier">')[1]
    spec = json.loads(blob.split("</script>")[0])
    rows = spec["datasets"]["rows"]
    assert len(rows) == 62
    names = {p["name"] for p in spec["params"]}
    assert names == {
        "view",
        "f_model",
        "f_hardware",
        "f_engine",
        "f_engine_version",
        "f_precision",
        "f_note",
    }
    model = next(p for p in spec["params"] if p["name"] == "f_model")
    assert model["bind"]["options"][:3] == ["all", "model-a", "model-b"]
    gatefail = next(r for r in rows if r["config"] == "a-gatefail")
    assert (gatefail["eligible"], gatefail["standing"]) == (False, "gate failed")
    assert gatefail["href"] == "../reports/a-two/"


def test_a_note_shows_its_replications_newest_first(site: Path) -> None:
    page = (site / "reports" / "a-one.md").read_text(encoding="utf-8")
    section = page[page.index("## Replications") : page.index("## Charts")]
    found = re.findall(
        r"### (2026&#45;12&#45;0\d) 00&#58;00 UTC: a&#45;base, (\*\*disagrees\*\*|agrees)", section
    )
    dates = [(d.replace("&#45;", "-"), v) for d, v in found]
    assert dates == [
        ("2026-12-03", "**disagrees**"),
        ("2026-12-02", "agrees"),
        ("2026-12-01", "agrees"),
    ]
    assert "**disagrees** (SLO goodput &#40;tok/s&#41;, tokens per joule" in section
    assert section.count("Settings that differ: Engine version.") == 2  # not the first


def test_the_index_marks_the_note_whose_latest_replication_disagrees(site: Path) -> None:
    index = (site / "index.md").read_text(encoding="utf-8")
    line = next(x for x in index.splitlines() if "(reports/a-one.md)" in x)
    assert "**replication disagrees**" in line
    other = next(x for x in index.splitlines() if "(reports/a-two.md)" in x)
    assert "replication" not in other


def test_trends_draw_from_the_replications(site: Path) -> None:
    page = (site / "reports" / "a-one.md").read_text(encoding="utf-8")
    blob = page.split('<script type="application/json" id="tw-spec-trends">')[1]
    rows = json.loads(blob.split("</script>")[0])["datasets"]["rows"]
    goodput = [r for r in rows if r["figure"] == "SLO goodput (tok/s)"]
    assert [(r["date"], r["value"], r["version"]) for r in goodput] == [
        ("2026-11-01", 1000.0, "0.1"),
        ("2026-12-01", 1000.0, "0.1"),
        ("2026-12-02", 1005.0, "0.2"),
        ("2026-12-03", 300.0, "0.3"),
    ]
    assert all(r["low"] is not None for r in goodput)
    assert "tw-spec-trends" not in (site / "reports" / "a-two.md").read_text(encoding="utf-8")


def test_a_replication_of_no_report_fails_the_build(tmp_path: Path, cache_dir: Path) -> None:
    factory.write_archive(tmp_path, fillers=0)
    rec = factory.report(factory.notes(0)[0])
    rep = replication(rec, "a-base", 1000, 0, "0.1").model_copy(update={"report_id": "gone"})
    (tmp_path / "replications").mkdir()
    path = tmp_path / "replications" / "r.json"
    path.write_text(rep.model_dump_json(), "utf-8")
    with pytest.raises(RecordError) as err:
        build_site(tmp_path / "reports", tmp_path / "docs", cache_dir=cache_dir)
    assert [(p.file, p.field) for p in err.value.problems] == [(str(path), "report_id")]
    assert not (tmp_path / "docs").exists()


def test_an_invalid_replication_names_its_file_and_field(tmp_path: Path, cache_dir: Path) -> None:
    factory.write_archive(tmp_path, fillers=0)
    rec = factory.report(factory.notes(0)[0])
    data = json.loads(replication(rec, "a-base", 1000, 0, "0.1").model_dump_json())
    data["verdict"] = "maybe"
    (tmp_path / "replications").mkdir()
    path = tmp_path / "replications" / "r.json"
    path.write_text(json.dumps(data), "utf-8")
    with pytest.raises(RecordError) as err:
        build_site(tmp_path / "reports", tmp_path / "docs", cache_dir=cache_dir)
    assert [(p.file, p.field) for p in err.value.problems] == [(str(path), "verdict")]


def test_notes_of_one_fingerprint_draw_one_trend(tmp_path: Path, cache_dir: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    for day, (note_id, version, goodput) in enumerate(
        [("t-old", "0.1", 1000.0), ("t-new", "0.2", 800.0)]
    ):
        note = factory.Note(
            note_id,
            "model-t",
            "SIM H100",
            1,
            "tokenwatt-sim",
            version,
            (factory.Cfg("t-cfg", goodput, 40),),
        )
        rec = factory.report(note, day)
        (folder / f"{note_id}.json").write_text(rec.model_dump_json(), "utf-8")
    other = factory.Note(
        "t-else",
        "model-u",
        "SIM H100",
        1,
        "tokenwatt-sim",
        "0.1",
        (factory.Cfg("t-cfg", 500.0, 40),),
    )  # another model: another spec
    (folder / "t-else.json").write_text(factory.report(other).model_dump_json(), "utf-8")
    build_site(folder, tmp_path / "docs", cache_dir=cache_dir)
    for note_id in ("t-old", "t-new"):
        page = (tmp_path / "docs" / "reports" / f"{note_id}.md").read_text("utf-8")
        assert "tokenwatt: trends" not in page
        blob = page.split('<script type="application/json" id="tw-spec-trends">')[1]
        rows = json.loads(blob.split("</script>")[0])["datasets"]["rows"]
        goodput = [r for r in rows if r["figure"] == "SLO goodput (tok/s)"]
        assert [(r["date"], r["value"], r["version"]) for r in goodput] == [
            ("2026-11-01", 1000.0, "0.1"),
            ("2026-11-02", 800.0, "0.2"),
        ]
    alone = (tmp_path / "docs" / "reports" / "t-else.md").read_text("utf-8")
    assert "tw-spec-trends" not in alone and "tokenwatt: trends" not in alone


def test_the_build_and_the_page_name_one_trend_marker() -> None:
    from tokenwatt.site.build import TREND_MARKER_TEXT
    from tokenwatt.site.pages.replications import TREND_MARKER

    assert str(TREND_MARKER) == TREND_MARKER_TEXT


def _one_replication(tmp_path: Path, **changes: object) -> Path:
    """An archive of the five group notes and one replication of a-one's a-base with
    ``changes`` applied to the record's JSON (dotted keys reach into ``measured``)."""
    factory.write_archive(tmp_path, fillers=0)
    rec = factory.report(factory.notes(0)[0])
    data = json.loads(replication(rec, "a-base", 300, 0, "0.1").model_dump_json())
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    (tmp_path / "replications").mkdir()
    path = tmp_path / "replications" / "r.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


def _problems(tmp_path: Path, cache_dir: Path) -> list[tuple[str, str]]:
    with pytest.raises(RecordError) as err:
        build_site(tmp_path / "reports", tmp_path / "docs", cache_dir=cache_dir)
    assert not (tmp_path / "docs").exists()
    return [(p.file, p.field) for p in err.value.problems]


def test_a_replication_of_an_unknown_configuration_fails_the_build(
    tmp_path: Path, cache_dir: Path
) -> None:
    path = _one_replication(tmp_path, config="no-such-label")
    assert _problems(tmp_path, cache_dir) == [(str(path), "config")]


def test_a_simulated_replication_of_a_note_that_is_no_demo_fails_the_build(
    tmp_path: Path, cache_dir: Path
) -> None:
    path = _one_replication(tmp_path, **{"measured.simulated": True})
    report = tmp_path / "reports" / "a-one.json"
    data = json.loads(report.read_text("utf-8"))
    data["demo"] = False
    for cfg in data["configs"]:
        cfg["simulated"] = False
    data["simulated"] = False
    report.write_text(json.dumps(data), "utf-8")
    assert (str(path), "measured.simulated") in _problems(tmp_path, cache_dir)


def test_a_replication_whose_run_record_changed_fails_the_build(
    tmp_path: Path, cache_dir: Path
) -> None:
    path = _one_replication(tmp_path)
    run = tmp_path / "runs" / "replications" / "a-one--a-base--0.json"
    run.parent.mkdir(parents=True)
    run.write_text("{}", "utf-8")  # not the record whose SHA-256 the replication keeps
    problems = [p for p in _problems(tmp_path, cache_dir) if p[0] == str(path)]
    assert problems == [(str(path), "run_sha256")]


def test_an_incomplete_replication_judges_nothing(tmp_path: Path, cache_dir: Path) -> None:
    _one_replication(
        tmp_path, **{"measured.complete": False, "measured.incomplete_reason": "Ctrl-C"}
    )
    build_site(tmp_path / "reports", tmp_path / "docs", cache_dir=cache_dir)
    page = (tmp_path / "docs" / "reports" / "a-one.md").read_text("utf-8")
    section = page[page.index("## Replications") : page.index("## Charts")]
    assert ", inconclusive" in section and "disagree" not in section
    assert "the replication&#39;s run is incomplete &#40;Ctrl&#45;C&#41;" in section


def test_replications_without_an_offset_order_with_those_with_one(
    tmp_path: Path, cache_dir: Path
) -> None:
    _one_replication(tmp_path, measured_at="2026-12-05T00:00:00")
    rec = factory.report(factory.notes(0)[0])
    other = replication(rec, "a-base", 1000, 0, "0.1")
    (tmp_path / "replications" / "s.json").write_text(other.model_dump_json(), "utf-8")
    build_site(tmp_path / "reports", tmp_path / "docs", cache_dir=cache_dir)
    index = (tmp_path / "docs" / "index.md").read_text("utf-8")
    assert "**replication disagrees**" in index  # the later (naive, 12-05) one is the latest


def test_a_file_in_place_of_the_replications_folder_fails_the_build(
    tmp_path: Path, cache_dir: Path
) -> None:
    factory.write_archive(tmp_path, fillers=0)
    (tmp_path / "replications").write_text("", "utf-8")
    assert _problems(tmp_path, cache_dir) == [(str(tmp_path / "replications"), "")]
