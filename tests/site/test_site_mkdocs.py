"""The generated docs folder passes ``mkdocs build --strict`` with the project's mkdocs.yml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from sitecase import REPO, hostile_data, rich_data, seed_data, write_record

from tokenwatt.cli import cli
from tokenwatt.cli.reference import cli_reference_markdown
from tokenwatt.site.build import build_site


def place_config(folder: Path) -> None:
    """The project's mkdocs.yml and theme override beside a generated docs folder."""
    shutil.copy2(REPO / "mkdocs.yml", folder / "mkdocs.yml")
    shutil.copytree(REPO / "site_templates" / "overrides", folder / "site_templates" / "overrides")


def test_mkdocs_strict_build_passes(seed_reports: Path, tmp_path: Path, cache_dir: Path) -> None:
    write_record(seed_reports, rich_data())
    write_record(seed_reports, hostile_data())
    demo = seed_data()
    demo.update(id="demo-sim", demo=True)
    demo["configs"][1]["simulated"] = True
    write_record(seed_reports, demo)
    reference = cli_reference_markdown(cli)
    build_site(seed_reports, tmp_path / "docs", cache_dir=cache_dir, cli_reference=reference)
    place_config(tmp_path)
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", str(site)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    page = (site / "reports/lab-h100-qwen3-30b-a3b-kv-cache/index.html").read_text()
    # goodput, tokens per joule, accuracy, and the trend across the notes of its spec (the
    # rich and hostile records; not the simulated demo)
    assert page.count('class="tw-chart"') == 4
    assert "note rich-v2-detail" in page and "note demo-sim" not in page
    assert 'href="../lab-h100-qwen3-30b-a3b-kv-cache.json"' in page
    assert (site / "reports/lab-h100-qwen3-30b-a3b-kv-cache.json").is_file()
    assert (site / "assets/javascripts/vega-bundle.js").is_file()
    assert "fonts.googleapis.com" not in page
    # The guide pages and the generated CLI reference are built and in the navigation.
    index = (site / "index.html").read_text()
    for guide_page in sorted((REPO / "site_templates" / "guide").glob("*.md")):
        name = "" if guide_page.stem == "index" else f"{guide_page.stem}/"
        assert (site / "guide" / name / "index.html").is_file(), guide_page.name
        assert f'href="guide/{name}"' in index, guide_page.name
    assert 'id="tokenwatt-cloud-session"' in (site / "guide/cli/index.html").read_text()
    hostile = (site / "reports/hostile-labels/index.html").read_text()
    assert "<img src=x" not in hostile and '<img src="x"' not in hostile
    title = hostile.split("<title>", 1)[1].split("</title>", 1)[0]
    assert title.startswith("&lt;img src=x onerror=alert(1)&gt; **x** | [a](b) - ")


def test_strict_build_fails_on_a_broken_link(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    """Link validation is raised to warnings, so --strict turns a bad link into a failure."""
    build_site(seed_reports, tmp_path / "docs", cache_dir=cache_dir)
    with (tmp_path / "docs" / "index.md").open("a", encoding="utf-8") as page:
        page.write("\n[gone](reports/no-such-page.md)\n")
    place_config(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
