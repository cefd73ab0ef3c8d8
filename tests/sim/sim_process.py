"""Start ``tokenwatt sim`` as a child process on 127.0.0.1 with a free port, and stop it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from tests.server_process import REPO, start_server_process
from tests.server_process import ServerProcess as SimProcess
from tokenwatt.records import RunRecord

__all__ = ["REPO", "SimProcess", "SimRun", "start_sim"]


@dataclass(frozen=True)
class SimRun:
    """A finished ``collect`` run: its record file (the request file beside it), the record
    and what ``collect`` printed (the ``sim_run`` fixture of ``tests/sim/conftest.py``)."""

    path: Path
    record: RunRecord
    stdout: str


def start_sim(*args: str, timeout_s: float = 20.0) -> SimProcess:
    """Run ``python -m tokenwatt sim --port 0 ARGS`` and wait for its "serving" line.

    Raises:
        RuntimeError: it did not start within ``timeout_s``.
    """
    argv = [sys.executable, "-m", "tokenwatt", "sim", "--host", "127.0.0.1", "--port", "0"]
    proc, url = start_server_process([*argv, *args], merge_stderr=True, timeout_s=timeout_s)
    return SimProcess(proc, url)
