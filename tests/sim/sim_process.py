"""Start ``tokenwatt sim`` as a child process on 127.0.0.1 with a free port, and stop it."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass
class SimProcess:
    """A running simulator: its process and base URL (``http://127.0.0.1:PORT``)."""

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


def start_sim(*args: str, timeout_s: float = 20.0) -> SimProcess:
    """Run ``python -m tokenwatt sim --port 0 ARGS`` and wait for its "serving" line."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenwatt", "sim", "--host", "127.0.0.1", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        if "serving" in line and "http://" in line:
            return SimProcess(proc, line.strip().rsplit(" ", 1)[-1])
    proc.kill()
    proc.wait()
    raise RuntimeError("tokenwatt sim did not start")
