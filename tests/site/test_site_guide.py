"""The guide pages (``site_templates/guide/``) are copied into ``docs/guide/`` the way the
methods pages are, with the CLI reference the CLI hands over, and appear in the site's
navigation (``mkdocs.yml`` has no ``nav``: it follows the generated folders)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from sitecase import REPO

from tokenwatt.cli import cli
from tokenwatt.cli.reference import cli_reference_markdown
from tokenwatt.errors import InputError, StaleSiteError
from tokenwatt.site.build import CLI_PLACEHOLDER, build_site, copied_pages
from tokenwatt.site.pages.templates import templates_dir

GUIDE = REPO / "site_templates" / "guide"


def test_every_guide_page_is_copied_as_it_is(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    reference = cli_reference_markdown(cli)
    build_site(seed_reports, docs, cache_dir=cache_dir, cli_reference=reference)
    sources = sorted(GUIDE.glob("*.md"))
    assert len(sources) >= 9
    for source in sources:
        assert (docs / "guide" / source.name).read_bytes() == source.read_bytes(), source.name
    assert (docs / "guide" / "cli.md").read_text(encoding="utf-8") == reference
    # One copy path for methods and guide pages.
    copied = copied_pages(templates_dir())
    assert {f"guide/{p.name}" for p in sources} | {"methods/goodput.md"} <= set(copied)


def test_without_a_reference_the_cli_page_says_how_to_get_one(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    assert (docs / "guide" / "cli.md").read_text(encoding="utf-8") == CLI_PLACEHOLDER


def test_check_sees_a_stale_cli_reference(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir, cli_reference="# old\n")
    build_site(seed_reports, docs, cache_dir=cache_dir, check=True, cli_reference="# old\n")
    with pytest.raises(StaleSiteError, match=r"guide/cli\.md"):
        build_site(seed_reports, docs, cache_dir=cache_dir, check=True, cli_reference="# new\n")


def test_a_failing_build_leaves_the_previous_guide(
    seed_reports: Path, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide goes through the same swap as every other page: a build that cannot
    write (the disk full at its first file) leaves the previous guide as it was."""
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir, cli_reference="# before\n")
    before = {p.name: p.read_bytes() for p in (docs / "guide").iterdir()}

    def full(self: Path, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(InputError, match="the previous site is unchanged"):
        build_site(seed_reports, docs, cache_dir=cache_dir, cli_reference="# after\n")
    assert {p.name: p.read_bytes() for p in (docs / "guide").iterdir()} == before


def test_the_guide_is_in_the_mkdocs_navigation(
    seed_reports: Path, tmp_path: Path, cache_dir: Path
) -> None:
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files
    from mkdocs.structure.nav import get_navigation

    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir, cli_reference=cli_reference_markdown(cli))
    config = load_config(config_file=str(REPO / "mkdocs.yml"), docs_dir=str(docs))
    nav = get_navigation(get_files(config), config)
    (section,) = [item for item in nav.items if item.title == "Guide"]
    in_nav = {page.file.src_uri for page in section.children}
    expected = {f"guide/{p.name}" for p in GUIDE.glob("*.md")} | {"guide/cli.md"}
    assert in_nav == expected
