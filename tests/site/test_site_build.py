"""tokenwatt build on the seed record: pages, numbers, errata, determinism, swap, --check."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from sitecase import (
    SEED_RECORD,
    rich_data,
    seed_data,
    tree,
    write_record,
)

from tokenwatt.cli import cli
from tokenwatt.errors import InputError, RecordError, StaleSiteError
from tokenwatt.site.build import build_site

SEED_PAGE = "reports/lab-h100-qwen3-30b-a3b-kv-cache.md"


def text_of(page: bytes) -> str:
    """The page's Markdown with character references turned back into characters."""
    return html.unescape(page.decode("utf-8"))


def test_seed_builds_every_page(seed_reports: Path, tmp_path: Path, cache_dir: Path) -> None:
    docs = tmp_path / "docs"
    result = build_site(seed_reports, docs, cache_dir=cache_dir)
    files = tree(docs)
    assert result.pages == 1
    assert result.warnings == []
    for name in (
        "index.md",
        SEED_PAGE,
        "schemas.md",
        "schemas/report.schema.json",
        "methods/goodput.md",
        "methods/energy.md",
        "methods/accuracy-gate.md",
        "methods/capacity.md",
        "methods/mbu.md",
        "assets/javascripts/vega-bundle.js",
        "assets/javascripts/tokenwatt-charts.js",
        "assets/stylesheets/tokenwatt.css",
    ):
        assert name in files, name
    # The raw record is the file itself, byte for byte.
    assert files["reports/lab-h100-qwen3-30b-a3b-kv-cache.json"] == SEED_RECORD.read_bytes()
    assert b"window.vegaEmbed" in files["assets/javascripts/vega-bundle.js"]


