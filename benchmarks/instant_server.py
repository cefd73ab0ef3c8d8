"""An instant streaming server: every POST to ``/v1/completions`` gets one token, its usage and
``[DONE]`` at once. Run as ``python benchmarks/instant_server.py PORT`` (127.0.0.1), in a
process of its own so that serving does not share the client's event loop;
``benchmarks/wire_arrivals.py`` and the load generator's wire-arrival tests use it."""

import sys

from aiohttp import web

BODY = (
    b'data: {"choices":[{"text":" a"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\n\n'
    b"data: [DONE]\n\n"
)


async def handle(request: web.Request) -> web.Response:
    """Read the request, answer the whole stream."""
    await request.read()
    return web.Response(body=BODY, content_type="text/event-stream")


if __name__ == "__main__":
    app = web.Application()
    app.router.add_post("/v1/completions", handle)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
