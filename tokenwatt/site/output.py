"""Writing the generated docs folder: compare, then build beside it and swap it in.

The docs folder belongs to the build (generated and git-ignored). A build writes the whole
new folder next to it (``.tokenwatt-build-*``), then swaps it in with two renames, so a
build that fails half-way leaves the previous site as it was. Files whose bytes did not
change are hard-linked from the old folder instead of rewritten, so their modification
times stay put and ``mkdocs serve`` reloads only what changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


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
        made: set[Path] = set()
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
        _swap(staging, docs_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap(staging: Path, docs_dir: Path) -> None:
    if not docs_dir.exists():
        staging.rename(docs_dir)
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
    shutil.rmtree(retired, ignore_errors=True)
