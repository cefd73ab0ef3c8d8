"""File chores shared by every stage: atomic writes, an exclusive lock beside a file.

Atomic write policy (one for the whole package): the text goes to a temporary file in the
target's folder, is flushed and ``fsync``-ed, gets mode 0644 (``mkstemp`` makes 0600, which
would hide a record from the other users of a shared archive), and is renamed over the
target with ``os.replace``; the folder is then ``fsync``-ed so the rename survives a power
cut. A reader never sees half a file, and a failure at any step leaves the previous version
in place and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tokenwatt.errors import InputError, Problem, TokenwattError

FILE_MODE = 0o644
"""Mode of every file the package writes (rw-r--r--)."""


class WriteError(TokenwattError):
    """A file could not be written (disk full, read-only, no permission); the previous
    version, if any, is intact."""


_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see the module docstring).

    Raises:
        WriteError: the folder cannot be created or the file cannot be written; the message
            names the file and the reason, and says the previous version is kept.
    """
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), FILE_MODE)
            os.fsync(f.fileno())
        Path(tmp).replace(path)
        tmp = None
        _fsync_dir(path.parent)
    except OSError as exc:
        reason = _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
        kept = "the previous version is kept" if path.exists() else "nothing was written"
        raise WriteError(f"{path}: cannot write it: {reason} ({kept})") from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()


def _fsync_dir(folder: Path) -> None:
    # Some file systems refuse fsync on a folder; the rename is done either way.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_regular_file(path: Path, *, what: str, max_bytes: int) -> None:
    """Refuse, without reading it, a file that is not a plain file or is too large.

    A FIFO would block the read forever and ``/dev/zero`` would fill the memory; a folder
    or a missing file gets the same clear error, before anything is measured.

    Args:
        path: the file a spec or an option names.
        what: what it is, for the message (``trace``, ``engine log``).
        max_bytes: the largest size accepted.

    Raises:
        InputError: missing, not a plain file, or larger than ``max_bytes``.
    """
    try:
        info = path.stat()
    except OSError as exc:
        problem = f"cannot read the {what}: {exc.strerror or exc}"
        raise InputError([Problem(str(path), "", problem)]) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a plain file"
        raise InputError([Problem(str(path), "", f"the {what} is {kind}; give a file")])
    if info.st_size > max_bytes:
        problem = f"the {what} is {info.st_size:,} bytes, more than the {max_bytes:,} accepted"
        raise InputError([Problem(str(path), "", problem)])


@contextlib.contextmanager
def exclusive_lock(path: Path, *, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a hidden ``.NAME.lock`` file beside it) or fail.

    The lock is ``flock``-based, so it dies with the process that holds it: a crashed run
    never leaves a stale lock that blocks the next one.

    Args:
        path: the file to guard (e.g. a run record).
        what: the activity, for the message (``tokenwatt collect``).

    Raises:
        InputError: another process holds the lock (exit status 2, nothing written).
        WriteError: the lock file cannot be created.
    """
    path = path.resolve()  # a symlink and its target are one file: one lock
    lock = path.parent / f".{path.name}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        reason = _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
        raise WriteError(f"{path}: cannot create its lock file: {reason}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(
                [Problem(str(path), "", f"another {what} is writing this file; wait for it")]
            ) from None
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                lock.unlink()
    finally:
        os.close(fd)


__all__ = ["FILE_MODE", "WriteError", "atomic_write_text", "check_regular_file", "exclusive_lock"]
