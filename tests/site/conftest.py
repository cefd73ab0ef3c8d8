"""Fixtures for the site tests: a shared vega-embed bundle cache and a seed reports folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sitecase import SEED_RECORD

from tokenwatt.site.files.assets import vega_bundle


@pytest.fixture(scope="session")
def bundle_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding the vega-embed bundle, made once per session (about 3 s)."""
    folder = tmp_path_factory.mktemp("bundle-cache")
    vega_bundle(folder)
    return folder


@pytest.fixture
def cache_dir(tmp_path: Path, bundle_cache: Path) -> Path:
    """A fresh page cache per test that already has the bundle."""
    folder = tmp_path / "cache"
    shutil.copytree(bundle_cache, folder)
    return folder


@pytest.fixture
def seed_reports(tmp_path: Path) -> Path:
    """A reports folder holding a byte copy of the archive's first record."""
    folder = tmp_path / "reports"
    folder.mkdir()
    shutil.copy2(SEED_RECORD, folder / SEED_RECORD.name)
    return folder
