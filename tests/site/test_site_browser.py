"""The built site in a real headless browser (Debian's chromium, driven by Playwright).

Served from 127.0.0.1 by a threaded ``http.server``; every request to anywhere else is
aborted and fails the test. Checks: each chart element holds an SVG, the palette switch
re-renders the charts with the dark theme, a hostile label is shown as text and runs
nothing, an infinite p99 is drawn as a labelled off-scale marker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from sitecase import HOSTILE, REPO, hostile_data, rich_data, write_record

from tests import archive_factory
from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.records import RunInput
from tokenwatt.site.build import build_site

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


OFF_SCALE_ID = "off-scale-p99"


def off_scale_record(folder: Path) -> None:
    """A v3 report (the runs factory's two runs) whose baseline probe at 16 req/s (#4) had
    an infinite p99 TTFT, under a hostile configuration label."""
    run = make_run()
    run.probes[3].window.ttft_ms.p99 = "inf"
    runs = [run, tuned_run()]
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    report = summarise(inputs, title="Off scale", report_id=OFF_SCALE_ID)
    report.configs[1].label = HOSTILE
    (folder / f"{OFF_SCALE_ID}.json").write_text(report.model_dump_json(indent=2), "utf-8")


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory, bundle_cache: Path) -> Iterator[str]:
    """Build seed + hostile + rich records, run mkdocs, serve the result on 127.0.0.1."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("browser-site")
    reports = root / "reports"
    reports.mkdir()
    shutil.copy2(REPO / "reports" / "lab-h100-qwen3-30b-a3b-kv-cache.json", reports)
    write_record(reports, hostile_data())
    write_record(reports, rich_data())
    off_scale_record(reports)
    archive_factory.write_archive(root, fillers=2)  # notes across models for the frontier
    cache = root / "cache"
    shutil.copytree(bundle_cache, cache)
    build_site(reports, root / "docs", cache_dir=cache)
    shutil.copy2(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "site_templates" / "overrides", root / "site_templates" / "overrides")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(root / "site")],
        cwd=root,
        check=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    # The standard library's static file server, as the README's `python -m http.server -d
    # site`: it serves the built folder with directory URLs (a/ -> a/index.html), which a
    # scripted test server (pytest-httpserver, aiohttp's TestServer) does not.
    handler = partial(QuietHandler, directory=str(root / "site"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def browser_page(site_url: str) -> Iterator[tuple[Page, list[str], list[str]]]:
    """A fresh page that aborts off-host requests and records dialogs and page errors."""
    from playwright.sync_api import Route, sync_playwright

    off_host: list[str] = []
    events: list[str] = []

    def guard(route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            off_host.append(route.request.url)
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(color_scheme="light", service_workers="block")
            context.route("**/*", guard)
            page = context.new_page()
            page.set_default_timeout(10_000)
            page.on("dialog", lambda d: (events.append(f"dialog: {d.message}"), d.dismiss()))
            page.on("pageerror", lambda e: events.append(f"pageerror: {e}"))
            yield page, off_host, events
        finally:
            browser.close()
    assert off_host == [], f"requests left 127.0.0.1: {off_host}"


def chart_state(page: Page) -> list[dict[str, object]]:
    states: list[dict[str, object]] = page.eval_on_selector_all(
        ".tw-chart",
        """els => els.map(el => ({
            id: el.id,
            svg: el.querySelectorAll('svg').length + el.querySelectorAll('canvas').length,
            renders: Number(el.getAttribute('data-tw-renders') || 0),
            theme: el.getAttribute('data-tw-theme'),
            error: el.getAttribute('data-tw-error'),
            background: getComputedStyle(el.querySelector('svg') || el).backgroundColor,
        }))""",
    )
    return states


def test_charts_render_and_follow_the_palette(
    site_url: str, browser_page: tuple[Page, list[str], list[str]]
) -> None:
    page, _off_host, events = browser_page
    page.goto(f"{site_url}/reports/rich-v2-detail/")
    page.wait_for_function(
        "[...document.querySelectorAll('.tw-chart')].every(e => e.getAttribute('data-tw-renders'))"
    )
    light = chart_state(page)
    assert [c["id"] for c in light] == [
        "tw-chart-goodput",
        "tw-chart-tokens-per-joule",
        "tw-chart-accuracy",
        "tw-chart-sweep",
        "tw-chart-latency-rate",
        "tw-chart-power",
        "tw-chart-mbu",
        # the seed and the hostile-label note measured the same spec and configurations
        "tw-chart-trends",
    ]
    assert all(c["svg"] == 1 and c["theme"] == "light" and not c["error"] for c in light), light
    # The palette toggle: MkDocs Material's label for the next scheme's radio input.
    page.locator("form[data-md-component=palette] label:visible").first.click()
    page.wait_for_function(
        "[...document.querySelectorAll('.tw-chart')]"
        ".every(e => e.getAttribute('data-tw-renders') === '2')"
    )
    assert page.get_attribute("body", "data-md-color-scheme") == "slate"
    dark = chart_state(page)
    assert all(c["svg"] == 1 and c["theme"] == "dark" for c in dark), dark
    # vega-embed's dark theme paints the chart background dark grey; the light one white.
    for before, after in zip(light, dark, strict=True):
        assert before["background"] != after["background"], (before, after)
    assert events == []


def test_seed_page_charts_and_hostile_label(
    site_url: str, browser_page: tuple[Page, list[str], list[str]]
) -> None:
    page, _off_host, events = browser_page
    page.goto(f"{site_url}/reports/lab-h100-qwen3-30b-a3b-kv-cache/")
    page.wait_for_function(
        "[...document.querySelectorAll('.tw-chart')].every(e => e.querySelector('svg'))"
    )
    assert len(chart_state(page)) == 4  # goodput, tokens per joule, accuracy, trends
    page.goto(f"{site_url}/reports/hostile-labels/")
    page.wait_for_function(
        "[...document.querySelectorAll('.tw-chart')].every(e => e.querySelector('svg'))"
    )
    cell = page.locator("article table td", has_text=HOSTILE).first
    assert cell.inner_text() == HOSTILE
    assert page.locator("article img").count() == 0
    # The label is drawn as SVG text by Vega too.
    svg_text = page.locator("#tw-chart-goodput svg").text_content()
    assert HOSTILE in svg_text
    # The override is isolated in its own item; NUL and ESC never reach the HTML.
    item = page.locator("article li", has_text="override").first.text_content() or ""
    assert item.startswith("\u2068unclosed") and item.endswith("override\u2069")
    html = page.content()
    assert "\x00" not in html and "\x1b" not in html
    assert page.locator("article li", has_text="esc [31m red").count() == 1
    assert events == []


def test_an_infinite_p99_is_drawn_as_a_labelled_off_scale_marker(
    site_url: str, browser_page: tuple[Page, list[str], list[str]]
) -> None:
    page, _off_host, events = browser_page
    page.goto(f"{site_url}/reports/{OFF_SCALE_ID}/")
    page.wait_for_function(
        "[...document.querySelectorAll('.tw-chart')].every(e => e.getAttribute('data-tw-renders'))"
    )
    assert all(not c["error"] for c in chart_state(page))
    for chart in ("sweep", "latency-rate"):
        # Vega's text marks: the off-scale label "∞" is drawn as text in the chart's SVG,
        # and the legend names the marker.
        texts = page.eval_on_selector_all(
            f"#tw-chart-{chart} svg text", "els => els.map(e => e.textContent)"
        )
        assert "∞" in texts, (chart, texts)
        assert "off scale (value labelled)" in texts, " | ".join(texts)
        assert HOSTILE in texts  # the hostile label is drawn as text, in the legend
    # The marker itself: a triangle (Vega's symbol path) whose description gives the value.
    marks = page.eval_on_selector_all(
        "#tw-chart-sweep svg path[aria-roledescription=point]",
        "els => els.map(e => e.getAttribute('aria-label') || '')",
    )
    assert [m for m in marks if "Worst p99 / limit: ∞" in m], marks
    assert page.locator("article img").count() == 0
    assert events == []


def _points(page: Page) -> int:
    """Points drawn on the frontier chart (Vega's SVG symbol marks)."""
    count: int = page.eval_on_selector_all(
        "#tw-chart-frontier g.mark-symbol.role-mark path", "els => els.length"
    )
    return count


def test_frontier_filters_and_views_work_in_the_browser(
    site_url: str, browser_page: tuple[Page, list[str], list[str]]
) -> None:
    page, _off_host, events = browser_page
    page.goto(f"{site_url}/frontier/")
    page.wait_for_function("document.querySelector('#tw-chart-frontier svg') !== null")
    every = _points(page)
    # Every configuration with a goodput and an interactivity: the archive's 17 (groups A
    # and B, two fillers; the inconclusive one has neither) and the other notes' points.
    assert every >= 17
    page.select_option("#tw-chart-frontier select[name=f_model]", "model-b")
    page.wait_for_function(
        "document.querySelectorAll('#tw-chart-frontier g.mark-symbol.role-mark path').length === 4"
    )
    page.select_option("#tw-chart-frontier select[name=f_hardware]", "1× SIM H100")
    page.wait_for_function(
        "document.querySelectorAll('#tw-chart-frontier g.mark-symbol.role-mark path').length === 0"
    )
    page.select_option("#tw-chart-frontier select[name=f_model]", "all")
    page.wait_for_function(
        "document.querySelectorAll('#tw-chart-frontier g.mark-symbol.role-mark path').length === 7"
    )
    page.check("#tw-chart-frontier input[type=radio][value=tokens_per_joule]")
    page.wait_for_function(
        "document.querySelectorAll('#tw-chart-frontier g.mark-symbol.role-mark path').length === 7"
    )
    assert events == []