def test_seed_page_shows_recomputed_numbers_and_conclusion(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    page = text_of((docs / SEED_PAGE).read_bytes())
    # The headline comes as two tables (throughput, then latency and accuracy): join each
    # configuration's first two rows.
    parts: dict[str, list[str]] = {}
    for line in page.splitlines():
        if line.startswith("| vllm-"):
            parts.setdefault(line.split("|")[1].strip(), []).append(line)
    rows = {name: " ".join(lines[:2]) for name, lines in parts.items()}
    assert "| 7.18 |" in rows["vllm-default"]
    assert "| 8.21 |" in rows["vllm-fp8kv"]
    assert "| +10.6% |" in rows["vllm-fp8kv"]
    assert "| 4,572.3 |" in rows["vllm-default"]
    assert "| 637 |" in rows["vllm-default"]
    assert "−8.0 pts" in rows["vllm-fp8kv"]
    assert "✗ fail" in rows["vllm-fp8kv"]
    assert "| 2 / 2 |" in rows["vllm-fp8kv"]
    assert (
        "vllm-fp8kv (+10.6% goodput) earns no capacity saving because it failed the accuracy "
        "gate by 8.0 points against a 1.0-point threshold."
    ) in page
    # Capacity table: the gain is shown, 58 cards would do, but 0 are saved.
    assert "| vllm-fp8kv | +10.6% | 58 | 0 | no: failed the accuracy gate |" in page
    assert "199 of 240 samples (83%)" in page
    for section in ("## Setup", "### Hardware", "### Workload", "### SLO", "### Power"):
        assert section in page
    assert "### Accuracy suite" in page
    assert "## Reproduce" in page and "```sh\ntokenwatt run --spec" in page
    assert "- Whole-node power (cloud VM: no BMC access)" in page
    assert "(lab-h100-qwen3-30b-a3b-kv-cache.json)" in page
    assert "(../methods/mbu.md)" in page


def test_errata_notice_comes_first(seed_reports: Path, tmp_path: Path, cache_dir: Path) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    page = text_of((docs / SEED_PAGE).read_bytes())
    notice = page.index('!!! info "Update 2026-10-07"')
    assert notice < page.index("## Results")
    body = page[notice : page.index("\n\n", notice)]
    assert "3,996 tok/s" in body
    assert "4.0 points on 600 GSM8K samples" in body


def test_index_lists_newest_first_and_marks_drafts(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    write_record(seed_reports, rich_data())
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    index = text_of((docs / "index.md").read_bytes())
    rich = index.index("(reports/rich-v2-detail.md)")
    seed = index.index("(reports/lab-h100-qwen3-30b-a3b-kv-cache.md)")
    assert rich < seed  # 2026-11-01 before 2026-10-06
    seed_row = next(line for line in index.splitlines() if "lab-h100" in line)
    rich_row = next(line for line in index.splitlines() if "rich-v2" in line)
    assert "**Draft**" in seed_row
    assert "**Draft**" not in rich_row and "Published" in rich_row
    # the seed carries an update notice: its outcome is the note's as first published
    assert "· **updated**" in seed_row
    assert (
        "vllm-fp8kv: +10.6% goodput, failed gate → no saving (as first published; see the update)"
        in seed_row
    )


def test_v2_detail_adds_sweep_power_and_mbu_charts(tmp_path: Path, cache_dir: Path) -> None:
    reports = tmp_path / "reports"
    write_record(reports, rich_data())
    docs = tmp_path / "docs"
    build_site(reports, docs, cache_dir=cache_dir)
    page = (docs / "reports/rich-v2-detail.md").read_text(encoding="utf-8")
    specs = {}
    for line in page.splitlines():
        if line.startswith('<script type="application/json" id="tw-spec-'):
            name = line.split('id="tw-spec-')[1].split('"')[0]
            specs[name] = json.loads(line.split(">", 1)[1].rsplit("</script>", 1)[0])
    assert sorted(specs) == [
        "accuracy",
        "goodput",
        "latency-rate",
        "mbu",
        "power",
        "sweep",
        "tokens-per-joule",
    ]
    sweep = specs["sweep"]["datasets"]["rows"]
    worst = next(r for r in sweep if r["name"] == "vllm-default" and r["rate_rps"] == 16.0)
    assert worst["slo_load"] == pytest.approx(16.0)  # 32,000 ms over a 2,000 ms limit
    assert worst["y"] == worst["slo_load"] and not worst["off_scale"]
    assert worst["verdict"] == "misses SLO"
    power = specs["power"]["datasets"]["rows"]
    assert [r["throttle"] for r in power[:3]] == ["", "sw_power_cap", ""]
    assert power[-1]["t_end_s"] == 6.0
    assert specs["mbu"]["datasets"]["rated"] == [{"gbs": pytest.approx(3350.0)}]
    stats = html.unescape(page[page.index("### Accuracy statistics") :])
    assert "| vllm-fp8kv | 600 | 3 | 0.0 pts | −5.9 pts to −2.1 pts | 0.00012 |" in stats
    gate = specs["accuracy"]["datasets"]["gate"]
    assert gate == [{"gate_pts": 95.0}]  # baseline 96.0 − 1.0-point threshold


def test_sweep_draws_infinite_p99_misses_above_the_line_with_their_mode(
    tmp_path: Path, cache_dir: Path
) -> None:
    # An early-stopped probe (both p99 infinite, stored as null) and a miss whose only
    # finite p99 is under its limit (the other was infinite): neither may vanish from the
    # chart nor sit below the SLO line.
    data = rich_data()
    data["configs"][0]["sweep"] += [
        {
            "rate_rps": 32.0,
            "slo_pass": False,
            "failure_reason": "queueing/KV-bound (ttft,stopped_early)",
            "stopped_early": True,
        },
        {"rate_rps": 24.0, "slo_pass": False, "tpot_p99_ms": 40.0, "failure_reason": "errors"},
    ]
    data["configs"][0]["repeats_detail"] = [
        {
            "rate_rps": 9.0,
            "goodput_tok_s": 4600.0,
            "slo_pass": True,
            "window_s": 120.0,
            "slo_attainment_pct": 99.5,
            "mean_power_w": 640.0,
            "energy_j": 76800.0,
            "power_samples": 120,
            "throttle_counts": {"sw_power_cap": 100},
            "sm_clock_mhz": 1755.0,
            "mem_clock_mhz": 2619.0,
        },
        {
            "rate_rps": 9.0,
            "goodput_tok_s": 4544.6,
            "slo_pass": True,
            "window_s": 120.0,
            "power_samples": 120,
            "throttle_counts": {"sw_power_cap": 99},
        },
    ]
    reports = tmp_path / "reports"
    write_record(reports, data)
    docs = tmp_path / "docs"
    build_site(reports, docs, cache_dir=cache_dir)
    page = (docs / "reports/rich-v2-detail.md").read_text(encoding="utf-8")
    line = next(x for x in page.splitlines() if 'id="tw-spec-sweep"' in x and "<script" in x)
    rows = json.loads(line.split(">", 1)[1].rsplit("</script>", 1)[0])["datasets"]["rows"]
    mine = {r["rate_rps"]: r for r in rows if r["name"] == "vllm-default"}
    assert mine[32.0]["off_scale"] and mine[24.0]["off_scale"]
    # At the top of the axis, 2 × the largest finite ratio (16), labelled "∞".
    assert mine[32.0]["y"] == mine[24.0]["y"] == pytest.approx(32.0)
    assert mine[32.0]["off_label"] == mine[24.0]["off_label"] == "∞"
    assert mine[32.0]["slo_load"] is None
    assert mine[32.0]["outcome"] == "queueing/KV-bound (ttft,stopped_early)"
    assert not mine[16.0]["off_scale"]
    text = html.unescape(page)
    assert (
        "| #4 probe 4 at 32 req/s | 32.00 | ✗ missed: queueing/KV-bound (ttft,stopped_early) "
        "| — | — | — | — |"
    ) in text
    # per window: 4,600 tok/s × 120 s / 76,800 J = 7.19 tok/J; throttle share; clocks
    assert (
        "| vllm-default | 9.00 | 4,600.0 | — | — | ✓ | 99.5% | 640 | 76,800 | 7.19 | "
        "sw_power_cap 100 of 120 | 1,755 / 2,619 |"
    ) in text
    # the throttle share uses the windows' own sample counts: 199 of 120 + 120
    assert "| vllm-default | sw_power_cap | 199 | 199 of 240 samples (83%) |" in text


def test_durations_keep_their_decimals() -> None:
    from tokenwatt.site.format.fmt import seconds

    assert (seconds(0.3), seconds(45), seconds(1200.0), seconds(None)) == (
        "0.3 s",
        "45 s",
        "1,200 s",
        "—",
    )


def test_two_builds_are_byte_identical(
    seed_reports: Path, tmp_path: Path, bundle_cache: Path
) -> None:
    write_record(seed_reports, rich_data())
    trees = []
    for run in ("a", "b"):
        cache = tmp_path / f"cache-{run}"
        shutil.copytree(bundle_cache, cache)  # fresh page cache: everything rendered anew
        build_site(seed_reports, tmp_path / run / "docs", cache_dir=cache)
        trees.append(tree(tmp_path / run / "docs"))
    assert trees[0] == trees[1]
    assert len(trees[0]) > 10


def test_unchanged_rebuild_rewrites_nothing(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    first = build_site(seed_reports, docs, cache_dir=cache_dir)
    inode = (docs / SEED_PAGE).stat().st_ino
    again = build_site(seed_reports, docs, cache_dir=cache_dir)
    assert first.changed and again.changed == []
    assert (docs / SEED_PAGE).stat().st_ino == inode


def test_changed_record_rebuilds_only_its_files(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    write_record(seed_reports, rich_data())
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    data = rich_data()
    data["title"] = "Rich v2 record, retitled"
    write_record(seed_reports, data)
    result = build_site(seed_reports, docs, cache_dir=cache_dir)
    assert result.changed == [
        "frontier.md",  # the note's title is in its points
        "index.md",
        "reports/rich-v2-detail.json",
        "reports/rich-v2-detail.md",
    ]
    assert "Rich v2 record, retitled" in (docs / "reports/rich-v2-detail.md").read_text()


def test_bad_record_leaves_previous_site_intact(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    before = tree(docs)
    bad = seed_data()
    bad["id"] = "bad-one"
    bad["configs"][0]["accuracy"]["score"] = 101.0
    write_record(seed_reports, bad)
    (seed_reports / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(RecordError) as caught:
        build_site(seed_reports, docs, cache_dir=cache_dir)
    where = {(Path(p.file).name, p.field) for p in caught.value.problems}
    assert ("bad-one.json", "configs[0].accuracy.score") in where
    assert ("broken.json", "") in where
    assert tree(docs) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tokenwatt-build-")]


def test_failure_while_writing_keeps_old_site(
    seed_reports: Path, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    before = tree(docs)
    write_record(seed_reports, rich_data())
    real_write = Path.write_bytes
    written: list[str] = []

    def failing_write(self: Path, data: bytes) -> int:
        if ".tokenwatt-build-" in str(self):
            written.append(self.name)
            if len(written) == 2:
                raise OSError(28, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing_write)
    with pytest.raises(InputError, match="cannot write the site: No space left"):
        build_site(seed_reports, docs, cache_dir=cache_dir)
    assert len(written) == 2  # it failed half-way through writing the new folder
    assert tree(docs) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tokenwatt-build-")]


def test_check_passes_on_fresh_site_and_writes_nothing(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    result = build_site(seed_reports, docs, check=True, cache_dir=cache_dir)
    assert "up to date" in result.summary


def test_check_fails_on_stale_site(seed_reports: Path, tmp_path: Path, cache_dir: Path) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    data = seed_data()
    data["summary"] = "A changed summary."
    write_record(seed_reports, data, SEED_RECORD.name)
    before = tree(docs)
    cache_before = sorted(p.name for p in (cache_dir / "pages").iterdir())
    with pytest.raises(StaleSiteError, match=r"reports/lab-h100-qwen3-30b-a3b-kv-cache\.md"):
        build_site(seed_reports, docs, check=True, cache_dir=cache_dir)
    assert tree(docs) == before
    assert sorted(p.name for p in (cache_dir / "pages").iterdir()) == cache_before


def test_check_fails_on_hand_edit_and_missing_site(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    with pytest.raises(StaleSiteError):
        build_site(seed_reports, docs, check=True, cache_dir=cache_dir)
    assert not docs.exists()
    build_site(seed_reports, docs, cache_dir=cache_dir)
    (docs / "extra.md").write_text("# stray\n", encoding="utf-8")
    with pytest.raises(StaleSiteError, match=r"extra\.md"):
        build_site(seed_reports, docs, check=True, cache_dir=cache_dir)


def test_cli_exit_codes(seed_reports: Path, tmp_path: Path, cache_dir: Path) -> None:
    """build exits 0, --check on a stale site exits 1, bad records exit 2 with every problem."""
    docs = tmp_path / "docs"
    runner = CliRunner()
    args = ["build", "--reports", str(seed_reports), "--out", str(docs)]
    shutil.copytree(cache_dir, tmp_path / ".tokenwatt-cache", dirs_exist_ok=True)
    ok = runner.invoke(cli, args)
    assert ok.exit_code == 0, ok.output
    assert "built 1 report page(s)" in ok.output
    (docs / "index.md").write_text("stale\n", encoding="utf-8")
    stale = runner.invoke(cli, [*args, "--check"])
    assert stale.exit_code == 1
    assert "index.md" in stale.output
    bad = seed_data()
    bad["id"] = "bad-two"
    bad["configs"][1]["node_power_kw"] = -1
    bad["surprise"] = 1
    write_record(seed_reports, bad)
    (seed_reports / "empty.json").write_text("", encoding="utf-8")
    failed = runner.invoke(cli, args)
    assert failed.exit_code == 2
    lines = [line for line in failed.output.splitlines() if line.startswith("error: ")]
    assert any("bad-two.json: configs[1].node_power_kw" in line for line in lines)
    assert any("bad-two.json: surprise: unknown field" in line for line in lines)
    assert any("empty.json: not valid JSON" in line for line in lines)
    assert (docs / "index.md").read_text(encoding="utf-8") == "stale\n"


def test_simulated_configs_refused_unless_demo(tmp_path: Path, cache_dir: Path) -> None:
    reports = tmp_path / "reports"
    data = seed_data()
    data["id"] = "sim-run"
    data["configs"][1]["simulated"] = True
    write_record(reports, data)
    docs = tmp_path / "docs"
    with pytest.raises(RecordError) as caught:
        build_site(reports, docs, cache_dir=cache_dir)
    [problem] = caught.value.problems
    assert problem.field == "configs[1].simulated"
    assert "demo: true" in problem.message
    assert not docs.exists()
    data["demo"] = True
    write_record(reports, data)
    build_site(reports, docs, cache_dir=cache_dir)
    page = text_of((docs / "reports/sim-run.md").read_bytes())
    assert page.index('!!! warning "Demo: simulated engine"') < page.index("## Results")
    index_row = next(
        line for line in text_of((docs / "index.md").read_bytes()).splitlines() if "sim-run" in line
    )
    assert "(demo, simulated)" in index_row


def test_disagreeing_stored_value_warns_and_shows_a_note(tmp_path: Path, cache_dir: Path) -> None:
    reports = tmp_path / "reports"
    data = seed_data()
    data["configs"][1]["accuracy"]["delta_pts"] = -7.0  # the scores give 88 − 96 = −8
    path = write_record(reports, data)
    docs = tmp_path / "docs"
    result = build_site(reports, docs, cache_dir=cache_dir)
    assert result.warnings == [
        f"{path}: configs[1].accuracy.delta_pts: stored -7, recomputed -8 "
        "(the page shows the recomputed value)"
    ]
    page = text_of((docs / SEED_PAGE).read_bytes())
    note = page.index('!!! danger "Stored values disagree with the raw numbers"')
    assert note < page.index("## Results")
    assert "- configs[1].accuracy.delta_pts: stored -7, recomputed -8" in page
    assert "−8.0 pts" in page and "−7.0 pts" not in page
    # The warning comes back from the page cache on an unchanged rebuild too.
    assert build_site(reports, docs, cache_dir=cache_dir).warnings == result.warnings


def test_duplicate_ids_are_a_problem(seed_reports: Path, tmp_path: Path, cache_dir: Path) -> None:
    write_record(seed_reports, seed_data(), "copy.json")
    with pytest.raises(RecordError) as caught:
        build_site(seed_reports, tmp_path / "docs", cache_dir=cache_dir)
    [problem] = caught.value.problems
    assert problem.field == "id"
    assert "already used by" in problem.message


def test_v1_record_builds_after_migration(tmp_path: Path, cache_dir: Path) -> None:
    """A record without schema_version (the seed as first written) builds like the v2 copy."""
    reports = tmp_path / "reports"
    reports.mkdir()
    shutil.copy2(Path(__file__).parents[1] / "fixtures" / "seed.report.json", reports)
    docs = tmp_path / "docs"
    result = build_site(reports, docs, cache_dir=cache_dir)
    assert result.warnings == []
    page = text_of((docs / SEED_PAGE).read_bytes())
    assert "| 8.21 |" in page
    assert "!!! info" not in page  # v1 has no dated updates
    assert (docs / "reports/lab-h100-qwen3-30b-a3b-kv-cache.json").read_bytes() == (
        reports / "seed.report.json"
    ).read_bytes()
