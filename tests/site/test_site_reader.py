"""What a reader of the built site needs: corrections flagged above the results, results
tables narrow enough to read, the outcome in the index, the spec file's place, unique
not-covered items, labelled accuracy bars and a plain capacity header."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

from sitecase import REPO, deep, rich_data, seed_data, write_record

from tokenwatt.site.build import build_site

SEED_ID = "lab-h100-qwen3-30b-a3b-kv-cache"
SEED_PAGE = f"reports/{SEED_ID}.md"
SPEC_NAME = "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"


def text_of(path: Path) -> str:
    """A generated file's Markdown with character references turned back into characters."""
    return html.unescape(path.read_text(encoding="utf-8"))


def build_one(
    tmp_path: Path, cache_dir: Path, data: dict[str, Any], specs: Path | None = None
) -> Path:
    """Build a site of one record (no spec folder unless given); returns the docs folder."""
    reports = tmp_path / "reports"
    write_record(reports, data)
    docs = tmp_path / "docs"
    build_site(reports, docs, cache_dir=cache_dir, specs_dir=specs or tmp_path / "no-specs")
    return docs


def section(page: str, heading: str) -> str:
    """The text from ``heading`` up to the next ``## `` heading."""
    start = page.index(heading)
    end = page.find("\n## ", start + len(heading))
    return page[start : end if end >= 0 else len(page)]


def tables(text: str) -> list[list[list[str]]]:
    """The Markdown tables in ``text``: rows of stripped cells, separator rows left out."""
    found: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def test_updated_note_says_its_figures_are_as_first_published(
    tmp_path: Path, cache_dir: Path
) -> None:
    page = text_of(build_one(tmp_path, cache_dir, seed_data()) / SEED_PAGE)
    results = section(page, "## Results")
    note = results.index("**As first published.**")
    assert note < results.index("| Configuration")
    assert "as first published on 2026-10-06" in results
    assert "the update notice above gives the corrections" in results
    # The record's numbers stay: the table still shows the quick-mode goodput and delta.
    assert "| 4,572.3 |" in results and "| +10.6% |" in results


def test_note_without_updates_has_no_first_published_line(tmp_path: Path, cache_dir: Path) -> None:
    data = seed_data()
    data["updates"] = []
    page = text_of(build_one(tmp_path, cache_dir, data) / SEED_PAGE)
    assert "As first published" not in page


def test_results_come_as_two_narrow_tables_with_every_key_figure(
    tmp_path: Path, cache_dir: Path
) -> None:
    page = text_of(build_one(tmp_path, cache_dir, seed_data()) / SEED_PAGE)
    results = section(page, "## Results")
    first, second = tables(results)
    assert first[0] == [
        "Configuration",
        "Engine",
        "Goodput (tok/s)",
        "Δ goodput",
        "Tokens/J",
        "[MBU](../methods/mbu.md)",
        "Board power (W)",
    ]
    assert second[0] == [
        "Configuration",
        "p99 TTFT (ms)",
        "p99 TPOT (ms)",
        "SLO passes / repeats",
        "Accuracy",
        "Δ accuracy",
        "Gate",
    ]
    assert results.index("### Throughput and efficiency") < results.index(
        "### Latency, SLO and accuracy"
    )
    tuned_a = next(r for r in first if r[0] == "vllm-fp8kv")
    tuned_b = next(r for r in second if r[0] == "vllm-fp8kv")
    assert tuned_a[2:] == ["5,056.9", "+10.6%", "8.21", "45.3%", "616"]
    assert tuned_b[1:6] == ["352.0 ✓", "43.7 ✓", "2 / 2", "88.0%", "−8.0 pts"]
    assert tuned_b[6].startswith("✗ fail")


def test_tables_are_styled_to_fit_the_content_column(tmp_path: Path, cache_dir: Path) -> None:
    css = build_one(tmp_path, cache_dir, seed_data()) / "assets/stylesheets/tokenwatt.css"
    text = css.read_text(encoding="utf-8")
    assert "padding: 0.6em 0.7em" in text
    assert "min-width: 3rem" in text


def test_index_shows_setup_outcome_and_update_marker(tmp_path: Path, cache_dir: Path) -> None:
    reports = tmp_path / "reports"
    write_record(reports, seed_data())
    rich = rich_data()
    rich["updates"] = []
    rich["configs"][1]["accuracy"]["score"] = 95.5  # −0.5 pts: passes the 1-point gate
    write_record(reports, rich)
    docs = tmp_path / "docs"
    build_site(reports, docs, cache_dir=cache_dir, specs_dir=tmp_path / "no-specs")
    index = text_of(docs / "index.md")
    assert "| Hardware · model | Outcome |" in index
    seed_row = next(line for line in index.splitlines() if SEED_ID in line)
    rich_row = next(line for line in index.splitlines() if "rich-v2-detail" in line)
    assert "1× NVIDIA H100 80GB HBM3 · Qwen3-30B-A3B-FP8" in seed_row
    assert "vllm-fp8kv: +10.6% goodput, failed gate → no saving" in seed_row
    assert "**updated**" in seed_row
    # 64 × 4,572.3 / 5,056.9 → 58 cards: 6 saved once the gate passes.
    assert "vllm-fp8kv: +10.6% goodput, passed gate → saves 6 of 64 cards" in rich_row
    assert "updated" not in rich_row


