"""Fixtures of the collect tests: the scripted server of :mod:`streaming_server`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from streaming_server import ScriptedServer


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
