"""Fixtures of the load generator's tests: an instant streaming server in a process of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loadgen_helpers import INSTANT_SERVER, serve_script


@pytest.fixture
def instant_server() -> Iterator[str]:
    """An instant streaming server (``benchmarks/instant_server.py``) in a process of its own,
    so that serving does not share the client's event loop (and, on two cores, its core)."""
    proc, endpoint = serve_script(INSTANT_SERVER)
    try:
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)
