"""The box's side of a remote session: installing the package, starting ``tokenwatt
session`` detached, following its log and copying its records back.

Every remote step goes through :meth:`tokenwatt.cloud.remote_box.Box.call`, so an SSH drop
in the middle of one repeats it on a new connection. The steps are safe to repeat: a log
read only counts once its lines are passed on, a record copy only once it is written.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenwatt.cloud.remote_box import Box, asyncssh_module
from tokenwatt.cloud.remote_files import Upload
from tokenwatt.cloud.remote_stream import SESSION, Labeller, LineReader
from tokenwatt.files import atomic_write_bytes, file_sha256
from tokenwatt.records import Session

COPIED_SUFFIXES = (".json", ".requests.jsonl.gz", ".engine.log.gz", ".engine.log")
"""The files of the runs folder that come back: records, per-request data, engine logs
(compressed once the engine stopped; plain when a run was cut off while it ran)."""

_q = shlex.quote


@dataclass(frozen=True)
class Layout:
    """Where things are on the box.

    Attributes:
        work: the session's work folder (absolute).
        venv: the virtual environment with this package.
    """

    work: str
    venv: str

    @property
    def tree(self) -> str:
        """The mirror of the local folders (:class:`~tokenwatt.cloud.remote_files.Upload`)."""
        return f"{self.work}/tree"

    @property
    def runs(self) -> str:
        """The session's runs folder."""
        return f"{self.work}/runs"

    def file(self, name: str) -> str:
        """A file of the work folder (``session.log``, ``session.pid``, ``session.exit``)."""
        return f"{self.work}/{name}"


async def install(
    box: Box, layout: Layout, wheel: Path, *, python: str, on_line: Callable[[str, str], None]
) -> None:
    """Install ``wheel`` in the box's virtual environment (made if missing), unless the
    same wheel (by SHA-256) is already installed there.

    Raises:
        RemoteError: a step failed (the message has pip's last lines).
    """
    venv = layout.venv
    marker = f"{venv}/.tokenwatt-wheel.sha256"
    sha = await asyncio.to_thread(file_sha256, wheel)
    have = await box.run(f"cat {_q(marker)} 2>/dev/null || true", what="reading the marker")
    if have.strip() == sha:
        on_line(SESSION, f"{wheel.name} is already installed in {venv}")
        return
    on_line(SESSION, f"installing {wheel.name} in {venv} on the box")
    make = f"{_q(python)} -m venv --system-site-packages {_q(venv)}"
    await box.run(
        f"mkdir -p {_q(layout.work)} && (test -x {_q(venv)}/bin/python || {make})",
        what="making the virtual environment",
    )
    remote = f"{layout.work}/{wheel.name}"

    async def put(_conn: Any, sftp: Any) -> None:
        await sftp.put(str(wheel), remote)

    await box.call(put)
    pip = f"{_q(venv)}/bin/python -m pip --disable-pip-version-check --no-input"
    await box.run(
        f"{pip} install --quiet --force-reinstall --no-deps {_q(remote)}"
        f" && {pip} install --quiet {_q(remote)}"
        f" && {_q(venv)}/bin/tokenwatt --version"
        f" && printf %s {sha} > {_q(marker)}",
        what=f"installing {wheel.name}",
        timeout_s=1800.0,
    )


async def start_session(box: Box, layout: Layout, upload: Upload) -> None:
    """Copy the session's files to the box and start ``tokenwatt session`` there, detached
    (``nohup setsid``): output to ``session.log``, its pid to ``session.pid``, its exit
    status to ``session.exit`` (written by rename, so it is whole once it exists).

    Raises:
        RemoteError: the box stayed unreachable or a command failed.
    """
    tree = layout.tree
    cwd = upload.remote(tree, upload.cwd)
    targets = [(f, upload.remote(tree, f)) for f in upload.files]
    folders = {str(Path(r).parent) for _, r in targets} | {cwd, layout.runs}
    await box.run("mkdir -p " + " ".join(map(_q, sorted(folders))), what="making folders")
    session_remote = upload.remote(tree, upload.session_file)
    text = upload.session_text(layout.runs).encode("utf-8")

    async def put(_conn: Any, sftp: Any) -> None:
        for local, remote in targets:
            if local != upload.session_file:
                await sftp.put(str(local), remote)
        async with sftp.open(session_remote, "wb") as f:
            await f.write(text)

    await box.call(put)
    py = f"{_q(layout.venv)}/bin/python"
    pid, status = layout.file("session.pid"), layout.file("session.exit")
    script = (
        f"{py} -m tokenwatt session {_q(session_remote)} --no-progress & "
        f"echo $! > {_q(pid)}; wait $!; "
        f"echo $? > {_q(status)}.tmp && mv {_q(status)}.tmp {_q(status)}"
    )
    await box.run(
        f"cd {_q(cwd)} && PATH={_q(layout.venv + '/bin')}:$PATH PYTHONUNBUFFERED=1 "
        f"nohup setsid sh -c {_q(script)} > {_q(layout.file('session.log'))} 2>&1 < /dev/null & "
        # back once the pid is written, so that "no such process" later means it ended
        f"for i in $(seq 100); do test -s {_q(pid)} && exit 0; sleep 0.1; done; exit 1",
        what="starting tokenwatt session",
    )


