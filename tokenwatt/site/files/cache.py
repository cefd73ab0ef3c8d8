"""A content-addressed cache of rendered report pages.

A page depends only on its record's bytes, its file name and the code and templates that
render it, so the SHA-256 of those is its key. With nothing changed, a rebuild reads each
record and its cached page and renders nothing (no validation, no Altair).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import tokenwatt
from tokenwatt.files import atomic_write_bytes

_CODE_PACKAGES = ("site", "analysis", "records")


def code_key(templates: Path, extra: str = "") -> str:
    """Hash of everything that shapes a page: our source, the templates, Altair's version,
    and ``extra`` (other build inputs, such as the names of the repository's spec files)."""
    digest = hashlib.sha256(f"altair {version('altair')}\n".encode() + extra.encode() + b"\0")
    # Every module of those stages, their rooms' included, named by its path in the package:
    # a change anywhere in them may change a page.
    package = Path(tokenwatt.__file__).resolve().parent
    files = [p for sub in _CODE_PACKAGES for p in sorted((package / sub).rglob("*.py"))]
    for path in files:
        name = path.relative_to(package).as_posix()
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    for path in sorted(p for p in templates.rglob("*") if p.is_file()):
        name = path.relative_to(templates).as_posix()
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class PageCache:
    """Rendered pages on disk under ``folder``, one JSON file per key."""

    def __init__(self, folder: Path, code: str, *, writable: bool = True) -> None:
        self.folder = folder
        self.code = code
        self.writable = writable

    def key(self, file: str, raw: bytes) -> str:
        """The cache key of a record file's page."""
        digest = hashlib.sha256(self.code.encode() + b"\0" + file.encode() + b"\0")
        digest.update(raw)
        return digest.hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached entry, or None (absent or unreadable: the page is rendered again)."""
        path = self.folder / f"{key}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Store an entry (no-op when the cache is read-only, as under ``--check``, or cannot
        be written: a full or read-only disk makes the next build slower, not fail)."""
        if not self.writable:
            return
        text = json.dumps(entry, sort_keys=True, ensure_ascii=False)
        with contextlib.suppress(OSError):
            atomic_write_bytes(self.folder / f"{key}.json", text.encode("utf-8"), durable=False)
