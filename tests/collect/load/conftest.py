"""Fixtures of the load generator's tests: an instant streaming server in a process of its own,
and the event loops a test marked ``@BOTH_LOOPS`` runs on (asyncio's own and uvloop, the
load's default: :mod:`tokenwatt.collect.load.event_loop`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping

import pytest
from loadgen_helpers import INSTANT_SERVER, serve_script

try:
    import uvloop
except ImportError:  # not on Windows: those tests run on asyncio's loop only
    uvloop = None

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, LoopFactory]:
    """asyncio's own loop for every test here; uvloop's too for one that asks for both with
    ``@pytest.mark.asyncio(loop_factories=[...])`` (``loadgen_helpers.BOTH_LOOPS``)."""
    marker = item.get_closest_marker("asyncio")
    if uvloop is not None and marker is not None and "loop_factories" in marker.kwargs:
        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


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
