"""Fixtures of the load generator's tests: an instant streaming server in a process of its own."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from loadgen_helpers import INSTANT_SERVER


@pytest.fixture
def instant_server() -> Iterator[str]:
    """An instant streaming server in a process of its own, so that serving does not share
    the client's event loop (and, on two cores, its core).

    The same script as ``SERVER`` in benchmarks/wire_arrivals.py; left as two copies while
    the worker-process work reshapes that benchmark (merge them after it lands).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-c", INSTANT_SERVER, str(port)])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError("the instant server did not start")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
