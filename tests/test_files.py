"""Atomic writes and the lock beside a file, on real file systems where the machine lets the
tests mount a small tmpfs (else with the same OSError injected at the write)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenwatt.errors import InputError
from tokenwatt.files import WriteError, atomic_write_text, exclusive_lock


def _mount(target: Path, options: str) -> bool:
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture
def small_fs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, bool]]:
    """A 64 KiB tmpfs (True) or a plain folder whose fsync raises ENOSPC for big files (False)."""
    target = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    target.mkdir()
    mounted = _mount(target, "size=64k")
    if not mounted:
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            if os.fstat(fd).st_size > 64 * 1024:
                raise OSError(errno.ENOSPC, "No space left on device")
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
    try:
        yield target, mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(target)], check=False)


def test_a_full_disk_keeps_the_last_good_version_and_leaves_no_temp_file(
    small_fs: tuple[Path, bool],
) -> None:
    folder, _ = small_fs
    out = folder / "run.json"
    atomic_write_text(out, '{"ok": 1}\n')
    with pytest.raises(WriteError) as info:
        atomic_write_text(out, "x" * 200_000)
    assert str(info.value) == (
        f"{out}: cannot write it: the disk is full (the previous version is kept)"
    )
    assert out.read_text() == '{"ok": 1}\n'
    assert sorted(p.name for p in folder.iterdir()) == ["run.json"]


def test_a_read_only_file_system_is_one_clear_line(tmp_path: Path) -> None:
    target = tmp_path / "ro"
    target.mkdir()
    if not _mount(target, "size=64k"):
        pytest.skip("cannot mount a tmpfs here (not root, or no mount permission)")
    try:
        out = target / "run.json"
        atomic_write_text(out, "first\n")
        subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
        with pytest.raises(WriteError, match="the file system is read-only"):
            atomic_write_text(out, "second\n")
        assert out.read_text() == "first\n"
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_written_files_are_readable_by_everyone(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "run.json"
    atomic_write_text(out, "x\n")
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


_HOLD = """
import sys, time
from pathlib import Path
from tokenwatt.files import exclusive_lock
with exclusive_lock(Path(sys.argv[1]), what="tokenwatt collect"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _holder(out: Path) -> subprocess.Popen[str]:
    """Another process that takes the lock on ``out`` and holds it until a line on stdin."""
    return subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )


def test_a_second_writer_of_the_same_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    holder = _holder(out)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError) as info, exclusive_lock(out, what="tokenwatt collect"):
            pass
        assert "another tokenwatt collect is writing this file" in str(info.value)
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
        holder.stdout.close()
    # Released with its process: the next writer gets it, and the lock file goes away.
    with exclusive_lock(out, what="tokenwatt collect"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    holder = _holder(out)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(timeout=10)
    holder.stdout.close()
    assert holder.stdin is not None
    holder.stdin.close()
    with exclusive_lock(out, what="tokenwatt collect"):
        pass


def test_a_symlink_and_its_target_share_one_lock(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with (
        exclusive_lock(target, what="tokenwatt collect"),
        pytest.raises(InputError),
        exclusive_lock(link, what="tokenwatt collect"),
    ):
        pass


def test_special_files_are_refused_without_being_read(tmp_path: Path) -> None:
    """A FIFO would block a read forever and /dev/zero would fill the memory."""
    from tokenwatt.collect.engine.probes import scan_engine_log
    from tokenwatt.collect.workload.trace import load_trace
    from tokenwatt.files import check_regular_file

    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as info:
        load_trace(fifo)
    assert str(info.value) == f"{fifo}: the trace is not a plain file; give a file"
    with pytest.raises(InputError, match="the trace is not a plain file"):
        load_trace("/dev/zero")
    with pytest.raises(InputError, match="the engine log is a folder"):
        scan_engine_log(tmp_path)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(InputError, match="the trace is 2,048 bytes, more than the 1,024"):
        check_regular_file(big, what="trace", max_bytes=1024)


def test_same_file_follows_links_and_resolves_missing_paths(tmp_path: Path) -> None:
    from tokenwatt.files import same_file

    a = tmp_path / "a.json"
    a.write_text("{}\n")
    (tmp_path / "hard.json").hardlink_to(a)
    (tmp_path / "soft.json").symlink_to(a)
    (tmp_path / "dangling.json").symlink_to(tmp_path / "missing.json")
    (tmp_path / "b.json").write_text("{}\n")
    assert same_file(a, tmp_path / "hard.json")
    assert same_file(tmp_path / "soft.json", a)
    assert same_file(tmp_path / "sub" / ".." / "a.json", a)
    assert same_file(tmp_path / "dangling.json", tmp_path / "missing.json")
    assert not same_file(a, tmp_path / "b.json")
    assert not same_file(a, tmp_path / "missing.json")
    assert not same_file(a, None)


def test_file_sha256_is_the_digest_of_the_bytes(tmp_path: Path) -> None:
    from tokenwatt.files import file_sha256

    path = tmp_path / "abc"
    path.write_bytes(b"abc")
    # FIPS 180-2, appendix B.1: SHA-256("abc").
    assert file_sha256(path) == ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


def test_an_error_inside_atomic_file_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    from tokenwatt.files import atomic_file

    out = tmp_path / "report.json"
    out.write_text("old\n")
    with pytest.raises(ValueError, match="half-way"), atomic_file(out) as handle:
        handle.write(b"new")
        raise ValueError("half-way")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
