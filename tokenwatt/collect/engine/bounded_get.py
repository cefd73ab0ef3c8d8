"""One bounded GET for the synchronous reads of ``collect`` and ``init`` (probes, health
checks): at most so many bytes, within one overall deadline.

A per-read timeout alone lets a server that drips its answer a byte at a time hold the
caller for as long as it likes; the deadline here is checked after every chunk and caps
every single read as well.
"""

from __future__ import annotations

import time
from typing import Any

import httpx


class BodyTooLargeError(Exception):
    """An answer longer than the limit the reader was given (it was not read further)."""


class DeadlineError(httpx.TimeoutException):
    """A request outlasted its overall deadline (a server dripping its answer byte by byte
    passes every per-read timeout). An ``httpx.HTTPError``, so callers that handle a failed
    request handle this one too."""


def get_capped(
    client: httpx.Client,
    url: str,
    max_bytes: int,
    *,
    refuse_html: bool = False,
    deadline_s: float | None = None,
    **kw: Any,
) -> tuple[int, bytes]:
    """GET ``url`` and read at most ``max_bytes`` of its body, streamed, within one overall
    deadline.

    Args:
        client: the client (its headers apply).
        url: what to GET.
        max_bytes: the most body read (bytes).
        refuse_html: treat an HTML answer as no answer (status 415).
        deadline_s: the whole request's time limit, from the call to the last byte
            (s); default: the client's read timeout. No single read waits longer either.
        kw: passed to :meth:`httpx.Client.stream`.

    Returns:
        The status code and the body; no body (read) for a status other than 200, or for an
        HTML page when ``refuse_html`` (a login page or proxy error is no metrics text).

    Raises:
        BodyTooLargeError: the server announced or sent more than ``max_bytes``.
        DeadlineError: the answer was still coming at the deadline.
        httpx.HTTPError: the request failed.
    """
    if deadline_s is None:
        deadline_s = client.timeout.read if client.timeout.read is not None else 10.0
    end = time.monotonic() + deadline_s
    kw.setdefault("timeout", deadline_s)
    with client.stream("GET", url, **kw) as r:
        if r.status_code != 200 or (
            refuse_html and "text/html" in r.headers.get("content-type", "")
        ):
            return (r.status_code if r.status_code != 200 else 415), b""
        announced = r.headers.get("content-length", "")
        if announced.isdigit() and int(announced) > max_bytes:
            raise BodyTooLargeError(f"{announced} bytes announced")
        body = bytearray()
        for chunk in r.iter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise BodyTooLargeError(f"more than {max_bytes:,} bytes")
            if time.monotonic() > end:
                message = f"no complete answer within {deadline_s:g} s ({len(body):,} bytes)"
                raise DeadlineError(message, request=r.request)
        return r.status_code, bytes(body)


__all__ = ["BodyTooLargeError", "DeadlineError", "get_capped"]
