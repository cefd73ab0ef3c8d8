"""Fixtures of the collect tests: the scripted server of :mod:`streaming_server`, and an idle
scripted engine in its own process (:mod:`scripted_engine`) for tests that run ``collect``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from scripted_engine import EngineProcess, start_engine
from streaming_server import ScriptedServer

# The Ray tests' cluster listens on 127.0.0.1 only: with this off, Ray takes the loopback
# address as every node's instead of turning it into the host's own address. Ray reads it
# into a constant when first imported, so it is set before any test can import Ray.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    scripted = ScriptedServer()
    app = web.Application()
    app.router.add_post("/v1/completions", scripted.handle)
    app.router.add_post("/v1/chat/completions", scripted.handle)
    http = TestServer(app, host="127.0.0.1", port=0)
    await http.start_server(shutdown_timeout=0.1)
    scripted.port = http.port
    try:
        yield scripted
    finally:
        await http.close()


@pytest.fixture
def engine() -> Iterator[EngineProcess]:
    """An idle scripted engine (a module's own ``engine`` fixture takes precedence)."""
    proc = start_engine("idle")
    try:
        yield proc
    finally:
        proc.stop()
