"""URLs derived from an engine endpoint as a spec gives it (with or without ``/v1``)."""

from __future__ import annotations


def server_root_url(endpoint: str) -> str:
    """The server's root URL: ``endpoint`` without a trailing ``/v1`` (and slash).

    ``http://127.0.0.1:8000/v1/`` → ``http://127.0.0.1:8000``. Engine endpoints outside the
    OpenAI API (``/metrics``, ``/version``, ``/props``, ``/info``) live under the root.
    """
    root = endpoint.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root


def api_base_url(endpoint: str) -> str:
    """The OpenAI API base: the server root followed by ``/v1``."""
    return server_root_url(endpoint) + "/v1"
