"""A whole ``tokenwatt session`` on a remote box over SSH, and the box's own watchdog.

:func:`run_remote_session` does everything that happens once the box has an address and
accepts SSH (:mod:`tokenwatt.cloud.remote_box` keeps the connection up):

1. installs this package in a virtual environment on the box (``--system-site-packages``,
   so an image's own CUDA, PyTorch or vLLM stay visible), from a wheel of the local checkout
   copied over SFTP; pip fetches the dependencies from PyPI there. The wheel's SHA-256 is
   kept beside the environment: the same wheel is not installed twice.
2. copies the session file and the files it names
   (:func:`~tokenwatt.cloud.remote_files.plan_upload`) into a work folder, and starts
   ``tokenwatt session`` there detached from the SSH channel
   (``setsid nohup``, output to ``session.log``, its pid and then its exit status to files),
   so a dropped connection does not stop it.
3. follows ``session.log`` from a byte offset (:mod:`tokenwatt.cloud.remote_stream`),
   passing each line to ``on_line`` with its configuration's label; after an SSH drop it
   connects again and goes on from the offset, so no line is lost or repeated.
4. copies every run record, its ``.requests.jsonl.gz`` and ``.engine.log`` back into the
   local runs folder as soon as they change (records are written atomically on the box
   after every window; each local copy is written atomically too), and all of them once more
   after the session ended.

:func:`arm_watchdog` schedules the box's own shutdown, so a crash of the local process
cannot leave it running for ever: ``sudo shutdown -h +N`` with N the deadline plus a margin
in minutes. Whether a shut-down instance still bills depends on the provider; the
orchestrator's terminate remains the first line of defence.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokenwatt.cloud.remote_box import Box, RemoteTarget
from tokenwatt.cloud.remote_files import RemoteError, build_wheel, plan_upload
from tokenwatt.cloud.remote_stream import SESSION
from tokenwatt.cloud.remote_sync import Follower, Layout, install, start_session

WATCHDOG_CMD = "sudo shutdown -h +{minutes}"
"""The default watchdog command; ``{minutes}`` is the delay in whole minutes."""

WATCHDOG_ENV = "TOKENWATT_WATCHDOG_CMD"
"""Environment variable that replaces :data:`WATCHDOG_CMD` (e.g. for a box without sudo)."""


@dataclass
class RemoteResult:
    """What a remote session brought back.

    Attributes:
        runs: the session-mode run records copied into the runs folder (each with its
            ``.requests.jsonl.gz`` and ``.engine.log`` beside it when the box wrote them).
        failed: labels of the configurations that failed on the box.
        incomplete: the copied records (runs and smoke runs) whose ``complete`` is false.
        exit_status: the remote ``tokenwatt session``'s exit status (143 when the deadline
            stopped it with SIGTERM, -1 when it ended without writing one).
        log: the local copy of the whole remote output.
        smoke: smoke-run records copied into ``RUNS_DIR/smoke/``.
        host_key_fingerprint: the box's SSH host key (SHA-256 fingerprint).
        deadline_hit: the session was stopped because ``deadline_s`` had passed.
    """

    runs: list[Path]
    failed: list[str]
    incomplete: list[Path]
    exit_status: int
    log: Path
    smoke: list[Path] = field(default_factory=list)
    host_key_fingerprint: str = ""
    deadline_hit: bool = False


async def run_remote_session(
    target: RemoteTarget,
    session_file: Path,
    runs_dir: Path,
    *,
    deadline_s: float,
    on_line: Callable[[str, str], None],
    package: Path | None = None,
    python: str = "python3",
    reconnect_s: float = 120.0,
    remote_dir: str | None = None,
    venv: str | None = None,
    poll_s: float = 1.0,
    stop_grace_s: float = 60.0,
    connect_timeout_s: float = 30.0,
    keepalive_s: float = 15.0,
) -> RemoteResult:
    """Run ``tokenwatt session`` on the box and bring its run records back (module docstring).

    Args:
        target: the box.
        session_file: the local session YAML; it and the files it names travel to the box.
        runs_dir: local folder the records are copied into (the session's own ``runs_dir``
            is replaced by a folder on the box).
        deadline_s: after this many seconds of running, the remote session gets SIGTERM (its
            runs keep partial records), then SIGKILL ``stop_grace_s`` later. The box's own
            shutdown is :func:`arm_watchdog`'s, called separately.
        on_line: called with (configuration label, or ``"session"``; line) for every line
            of the remote output, as it comes.
        package: a wheel of this package to install (None: built from the local checkout).
        python: the box's Python, which makes the virtual environment.
        reconnect_s: how long to keep trying to connect again after an SSH drop.
        remote_dir: the work folder on the box (default ``~/tokenwatt-sessions/STEM-UTC``).
        venv: the virtual environment on the box (default ``~/.tokenwatt/venv``).
        poll_s: seconds between reads of the log and the runs folder.
        stop_grace_s: seconds between SIGTERM and SIGKILL once the deadline passed.
        connect_timeout_s: limit on one SSH connection attempt.
        keepalive_s: seconds between SSH keepalives (three unanswered end the connection).

    Raises:
        InputError: the session file or its spec is invalid (before connecting).
        RemoteError: SSH refused the key or the host key, the box stayed unreachable for
            ``reconnect_s``, or the installation failed.
    """
    upload = plan_upload(session_file)
    wheel = package if package is not None else await asyncio.to_thread(build_wheel)
    await asyncio.to_thread(runs_dir.mkdir, parents=True, exist_ok=True)
    box = Box(
        target,
        connect_timeout_s=connect_timeout_s,
        keepalive_s=keepalive_s,
        reconnect_s=reconnect_s,
        notice=lambda message: on_line(SESSION, message),
    )
    async with box:
        seen = "accepted on first use" if box.first_use else "verified"
        on_line(SESSION, f"connected to {target} (host key {box.fingerprint}, {seen})")
        home = (await box.run('printf %s "$HOME"', what="find the home folder")).strip()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        work = remote_dir or f"{home}/tokenwatt-sessions/{upload.session_file.stem}-{stamp}"
        layout = Layout(work=work, venv=venv or f"{home}/.tokenwatt/venv")
        await install(box, layout, wheel, python=python, on_line=on_line)
        await start_session(box, layout, upload)
        on_line(SESSION, f"tokenwatt session started on the box in {work}")
        log = runs_dir / f"{upload.session_file.stem}.remote.log"
        follower = Follower(box, layout, runs_dir, log, on_line)
        status, deadline_hit = await _follow(follower, deadline_s, poll_s, stop_grace_s)
        return RemoteResult(
            runs=follower.runs(upload.session),
            failed=list(follower.labeller.failed),
            incomplete=follower.incomplete(),
            exit_status=status,
            log=log,
            smoke=follower.smoke(upload.session),
            host_key_fingerprint=box.fingerprint,
            deadline_hit=deadline_hit,
        )


async def _follow(
    follower: Follower, deadline_s: float, poll_s: float, grace_s: float
) -> tuple[int, bool]:
    """Follow the session until it ends (stopping it at the deadline, and when this task is
    cancelled); its exit status and whether the deadline stopped it."""
    ends = time.monotonic() + deadline_s
    stopped_at: float | None = None
    try:
        while (status := await follower.poll()) is None:
            now = time.monotonic()
            if stopped_at is None and now >= ends:
                follower.on_line(SESSION, f"deadline of {deadline_s:g} s reached: stopping")
                await follower.signal("TERM")
                stopped_at = now
            elif stopped_at is not None and now >= stopped_at + grace_s:
                await follower.signal("KILL")
                stopped_at = math.inf
            await asyncio.sleep(poll_s)
    except asyncio.CancelledError:
        await _stop_on_cancel(follower, grace_s)
        raise
    await follower.finish()
    return status, stopped_at is not None


async def _stop_on_cancel(follower: Follower, grace_s: float) -> None:
    """The local side was cancelled (Ctrl-C, SIGTERM): stop the remote session and copy
    what it kept, within ``grace_s``; the caller goes on to terminate the box either way."""
    follower.on_line(SESSION, "cancelled: stopping the remote session")

    async def stop() -> None:
        await follower.signal("TERM")
        while await follower.poll() is None:  # noqa: ASYNC110 (a remote state, polled)
            await asyncio.sleep(0.5)
        await follower.finish()

    try:
        await asyncio.wait_for(stop(), grace_s)
    except (TimeoutError, RemoteError) as exc:
        follower.on_line(SESSION, f"could not stop the remote session cleanly: {exc}")


async def arm_watchdog(
    target: RemoteTarget,
    deadline_s: float,
    *,
    margin_s: float = 900.0,
    command: str | None = None,
    connect_timeout_s: float = 30.0,
) -> None:
    """Schedule the box's own shutdown, so a crash of the local process cannot leak it.

    Runs ``command`` (default: the ``TOKENWATT_WATCHDOG_CMD`` environment variable, else
    ``sudo shutdown -h +{minutes}``) on the box, with ``{minutes}`` the deadline plus the
    margin rounded up to whole minutes (``shutdown``'s unit). ``shutdown -c`` on the box
    cancels it. A later call schedules again (systemd's ``shutdown`` keeps the last one).

    Args:
        target: the box.
        deadline_s: the session's deadline (s).
        margin_s: time added for copying back and terminating (s).
        command: the shell command, with ``{minutes}`` (and ``{seconds}``) placeholders.
        connect_timeout_s: limit on the SSH connection attempt.

    Raises:
        RemoteError: SSH failed or the command exited non-zero (the box is then not
            guarded: do not go on).
    """
    seconds = max(0.0, deadline_s) + max(0.0, margin_s)
    minutes = max(1, math.ceil(seconds / 60))
    template = command or os.environ.get(WATCHDOG_ENV) or WATCHDOG_CMD
    line = template.format(minutes=minutes, seconds=math.ceil(seconds))
    async with Box(target, connect_timeout_s=connect_timeout_s, reconnect_s=0.0) as box:
        await box.run(line, what="arming the watchdog", timeout_s=60.0)


__all__ = [
    "WATCHDOG_CMD",
    "WATCHDOG_ENV",
    "RemoteError",
    "RemoteResult",
    "RemoteTarget",
    "arm_watchdog",
    "run_remote_session",
]
