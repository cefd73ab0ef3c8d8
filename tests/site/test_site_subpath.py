"""The built site served under a sub-path, as GitHub Pages serves a project site
(``https://OWNER.github.io/REPO/``), in a real headless browser: the index, a report page
with its charts, a guide page and the 404 page (served for any missing path, as Pages does)
load every stylesheet, script and link from under ``/REPO/``."""

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
from typing import Any
from urllib.parse import urlsplit

import pytest
from sitecase import REPO

from tokenwatt.site.build import build_site

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
PREFIX = "/REPO/"
SEED = "lab-h100-qwen3-30b-a3b-kv-cache"


class PagesHandler(SimpleHTTPRequestHandler):
    """Serves the site under :data:`PREFIX` only; a missing path there gets the site's
    ``404.html`` with status 404, as GitHub Pages answers."""

    site: Path

    def log_message(self, format: str, *args: object) -> None:
        pass

    def translate_path(self, path: str) -> str:
        rel = urlsplit(path).path.removeprefix(PREFIX.rstrip("/"))
        return super().translate_path(rel or "/")

    def send_head(self) -> Any:
        path = urlsplit(self.path).path
        if not path.startswith(PREFIX) and path != PREFIX.rstrip("/"):
            self.send_error(404, "outside the project site")
            return None
        target = Path(self.translate_path(self.path))
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            body = (self.site / "404.html").read_bytes()
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return _Bytes(body)
        return super().send_head()


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, *_: object) -> bytes:
        data, self.data = self.data, b""
        return data

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, bundle_cache: Path) -> Iterator[str]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("subpath-site")
    reports = root / "reports"
    reports.mkdir()
    shutil.copy2(REPO / "reports" / f"{SEED}.json", reports)
    cache = root / "cache"
    shutil.copytree(bundle_cache, cache)
    build_site(reports, root / "docs", cache_dir=cache)
    shutil.copy2(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "site_templates" / "overrides", root / "site_templates" / "overrides")
    handler = type("Handler", (PagesHandler,), {"site": root / "site"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(root / "site")))
    url = f"http://127.0.0.1:{server.server_address[1]}{PREFIX}"
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(root / "site")],
        cwd=root,
        check=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "TOKENWATT_SITE_URL": url},
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_every_page_and_the_404_page_work_under_the_sub_path(base_url: str) -> None:
    from playwright.sync_api import sync_playwright

    failed: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_context(service_workers="block").new_page()
            page.set_default_timeout(15_000)
            page.on(
                "response",
                lambda r: (
                    failed.append(f"{r.status} {r.url}")
                    if r.status >= 400 and r.request.resource_type != "document"
                    else None
                ),
            )
            index = page.goto(base_url)
            assert index is not None and index.status == 200
            page.click(f"a[href*='reports/{SEED}']")
            page.wait_for_url(f"**{PREFIX}reports/{SEED}/")
            page.wait_for_selector(".tw-chart svg")
            assert page.evaluate("document.querySelectorAll('.tw-chart svg').length") >= 2
            guide = page.goto(base_url + "guide/")
            assert guide is not None and guide.status == 200
            missing = page.goto(base_url + "no/such/page/")
            assert missing is not None and missing.status == 404
            # The 404 page's stylesheets, scripts and links are all under the sub-path.
            sheets = page.evaluate(
                "[...document.querySelectorAll('link[rel=stylesheet], script[src]')]"
                ".map(e => e.href || e.src)"
            )
            assert sheets and all(urlsplit(s).path.startswith(PREFIX) for s in sheets), sheets
            styled = page.evaluate("[...document.styleSheets].filter(s => s.cssRules.length)")
            assert styled, "the 404 page has no stylesheet"
            home = page.evaluate("document.querySelector('a.md-header__button.md-logo').href")
            assert urlsplit(home).path == PREFIX
        finally:
            browser.close()
    assert failed == []
