"""Writing the site (``tokenwatt/site/files/output.py``, the page cache) against a hostile file
system: a docs "folder" that is a file, *.json entries that are not files, a full disk, and an
interruption half-way. Each gives a clear error (or, for the cache, nothing at all) and leaves
the previous site exactly as it was."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from sitecase import tree

from tokenwatt.errors import InputError, RecordError
from tokenwatt.site.build import build_site


def test_docs_path_that_is_a_file_is_refused_and_kept(
    seed_reports: Path, cache_dir: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.write_text("my notes\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        build_site(seed_reports, docs, cache_dir=cache_dir)
    assert str(exc.value.problems[0]).startswith(f"{docs}: is a file, not a folder")
    assert docs.read_text(encoding="utf-8") == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "docs", "reports"]


def test_json_entries_that_are_not_files_are_named_not_skipped(
    seed_reports: Path, cache_dir: Path, tmp_path: Path
) -> None:
    (seed_reports / "broken.json").symlink_to(tmp_path / "nowhere.json")
    (seed_reports / "folder.json").mkdir()
    os.mkfifo(seed_reports / "pipe.json")
    with pytest.raises(RecordError) as exc:
        build_site(seed_reports, tmp_path / "docs", cache_dir=cache_dir)
    assert sorted(str(p) for p in exc.value.problems) == [
        f"{seed_reports / 'broken.json'}: is a link to nothing (broken symbolic link); "
        "a report record must be a JSON file",
        f"{seed_reports / 'folder.json'}: is a folder; a report record must be a JSON file",
        f"{seed_reports / 'pipe.json'}: is not a regular file; a report record must be a JSON file",
    ]
    assert not (tmp_path / "docs").exists()


def test_hidden_json_names_are_editor_files_and_ignored(
    seed_reports: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """Emacs' lock file for a record being edited is a dangling link named .#x.json."""
    (seed_reports / ".#lab-note.json").symlink_to("root@host.1234:1700000000")
    (seed_reports / ".draft.json").write_text("{not json", encoding="utf-8")
    result = build_site(seed_reports, tmp_path / "docs", cache_dir=cache_dir)
    assert result.pages == 1


def _fail_after(monkeypatch: pytest.MonkeyPatch, calls: int, error: BaseException) -> None:
    """Path.write_bytes succeeds ``calls`` times, then raises ``error``."""
    real = Path.write_bytes
    count = {"n": 0}

    def write_bytes(self: Path, data: bytes) -> int:  # type: ignore[override]
        count["n"] += 1
        if count["n"] > calls:
            raise error
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


@pytest.mark.parametrize(
    "error",
    [OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), KeyboardInterrupt()],
    ids=["disk-full", "ctrl-c"],
)
def test_failure_half_way_leaves_the_previous_site(
    error: BaseException,
    seed_reports: Path,
    cache_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    (docs / "index.md").write_text("old index\n", encoding="utf-8")  # so the build rewrites
    (docs / "reports" / "old.md").write_text("old page\n", encoding="utf-8")
    before = tree(docs)
    _fail_after(monkeypatch, 0, error)
    if isinstance(error, KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            build_site(seed_reports, docs, cache_dir=cache_dir)
    else:
        with pytest.raises(InputError) as exc:
            build_site(seed_reports, docs, cache_dir=cache_dir)
        assert [str(p) for p in exc.value.problems] == [
            f"{docs}: cannot write the site: No space left on device; the previous site is "
            "unchanged"
        ]
    assert tree(docs) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "docs", "reports"]


def test_a_cache_that_cannot_be_written_does_not_fail_the_build(
    seed_reports: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty cache on a full disk: the bundle and the page are made, not stored."""

    def full(path: Path, data: bytes, *, durable: bool = True) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("tokenwatt.site.files.cache.atomic_write_bytes", full)
    monkeypatch.setattr("tokenwatt.site.files.assets.atomic_write_bytes", full)
    cache_dir = tmp_path / "empty-cache"
    result = build_site(seed_reports, tmp_path / "docs", cache_dir=cache_dir)
    assert result.pages == 1
    assert (tmp_path / "docs" / "index.md").is_file()


def test_out_that_holds_the_records_is_refused_and_nothing_deleted(
    seed_reports: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """``tokenwatt build --out .`` in a project folder used to replace the project."""
    project = seed_reports.parent
    (project / "notes.txt").write_text("precious\n", encoding="utf-8")
    before = tree(project)
    for out in (project, seed_reports):
        with pytest.raises(InputError) as exc:
            build_site(seed_reports, out, cache_dir=cache_dir)
        assert [str(p) for p in exc.value.problems] == [
            f"{out}: --out: holds the report records ({seed_reports}); the build replaces this "
            "whole folder, so it would delete them: pass an --out of its own (default docs)"
        ]
    assert tree(project) == before


def test_out_that_is_not_a_site_is_refused_and_kept(
    seed_reports: Path, cache_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "src").mkdir(parents=True)
    for name in (".bashrc", "src/main.py", "a.txt", "b.txt"):
        (home / name).write_text(name, encoding="utf-8")
    (home / "index.md").write_text("mine\n", encoding="utf-8")
    before = tree(home)
    with pytest.raises(InputError) as exc:
        build_site(seed_reports, home, cache_dir=cache_dir)
    assert str(exc.value.problems[0]) == (
        f"{home}: --out: is not a site made by `tokenwatt build` (it holds .bashrc, a.txt, "
        "b.txt and 1 more); the build replaces this whole folder, so it would delete them: "
        "pass a new or empty --out"
    )
    assert tree(home) == before


def test_sites_made_by_a_build_are_replaced_and_readable(
    seed_reports: Path, cache_dir: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    build_site(seed_reports, docs, cache_dir=cache_dir)
    assert (docs / ".tokenwatt-site").is_file()
    assert docs.stat().st_mode & 0o777 == 0o755
    (docs / "extra.md").write_text("# stray\n", encoding="utf-8")  # marked: replaced anyway
    build_site(seed_reports, docs, cache_dir=cache_dir)
    assert not (docs / "extra.md").exists()
    (docs / ".tokenwatt-site").unlink()  # a site from before the marker: layout files only
    result = build_site(seed_reports, docs, cache_dir=cache_dir)
    assert result.changed == [".tokenwatt-site"]
