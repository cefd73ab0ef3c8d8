"""Writing the generated docs folder: compare, then build beside it and swap it in.

The docs folder belongs to the build (generated and git-ignored). A build writes the whole
new folder next to it (``.tokenwatt-build-*``), then swaps it in with two renames, so a
build that fails half-way leaves the previous site as it was. Files whose bytes did not
change are hard-linked from the old folder instead of rewritten, so their modification
times stay put and ``mkdocs serve`` reloads only what changed.

Write policy (see :mod:`tokenwatt.files`): files get mode 0644 and folders 0755, and the
new folder's entries are ``fsync``-ed once per folder before the swap, not once per file.
The site is generated output that one ``tokenwatt build`` makes again, and a build of a
large archive writes thousands of pages: an ``fsync`` per page would cost seconds for a
guarantee the site does not need. What it does need — no partial site after a failed or
interrupted build — comes from the swap. After a power cut a page may be empty;
``tokenwatt build --check`` then reports it stale and the next build rewrites it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tokenwatt.files import DIR_MODE, FILE_MODE, sync_folder

SITE_MARKER = ".tokenwatt-site"
"""A file the build puts in every docs folder it makes: the folder may be replaced."""

SITE_MARKER_TEXT = (
    b"Made by `tokenwatt build`: this whole folder is replaced on every build.\n"
    b"Keep nothing else here.\n"
)

_LAYOUT_FILES = frozenset(
    {"index.md", "frontier.md", "schemas.md", "spec-reference.md", SITE_MARKER}
)
_LAYOUT_DIRS = frozenset({"reports", "methods", "guide", "schemas", "assets"})


def replace_refusal(docs_dir: Path, reports_dir: Path) -> str | None:
    """Why ``docs_dir`` must not be replaced by a build, or None when it may be.

    A build replaces the docs folder as a whole, so it refuses a folder that holds the
    report records, and a folder that it did not make: one without :data:`SITE_MARKER`
    holding any file outside the site's layout (``tokenwatt build --out ~`` or
    ``--out .`` would otherwise delete everything there). A missing or empty folder, or a
    site made by an earlier build, may be replaced.
    """
    docs, reports = docs_dir.resolve(), reports_dir.resolve()
    if docs == reports or docs in reports.parents:
        return (
            f"holds the report records ({reports_dir}); the build replaces this whole folder, "
            "so it would delete them: pass an --out of its own (default docs)"
        )
    if not docs_dir.is_dir() or (docs_dir / SITE_MARKER).is_file():
        return None
    foreign = sorted(
        rel
        for rel in existing_files(docs_dir)
        if rel not in _LAYOUT_FILES and rel.split("/", 1)[0] not in _LAYOUT_DIRS
    )
    if not foreign:
        return None
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    return (
        f"is not a site made by `tokenwatt build` (it holds {shown}); the build replaces "
        "this whole folder, so it would delete them: pass a new or empty --out"
    )


def existing_files(docs_dir: Path) -> set[str]:
    """Every file under ``docs_dir`` as a POSIX path relative to it (empty if absent)."""
    if not docs_dir.is_dir():
        return set()
    found: set[str] = set()
    for root, _dirs, names in os.walk(docs_dir):
        base = Path(root).relative_to(docs_dir)
        for name in names:
            found.add((base / name).as_posix())
    return found


def stale_paths(docs_dir: Path, outputs: dict[str, bytes]) -> list[str]:
    """Paths that differ between ``docs_dir`` and ``outputs``: changed, missing or extra."""
    present = existing_files(docs_dir)
    stale = sorted(present - outputs.keys())
    for rel, data in outputs.items():
        if rel not in present:
            stale.append(rel)
            continue
        target = docs_dir / rel
        if target.stat().st_size != len(data) or target.read_bytes() != data:
            stale.append(rel)
    return sorted(set(stale))


def swap_in(docs_dir: Path, outputs: dict[str, bytes], changed: set[str]) -> None:
    """Write ``outputs`` into a new folder beside ``docs_dir`` and swap it in.

    Unchanged files (not in ``changed``) are hard-linked from the current folder when the
    file system allows it, else copied. On any error the new folder is removed and
    ``docs_dir`` is left untouched.
    """
    parent = docs_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".tokenwatt-build-{docs_dir.name}-"))
    try:
        staging.chmod(DIR_MODE)  # mkdtemp makes 0700; the site is for reading by others
        made: set[Path] = {staging}
        for rel in sorted(outputs):
            target = staging / rel
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            old = docs_dir / rel
            if rel not in changed and old.is_file():
                try:
                    os.link(old, target)
                    continue
                except OSError:
                    pass
            target.write_bytes(outputs[rel])
            target.chmod(FILE_MODE)
        for root, _dirs, _names in os.walk(staging):
            sync_folder(Path(root))
        _swap(staging, docs_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap(staging: Path, docs_dir: Path) -> None:
    if not docs_dir.exists():
        staging.rename(docs_dir)
        sync_folder(docs_dir.parent)
        return
    retired = Path(
        tempfile.mkdtemp(dir=staging.parent, prefix=f".tokenwatt-build-{docs_dir.name}-old-")
    )
    retired.rmdir()
    docs_dir.rename(retired)
    try:
        staging.rename(docs_dir)
    except BaseException:
        retired.rename(docs_dir)
        raise
    sync_folder(docs_dir.parent)
    shutil.rmtree(retired, ignore_errors=True)
