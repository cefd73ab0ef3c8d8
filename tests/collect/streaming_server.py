"""A scripted OpenAI-style streaming server on 127.0.0.1 (real HTTP, aiohttp.web).

Imported by name (``from streaming_server import ...``), not from ``conftest``: a module
named ``conftest`` is whichever test folder's conftest was imported first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def chunk(
    text: str | None = None,
    *,
    usage: dict[str, int] | None = None,
    chat: bool = False,
    finish: str | None = None,
) -> bytes:
    """One vLLM-shaped SSE event (``data: {...}\\n\\n``); ``finish``: its finish_reason."""
    obj: dict[str, Any] = {"id": "cmpl-1", "object": "text_completion", "model": "m"}
    if text is None:
        obj["choices"] = []
    elif chat:
        obj["choices"] = [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]
    else:
        obj["choices"] = [{"index": 0, "text": text, "finish_reason": finish}]
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


DONE = b"data: [DONE]\n\n"


async def stream(request: web.Request, pieces: list[bytes]) -> web.StreamResponse:
    """Send ``pieces`` as separate writes of one text/event-stream response."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for piece in pieces:
        await resp.write(piece)
        await asyncio.sleep(0)  # let each piece go out as its own write
    await resp.write_eof()
    return resp


def tokens_stream(n: int, *, with_usage: bool = True, chat: bool = False) -> list[bytes]:
    pieces = [chunk(f" t{i}", chat=chat) for i in range(n)]
    if with_usage:
        pieces.append(chunk(usage=usage(3, n)))
    pieces.append(DONE)
    return pieces


@dataclass
class ScriptedServer:
    """Answers every POST with ``handler``; keeps each request's JSON body and headers."""

    port: int = 0
    handler: Handler | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        self.headers.append(dict(request.headers))
        self.paths.append(request.path)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            assert self.handler is not None
            return await self.handler(request)
        finally:
            self.in_flight -= 1
