"""What the load generator needs to know about the engine and the limits (:class:`LoadConfig`):
the endpoint, the request body and headers of every request, and the per-run settings."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tokenwatt.collect.engine.endpoints import api_base_url
from tokenwatt.collect.load.http import keeps_streams_alive
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.errors import InputError, Problem
from tokenwatt.netpath import NetworkPath, network_path
from tokenwatt.records import ArrivalProcess, LoadProfile, SloSpec, Spec


@dataclass(frozen=True)
class LoadConfig:
    """What the load generator needs to know about the engine and the limits.

    Attributes:
        endpoint: OpenAI-compatible base URL ending in ``/v1``, e.g. ``http://127.0.0.1:8000/v1``.
        model: the ``model`` field of every request.
        slo: the latency limits (ms), for the running display and the summary.
        api: ``completions`` (token-id or text prompts) or ``chat`` (text prompts only).
        api_key: bearer token, read by the caller from the environment variable the spec
            names; never logged (left out of ``repr``).
        ignore_eos: send ``ignore_eos: true`` so outputs are exactly ``max_tokens`` long.
        max_concurrency: most requests in flight; later ones wait for a slot (their TTFT
            still counts from the scheduled time).
        request_timeout_s: per request, from the send to the end of the stream (s).
        extra_body: extra JSON fields merged into every request body.
        keep_alive: reuse connections between requests (HTTP keep-alive); False sends
            every request on a new connection with ``Connection: close``, for servers that
            close streamed connections anyway (llama.cpp's; see
            :mod:`tokenwatt.collect.load.http`).
        count_tokens: the model's tokenizer (text -> tokens), used after the window to
            count outputs of a server that sends no ``usage``; None: chunks, an estimate.
        arrivals: how each window's arrival times are drawn (``measurement.arrivals``):
            ``conditioned``, an exact count in the window, or ``poisson``
            (:func:`tokenwatt.collect.load.arrivals.window_schedule`).
        profile: how load is offered (``measurement.profile``): ``poisson``, ``constant``
            (:func:`tokenwatt.collect.load.arrivals.load_schedule`) or ``concurrency`` (closed
            loop, :mod:`tokenwatt.collect.load.closedloop`).
        path: direct, or the proxy from the environment that ``engine.proxy`` lets apply
            (:func:`tokenwatt.netpath.network_path`), the same path as the probes and
            ``/metrics`` take.
    """

    endpoint: str
    model: str
    slo: SloSpec
    api: Literal["completions", "chat"] = "completions"
    api_key: str | None = field(default=None, repr=False)
    ignore_eos: bool = True
    max_concurrency: int = 256
    request_timeout_s: float = 600.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    keep_alive: bool = True
    count_tokens: Callable[[str], int] | None = field(default=None, repr=False)
    arrivals: ArrivalProcess = "conditioned"
    profile: LoadProfile = "poisson"
    path: NetworkPath = field(default_factory=NetworkPath)

    @classmethod
    def from_spec(
        cls,
        spec: Spec,
        *,
        environ: Mapping[str, str] | None = None,
        engine_name: str | None = None,
    ) -> LoadConfig:
        """Build from a spec; the API key comes from ``engine.api_key_env`` in ``environ``.

        ``engine_name`` is the probe's (``EngineInfo.engine_name``): llama.cpp's server
        gets a fresh connection per request (``keep_alive=False``).

        Raises:
            InputError: the spec names an API-key variable that is not set.
        """
        env = os.environ if environ is None else environ
        key = None
        if spec.engine.api_key_env:
            key = env.get(spec.engine.api_key_env)
            if not key:
                raise InputError(
                    [
                        Problem(
                            "<spec>",
                            "engine.api_key_env",
                            f"environment variable {spec.engine.api_key_env} is not set",
                        )
                    ]
                )
        return cls.for_spec(spec, api_key=key, engine_name=engine_name)

    @classmethod
    def for_spec(
        cls,
        spec: Spec,
        *,
        api_key: str | None,
        engine_name: str | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> LoadConfig:
        """Build from a spec with the API key already read (see :meth:`from_spec`)."""
        return cls(
            endpoint=spec.engine.endpoint,
            model=spec.engine.model,
            slo=spec.slo,
            api=spec.engine.api,
            api_key=api_key,
            ignore_eos=spec.engine.ignore_eos,
            max_concurrency=spec.measurement.max_concurrency,
            request_timeout_s=spec.measurement.request_timeout_s,
            keep_alive=keeps_streams_alive(engine_name),
            count_tokens=count_tokens,
            arrivals=spec.measurement.arrivals,
            profile=spec.measurement.profile,
            path=network_path(api_base_url(spec.engine.endpoint), spec.engine.proxy),
        )

    @property
    def url(self) -> str:
        """The streaming endpoint's full URL; ``endpoint`` may be given with or without
        ``/v1`` (the same normalisation as the probes and the preflight)."""
        path = "/chat/completions" if self.api == "chat" else "/completions"
        return api_base_url(self.endpoint) + path

    def body(self, spec: RequestSpec) -> bytes:
        """The JSON request body for one request.

        Raises:
            InputError: a token-id prompt for the chat API (which takes text only).
        """
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": spec.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.api == "chat":
            if not isinstance(spec.prompt, str):
                raise InputError("the chat API takes text prompts, not token ids")
            payload["messages"] = [{"role": "user", "content": spec.prompt}]
        else:
            payload["prompt"] = spec.prompt
        if self.ignore_eos:
            payload["ignore_eos"] = True
        payload.update(self.extra_body)
        return json.dumps(payload, separators=(",", ":")).encode()

    def headers(self) -> dict[str, str]:
        """HTTP headers of every request (the bearer token when there is a key).

        ``Accept-Encoding: identity`` replaces aiohttp's default ``gzip, deflate``: a
        compressing server or proxy (Starlette's GZipMiddleware, tower-http's
        CompressionLayer) buffers events until its compressor flushes, so arrival times
        would no longer be the tokens'; the client reads the stream undecompressed.
        """
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


__all__ = ["LoadConfig"]
