"""The launched engine's log writer and watchdog: ``python -m tokenwatt.engine_log``.

A process of its own (not a thread of ``collect``), so that an engine that logs a line per
request costs the load generator nothing. It reads the engine's standard output and error
from its standard input, scrubs each line of credentials
(:func:`tokenwatt.redact.scrub`, plus the exact values of every environment variable whose
name says it holds a secret — the engine inherits the same environment — and the values
``collect`` lists in :data:`SECRETS_ENV`), and appends it to
the log file, flushed line by line so that ``tail -f`` and an error message's tail see it.

It is also the engine's watchdog: if ``collect`` disappears without stopping the engine
(SIGKILL, a crash of the interpreter), this process is re-parented; it then sends SIGTERM
to the engine's process group and SIGKILL after the grace period, so that no engine is
left holding the GPU.

Usage: ``python -c "...main(sys.argv[1:])" LOG PGID GRACE_S [PARENT_PID]`` (PGID 0: no watchdog;
PARENT_PID: the process whose death stops the engine, by default the parent at start).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tokenwatt.redact import scrub, secret_name

POLL_S = 0.5
"""How often the watchdog looks at its parent while the engine is quiet (s)."""
MAX_LINE_BYTES = 65536
"""A line longer than this is written in pieces, so memory stays bounded."""
OVERLAP_CHARS = 4096
"""Characters of a long line's scrubbed piece held back and scrubbed again with the next
piece: a secret (in any of its forms, far shorter than this) that straddles the cut is then
whole in one of the two scrubs, and what is written has been scrubbed with it whole."""


SECRETS_ENV = "TOKENWATT_LOG_SECRETS"
"""Environment variable through which ``collect`` hands this process the exact values to
scrub besides those :func:`secret_values` finds (the key of the variable the spec's
``engine.api_key_env`` names, whatever that name is), one per line. The environment, not
the command line: a command line is visible to every user in ``ps``."""


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The values of the variables whose names say they hold a secret, and the values
    listed in :data:`SECRETS_ENV` (each 4+ characters), longest first, so that a key
    containing another is removed whole."""
    named = {v for k, v in environ.items() if k != SECRETS_ENV and secret_name(k)}
    listed = set(environ.get(SECRETS_ENV, "").split("\n"))
    values = {v for v in named | listed if len(v) >= 4}
    return sorted(values, key=len, reverse=True)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running (zombies do not count).

    On Linux from ``/proc`` (a zombie whose parent does not reap it would otherwise count);
    elsewhere ``killpg(pgid, 0)``.
    """
    proc = Path("/proc")
    if not (proc / "self").is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            return True
    return False


def stop_group(pgid: int, grace_s: float) -> bool:
    """SIGTERM to the group, then SIGKILL to what is left after ``grace_s``.

    Returns:
        True when SIGKILL was needed.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return False
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _pump(log_path: str, pgid: int, grace_s: float, parent: int) -> None:
    secrets = secret_values(os.environ)
    stdin = sys.stdin.buffer
    pending = b""
    with Path(log_path).open("ab") as log:
        while True:
            ready, _, _ = select.select([stdin], [], [], POLL_S)
            if pgid and os.getppid() != parent:
                stop_group(pgid, grace_s)
                pgid = 0  # once; keep writing what the engine says while it stops
            if not ready:
                continue
            chunk = os.read(stdin.fileno(), 65536)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if not chunk and pending:
                lines.append(pending)  # the last line, without its newline
                pending = b""
            for line in lines:
                text = line.decode("utf-8", errors="replace")
                log.write((scrub(text, secrets) + "\n").encode())
            if len(pending) > MAX_LINE_BYTES:
                # A progress bar without newlines: write its start, scrubbed, and keep the
                # scrubbed tail to scrub again with what follows (OVERLAP_CHARS).
                text = scrub(pending.decode("utf-8", errors="replace"), secrets)
                log.write(text[:-OVERLAP_CHARS].encode())
                pending = text[-OVERLAP_CHARS:].encode()
            log.flush()
            if not chunk:
                return


def main(argv: list[str]) -> int:
    """The process's entry point (see the module docstring); exit status 0 at end of input."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # collect decides when the engine stops
    log_path, pgid, grace_s = argv[0], int(argv[1]), float(argv[2])
    # The parent's pid comes from the parent: read here with os.getppid(), a collect killed
    # while this process was still starting would already be gone, and never missed.
    parent = int(argv[3]) if len(argv) > 3 else os.getppid()
    _pump(log_path, pgid, grace_s, parent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
