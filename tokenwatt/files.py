"""File chores shared by every stage: atomic writes, an exclusive lock beside a file, the
same-file check and file hashing. No other module writes a file by temporary file and rename.

Atomic write policy (one for the whole package, :func:`atomic_file`): the bytes go to a
temporary file in the target's folder, which gets mode 0644 (``mkstemp`` makes 0600, which
would hide a record from the other users of a shared archive), is flushed and ``fsync``-ed,
and is renamed over the target with ``os.replace``; the folder is then ``fsync``-ed so the
rename survives a power cut. A reader never sees half a file, and a failure at any step
leaves the previous version in place and no temporary file behind.

Regenerable output (the page cache, the vega bundle cache) skips the two ``fsync`` calls
(``durable=False``): a build writes thousands of them, an ``fsync`` costs from half a
millisecond (a virtual disk) to ten (a laptop SSD with write barriers), and a copy lost to a
power cut is made again by the next build. The site itself is written into a new folder
that is swapped in whole (:mod:`tokenwatt.site.files.output`), which fsyncs once per folder
through :func:`sync_folder`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tokenwatt.errors import InputError, Problem, TokenwattError

FILE_MODE = 0o644
"""Mode of every file the package writes (rw-r--r--)."""

DIR_MODE = 0o755
"""Mode of a folder the package makes with ``mkdtemp`` (which makes 0700): rwxr-xr-x."""


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


@contextlib.contextmanager
def atomic_file(path: Path, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` atomically when the ``with`` block ends normally.

    The package's one write policy (see the module docstring). The folder is created if
    missing. If the block raises, the temporary file is removed and ``path`` is untouched.

    Args:
        path: the file to write.
        durable: ``fsync`` the file and its folder (False only for regenerable output).

    Raises:
        OSError: as raised by the file system (callers word it for their own message).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    if durable:
        sync_folder(path.parent)


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through :func:`atomic_file`.

    Raises:
        OSError: as raised by the file system; the previous version, if any, is intact.
    """
    with atomic_file(path, durable=durable) as handle:
        handle.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, with a message that names the file.

    Raises:
        WriteError: the folder cannot be created or the file cannot be written; the message
            names the file and the reason, and says the previous version is kept.
    """
    try:
        atomic_write_bytes(path, text.encode("utf-8"))
    except OSError as exc:
        reason = _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
        kept = "the previous version is kept" if path.exists() else "nothing was written"
        raise WriteError(f"{path}: cannot write it: {reason} ({kept})") from exc


def sync_folder(folder: Path) -> None:
    """``fsync`` a folder, so that the renames and new entries in it survive a power cut.

    Some file systems refuse ``fsync`` on a folder; the entries are written either way, so
    that refusal is ignored.
    """
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def same_file(a: Path, b: Path | None) -> bool:
    """Whether two paths name one file: through symbolic and hard links when both exist,
    else by resolved path (a link to a missing file and that file's path are one file).

    ``None`` (an option not given) is never the same file; a path that cannot be resolved
    (a link loop) is the same only as itself.
    """
    if b is None:
        return False
    with contextlib.suppress(OSError):
        return a.samefile(b)
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a link loop: RuntimeError before Python 3.13
        return a == b


def file_sha256(path: Path) -> str:
    """The SHA-256 (hex) of a file's bytes, read in blocks (``hashlib.file_digest``).

    Raises:
        OSError: the file cannot be read.
    """
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


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


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "WriteError",
    "atomic_file",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_regular_file",
    "exclusive_lock",
    "file_sha256",
    "same_file",
    "sync_folder",
]
