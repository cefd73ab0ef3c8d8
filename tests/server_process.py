"""A test server in a child process on 127.0.0.1 (``tokenwatt sim``, the scripted engine):
start it, wait for the URL it prints, stop it by its own pid.

A child process, so that the server's CPU time does not share the test's interpreter lock
with the load generator whose timing the tests measure, and so that it can be killed the
way a crashing engine dies.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class ServerProcess:
    """A running server: its process and root URL (``http://127.0.0.1:PORT``)."""

    proc: subprocess.Popen[str]
    url: str

    @property
    def endpoint(self) -> str:
        """The OpenAI-compatible base URL (``…/v1``)."""
        return self.url + "/v1"

    def stop(self) -> None:
        """Terminate the process (by its own pid) and wait for it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def kill(self) -> None:
        """SIGKILL: the engine dies without a goodbye."""
        self.proc.kill()
        self.proc.wait(timeout=10)


def start_server_process(
    argv: Sequence[str], *, merge_stderr: bool = False, timeout_s: float = 20.0
) -> tuple[subprocess.Popen[str], str]:
    """Run ``argv`` in the repository root (with it on ``PYTHONPATH``) and wait, at most
    ``timeout_s``, for a line ``… serving … http://…``; returns the process and that URL.

    Raises:
        RuntimeError: the process exited or printed no such line in time (it is killed).
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else None,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if "serving" in line and "http://" in line:
            return proc, line.strip().rsplit(" ", 1)[-1]
    proc.kill()
    proc.wait()
    raise RuntimeError(f"{argv[1:]} did not start: {''.join(seen[-3:])!r}")