def test_index_outcome_is_recomputed_not_read_from_stored_values(
    tmp_path: Path, cache_dir: Path
) -> None:
    data = seed_data()
    # A stored delta that would pass the gate: the outcome must follow the raw scores.
    data["configs"][1]["accuracy"]["delta_pts"] = 0.0
    # A lower raw goodput for the tuned configuration: the outcome's gain must follow it.
    data["configs"][1]["goodput_tok_s"] = 4800.0
    index = text_of(build_one(tmp_path, cache_dir, data) / "index.md")
    row = next(line for line in index.splitlines() if SEED_ID in line)
    assert "vllm-fp8kv: +5.0% goodput, failed gate → no saving" in row


def test_index_outcome_of_a_baseline_only_note(tmp_path: Path, cache_dir: Path) -> None:
    data = seed_data()
    data["configs"] = data["configs"][:1]
    index = text_of(build_one(tmp_path, cache_dir, data) / "index.md")
    row = next(line for line in index.splitlines() if SEED_ID in line)
    assert row.rstrip().endswith("| baseline only |")


def test_not_covered_shows_exact_repeats_once(tmp_path: Path, cache_dir: Path) -> None:
    data = seed_data()
    data["not_covered"] = [
        *data["not_covered"],
        "  whole-node POWER (cloud VM:\n no BMC access) ",
        "Context lengths beyond the chat-mix-v1 trace",
    ]
    page = text_of(build_one(tmp_path, cache_dir, data) / SEED_PAGE)
    items = [line for line in section(page, "## Not covered").splitlines() if line.startswith("- ")]
    # The exact repeats go; the two whole-node power items share a topic and become one.
    assert items == [
        "- Whole-node power (cloud VM: no BMC access): energy figures are GPU board power "
        "only (no CPUs, memory, NICs, fans or PSU losses)",
        "- Context lengths beyond the chat-mix-v1 trace",
        "- Quick mode: short windows, few repeats — validation only, not for publishing",
    ]


def test_capacity_header_is_plain(tmp_path: Path, cache_dir: Path) -> None:
    page = text_of(build_one(tmp_path, cache_dir, seed_data()) / SEED_PAGE)
    assert "| Configuration | Goodput gain | Cards needed (baseline: 64) | Cards saved |" in page
    assert "Cards for the baseline load" not in page


def test_accuracy_chart_has_value_labels(tmp_path: Path, cache_dir: Path) -> None:
    page = (build_one(tmp_path, cache_dir, seed_data()) / SEED_PAGE).read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="tw-spec-accuracy">(.*?)</script>', page)
    assert match is not None
    spec = json.loads(match.group(1))
    text_layers = [
        layer
        for layer in spec["layer"]
        if (layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]) == "text"
    ]
    assert len(text_layers) == 1
    encoding = text_layers[0]["encoding"]
    assert encoding["text"]["field"] == "score"
    assert encoding["text"]["format"] == ".1f"
    assert [r["score"] for r in spec["datasets"]["rows"]] == [96.0, 88.0]


def test_reproduce_says_where_the_spec_is_in_the_repository(
    tmp_path: Path, cache_dir: Path
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy2(REPO / "specs" / SPEC_NAME, specs / SPEC_NAME)
    page = text_of(build_one(tmp_path, cache_dir, seed_data(), specs) / SEED_PAGE)
    reproduce = section(page, "## Reproduce")
    # The record names the spec by its bare name (collect ran in specs/); the block gives
    # the path that works from the repository's root, and a line under it says so.
    assert f"--spec {SPEC_NAME} --label" not in reproduce
    assert reproduce.count(f"--spec specs/{SPEC_NAME} --label") == 2
    line = f"The spec file named above is in this repository at `specs/{SPEC_NAME}`."
    assert line in reproduce
    # the seed's records keep neither an engine command line nor engine flags: the page
    # must not send the reader to a section that shows none
    assert "under\n[Configurations compared]" not in reproduce
    assert "The run records keep no engine command line and no engine flags." in reproduce
    assert reproduce.index("```\n") < reproduce.index(line)


def test_no_spec_line_without_the_file_and_the_cache_notices_it(
    tmp_path: Path, cache_dir: Path
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    docs = build_one(tmp_path, cache_dir, seed_data(), specs)
    assert "in this repository at" not in text_of(docs / SEED_PAGE)
    # The file appears: the next build (same cache) must say where it is.
    (specs / SPEC_NAME).write_text("x: 1\n", encoding="utf-8")
    build_site(tmp_path / "reports", docs, cache_dir=cache_dir, specs_dir=specs)
    assert f"`specs/{SPEC_NAME}`" in text_of(docs / SEED_PAGE)


def test_spec_line_names_only_plain_files_once(tmp_path: Path, cache_dir: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    odd = "a`b<i>.yaml"
    for name in ("two.spec.yaml", odd):
        (specs / name).write_text("x: 1\n", encoding="utf-8")
    data = deep(seed_data())
    data["reproduce"] = (
        f"tokenwatt run --spec '{odd}'\n"
        f"tokenwatt run --spec=some/where/two.spec.yaml\n"
        f"tokenwatt run --spec {SPEC_NAME}\n"
        "tokenwatt run --spec two.spec.yaml"
    )
    page = text_of(build_one(tmp_path, cache_dir, data, specs) / SEED_PAGE)
    reproduce = section(page, "## Reproduce")
    assert "The spec file named above is in this repository at `specs/two.spec.yaml`." in (
        reproduce
    )
    assert "<i>" not in reproduce.split("```")[-1]
