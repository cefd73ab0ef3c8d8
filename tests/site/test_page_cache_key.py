"""The page cache's key covers every module that shapes a page, in the stages' rooms too: a
page rendered by old analysis code must never be served after that code changed."""

from __future__ import annotations

from pathlib import Path

import pytest

import tokenwatt
from tokenwatt.site.files.cache import code_key


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in package tree (the real one is not ours to edit in a test)."""
    root = tmp_path / "tokenwatt"
    for rel in ("site/builder.py", "analysis/room_a/figures.py", "records/room_b/record.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    (root / "__init__.py").write_text("")
    monkeypatch.setattr(tokenwatt, "__file__", str(root / "__init__.py"))
    return root


def test_a_change_in_a_rooms_module_changes_the_key(package: Path, tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    before = code_key(templates)
    (package / "analysis/room_a/figures.py").write_text("# the p99 now rounds up\n")
    assert code_key(templates) != before


def test_a_module_moved_between_rooms_changes_the_key(package: Path, tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    before = code_key(templates)
    (package / "records/room_b/record.py").rename(package / "records/record.py")
    assert code_key(templates) != before


def test_the_key_of_one_tree_is_stable(package: Path, tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    (templates / "guide").mkdir(parents=True)
    (templates / "guide" / "index.md").write_text("# Guide\n")
    assert code_key(templates) == code_key(templates)
    (templates / "guide" / "index.md").write_text("# Guide, changed\n")
    assert code_key(templates) != code_key(tmp_path / "templates-missing")