@dataclass
class Follower:
    """Follows a started session: its log lines to ``on_line`` and the local log, its
    records into the local runs folder."""

    box: Box
    layout: Layout
    runs_dir: Path
    log: Path
    on_line: Callable[[str, str], None]
    reader: LineReader = field(default_factory=LineReader)
    labeller: Labeller = field(default_factory=Labeller)
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)
    _gone: int = 0

    def __post_init__(self) -> None:
        self.log.write_text("", encoding="utf-8")

    async def poll(self) -> int | None:
        """Read new log lines, copy changed records; the exit status once the session has
        ended (-1 when it is gone without one), else None."""
        status = await self._status()
        await self._read_log()
        await self._sync(final=False)
        return status

    async def finish(self) -> None:
        """After the end: the rest of the log and every record once more."""
        await self._read_log()
        if (rest := self.reader.rest()) is not None:
            self._emit([rest])
        await self._sync(final=True)

    async def signal(self, name: str) -> None:
        """Send signal ``name`` (TERM, KILL) to the remote ``tokenwatt session``."""
        pid = _q(self.layout.file("session.pid"))
        await self.box.run(
            f'kill -{name} "$(cat {pid})" 2>/dev/null || true', what=f"sending SIG{name}"
        )

    async def _status(self) -> int | None:
        exit_file, pid = _q(self.layout.file("session.exit")), _q(self.layout.file("session.pid"))
        out = await self.box.run(
            f"if [ -f {exit_file} ]; then cat {exit_file}; "
            f'elif kill -0 "$(cat {pid})" 2>/dev/null; then echo running; else echo gone; fi',
            what="checking the session",
        )
        word = out.strip()
        if word.lstrip("-").isdigit():
            return int(word)
        self._gone = self._gone + 1 if word == "gone" else 0
        return -1 if self._gone >= 2 else None  # twice: not the instant before the exit file

    async def _read_log(self) -> None:
        ssh = asyncssh_module()
        path = self.layout.file("session.log")

        async def read(_conn: Any, sftp: Any) -> tuple[bytes, int]:
            at = self.reader.offset
            try:
                async with sftp.open(path, "rb") as f:
                    return bytes(await f.read(-1, at)), at
            except ssh.SFTPNoSuchFile:
                return b"", at

        data, at = await self.box.call(read)
        self._emit(self.reader.feed(data, at))

    def _emit(self, lines: list[str]) -> None:
        if not lines:
            return
        with self.log.open("a", encoding="utf-8") as out:
            out.writelines(f"{line}\n" for line in lines)
        for line in lines:
            self.on_line(self.labeller(line), line)

    async def _sync(self, *, final: bool) -> None:
        for sub in ("", "smoke"):
            folder = f"{self.layout.runs}/{sub}".rstrip("/")
            for name, key in await self._listing(folder):
                rel = f"{sub}/{name}" if sub else name
                if final or self.copied.get(rel) != key:
                    await self._copy(f"{folder}/{name}", rel, key)

    async def _listing(self, folder: str) -> list[tuple[str, tuple[int, int]]]:
        ssh = asyncssh_module()

        async def ls(_conn: Any, sftp: Any) -> list[Any]:
            try:
                return list(await sftp.readdir(folder))
            except ssh.SFTPNoSuchFile:
                return []

        return [
            (str(n.filename), (int(n.attrs.size or 0), int(n.attrs.mtime or 0)))
            for n in await self.box.call(ls)
            if not str(n.filename).startswith(".") and str(n.filename).endswith(COPIED_SUFFIXES)
        ]

    async def _copy(self, remote: str, rel: str, key: tuple[int, int]) -> None:
        async def get(_conn: Any, sftp: Any) -> bytes:
            async with sftp.open(remote, "rb") as f:
                return bytes(await f.read())

        data = await self.box.call(get)
        if rel.endswith(".json"):
            try:
                json.loads(data)
            except ValueError:  # not a whole record (cannot happen with atomic writes)
                return
        await asyncio.to_thread(atomic_write_bytes, self.runs_dir / rel, data)
        self.copied[rel] = key

    def _records(self, session: Session, sub: str) -> list[Path]:
        rels = [f"{sub}{c.label}.json" for c in session.configurations]
        return [self.runs_dir / r for r in rels if r in self.copied]

    def runs(self, session: Session) -> list[Path]:
        """The session-mode records copied back, in the session file's order."""
        return self._records(session, "")

    def smoke(self, session: Session) -> list[Path]:
        """The smoke-run records copied back, in the session file's order."""
        return self._records(session, "smoke/")

    def incomplete(self) -> list[Path]:
        """The copied records whose ``complete`` is false."""
        out = []
        for rel in sorted(r for r in self.copied if r.endswith(".json")):
            path = self.runs_dir / rel
            if json.loads(path.read_text(encoding="utf-8")).get("complete") is not True:
                out.append(path)
        return out


__all__ = ["COPIED_SUFFIXES", "Follower", "Layout", "install", "start_session"]
