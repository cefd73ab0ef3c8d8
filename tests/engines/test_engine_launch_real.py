"""`collect` starting and stopping a real engine itself: llama.cpp's server through
``--engine-cmd``, vLLM through the spec's ``engine.launch`` (with its ``env``). One smoke
run each on the generated tiny model; afterwards nothing of the engine is left."""

from __future__ import annotations

import gzip
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from engine_servers import HERE, MODEL_NAME, VLLM_ENV, VLLM_KV_BLOCKS, VLLM_MAX_MODEL_LEN
from tiny_model import TinyModel

from tokenwatt.records import RunRecord, load_spec

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "fixtures" / "tiny-engine.spec.yaml"


def _spec(tmp_path: Path, launch: dict[str, Any] | None = None) -> Path:
    data = load_spec(SPEC).model_dump(mode="json")
    if launch is not None:
        data["engine"]["launch"] = launch
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _collect(spec: Path, out: Path, *extra: str, timeout_s: float) -> RunRecord:
    argv = [
        sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec), "--label", "launched",
        "--role", "baseline", "--mode", "smoke", "--out", str(out), "--no-progress", *extra,
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, done.stderr[-3000:]
    return RunRecord.model_validate_json(out.read_text())


def _assert_engine_gone(record: RunRecord) -> None:
    """Nothing listens on the engine's port, and no process has it on its command line."""
    ep = record.engine_process
    assert ep is not None and ep.stop in ("sigterm", "sigkill")
    port = int(record.spec.engine.endpoint.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as s, pytest.raises(OSError):
        s.settimeout(2)
        s.connect(("127.0.0.1", port))
    needle = f"--port\0{port}\0".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert needle not in cmdline.read_bytes(), f"{cmdline.parent} still runs"
        except OSError:
            continue


@pytest.mark.engine
def test_collect_starts_llamacpp_server_and_stops_it(tiny_model: TinyModel, tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp", reason="xllamacpp (the test extra) is not installed")
    serve = [sys.executable, str(HERE / "serve_llamacpp.py"), str(tiny_model.gguf)]
    cmd = shlex.join([*serve, "--port", "{port}", "--alias", MODEL_NAME, "--parallel", "4"])
    out = tmp_path / "runs" / "launched.json"
    record = _collect(_spec(tmp_path), out, "--engine-cmd", cmd, timeout_s=300)
    assert record.complete and record.environment.engine_name == "llama.cpp"
    assert record.environment.served_models == [MODEL_NAME] and record.repeats
    ep = record.engine_process
    assert ep is not None and ep.argv[:3] == serve and ep.ready_after_s is not None
    log = tmp_path / "runs" / "launched.engine.log.gz"
    assert ep.log == log.as_posix() and "READY" in gzip.decompress(log.read_bytes()).decode()
    # llama.cpp's log as the archive keeps it: compressed, with what it held before
    assert ep.log_bytes is not None and log.stat().st_size < ep.log_bytes
    _assert_engine_gone(record)


@pytest.mark.engine
def test_point_and_shoot_against_llamacpp_then_show(tiny_model: TinyModel, tmp_path: Path) -> None:
    """No spec: flags only, llama.cpp started by collect; `show` reads the record and its
    per-request file. Two fixed Poisson windows get exactly rate × duration requests."""
    pytest.importorskip("xllamacpp", reason="xllamacpp (the test extra) is not installed")
    serve = [sys.executable, str(HERE / "serve_llamacpp.py"), str(tiny_model.gguf)]
    cmd = shlex.join([*serve, "--port", "{port}", "--alias", MODEL_NAME, "--parallel", "4"])
    out = tmp_path / "point.json"
    argv = [
        sys.executable, "-m", "tokenwatt", "collect", "--endpoint", "http://127.0.0.1:{port}/v1",
        "--model", MODEL_NAME, "--engine-cmd", cmd, "--rates", "2,4", "--input-tokens", "16",
        "--output-tokens", "8", "--duration", "3", "--warmup", "0.5",
        "--vocab-size", str(tiny_model.vocab_size), "--no-progress", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    record = RunRecord.model_validate_json(out.read_text())
    windows = [r.window for r in record.repeats]
    assert [(w.rate_rps, w.requests, w.errors) for w in windows] == [(2.0, 6, 0), (4.0, 12, 0)]
    assert record.spec.workload.input_tokens is not None
    assert record.spec.workload.input_tokens.median == 16
    shown = subprocess.run(
        [sys.executable, "-m", "tokenwatt", "show", str(out), "--requests", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert record.requests_log is not None and record.requests_log.requests >= 18
    _assert_engine_gone(record)


@pytest.mark.engine
@pytest.mark.vllm
def test_collect_starts_vllm_from_the_spec_and_stops_it(
    vllm_python: Path, tiny_model: TinyModel, tmp_path: Path
) -> None:
    argv = [
        str(vllm_python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(tiny_model.hf_dir), "--served-model-name", MODEL_NAME,
        "--host", "127.0.0.1", "--port", "{port}", "--dtype", "float32",
        "--max-model-len", str(VLLM_MAX_MODEL_LEN), "--max-num-seqs", "16",
        "--num-gpu-blocks-override", str(VLLM_KV_BLOCKS), "--enforce-eager",
    ]  # fmt: skip
    launch = {"argv": argv, "env": VLLM_ENV, "startup_timeout_s": 600, "stop_grace_s": 30}
    out = tmp_path / "launched.json"
    record = _collect(_spec(tmp_path, launch), out, timeout_s=900)
    assert record.complete and record.environment.engine_name == "vllm"
    assert record.engine_process is not None
    assert record.engine_process.env_names == sorted(VLLM_ENV)
    _assert_engine_gone(record)


def _readme_llamacpp_commands() -> list[str]:
    """The guide's `collect --engine-cmd` commands that start llama.cpp's server (the
    "Measuring your own server" page, once the README's), as written (continuation lines
    joined)."""
    page = REPO / "site_templates" / "guide" / "measuring-your-server.md"
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    lines = [b.replace("\\\n", " ") for b in blocks]
    return [
        " ".join(line.split())
        for block in lines
        for line in block.splitlines()
        if line.startswith("tokenwatt collect --engine-cmd") and "MODEL.gguf" in line
    ]


def test_the_readme_llama_server_command_is_one_collect_can_take() -> None:
    """The README's `llama-server` command (no binary here to run it: the Python route
    below runs the same flags' equivalent): one `--engine-cmd` with the `{port}` placeholder,
    bound to 127.0.0.1, the endpoint on that port, and options collect accepts."""
    from tokenwatt.cli import cli

    (command,) = [c for c in _readme_llamacpp_commands() if "llama-server" in c]
    argv = shlex.split(command)
    engine = shlex.split(argv[argv.index("--engine-cmd") + 1])
    assert engine[0] == "llama-server" and "{port}" in engine
    assert engine[engine.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--endpoint") + 1] == "http://127.0.0.1:{port}/v1"
    # Every option of the command is one collect knows (click parses them; --help stops it).
    done = CliRunner().invoke(cli, [*argv[1:], "--help"])
    assert done.exit_code == 0, done.output


def _readme_python_route(tiny_model: TinyModel, out: Path) -> list[str]:
    """The README's xllamacpp `collect` command as a process's argv: the tiny model's file
    and name in, this interpreter, ``out`` as the record, no live display."""
    (command,) = [c for c in _readme_llamacpp_commands() if "serve_llamacpp.py" in c]
    argv = shlex.split(command.replace("MODEL.gguf", shlex.quote(str(tiny_model.gguf))))
    at = argv.index("--engine-cmd") + 1
    engine = argv[at].replace("my-model", MODEL_NAME)
    argv[at] = engine.replace("python ", f"{shlex.quote(sys.executable)} ", 1)
    argv = [a.replace("my-model", MODEL_NAME) for a in argv]
    argv[argv.index("--out") + 1] = str(out)
    return [sys.executable, "-m", *argv, "--no-progress"]


@pytest.mark.engine
def test_the_readme_llamacpp_python_route_runs_as_written(
    tiny_model: TinyModel, tmp_path: Path
) -> None:
    """The README command that starts llama.cpp's server through xllamacpp under `collect`,
    run as written (from the repository root, as the README says) but for the model file and
    its name. It gives no `--vocab-size`: collect takes the tiny model's vocabulary from the
    server (its ids below 32,000 would be refused), says so, and no request fails. The
    record says which engine the server reported, and the per-request windows have exactly
    rate × duration requests."""
    pytest.importorskip("xllamacpp", reason="xllamacpp (the test extra) is not installed")
    out = tmp_path / "runs" / "llamacpp.json"
    argv = _readme_python_route(tiny_model, out)
    assert "--vocab-size" not in argv
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    record = RunRecord.model_validate_json(out.read_text())
    assert record.spec.model.vocab_size == tiny_model.vocab_size
    vocab = f"{tiny_model.vocab_size:,}"
    assert f"vocabulary: token ids below {vocab}, as the server reports" in done.stderr
    windows = [r.window for r in record.repeats]
    assert [(w.rate_rps, w.requests, w.errors) for w in windows] == [(2.0, 6, 0), (4.0, 12, 0)]
    assert record.environment.engine_name == "llama.cpp"
    version = record.environment.engine_version
    assert f"engine: llama.cpp {version} as the server reports it" in done.stderr
    assert "# engine.name unknown: no flag names the engine" in done.stderr
    if version == "b0-unknown":  # the xllamacpp wheel: built without llama.cpp's git history
        assert "has no build number or commit to report" in done.stderr
    _assert_engine_gone(record)


@pytest.mark.engine
def test_a_stated_vocabulary_larger_than_the_servers_is_refused_before_the_first_request(
    tiny_model: TinyModel, tmp_path: Path
) -> None:
    """The same command with `--vocab-size 32000` (what the README once needed the other
    way round): ids below 32,000 to a 2,048-token model, which llama.cpp would refuse with
    HTTP 400 on every request. collect refuses the run once the server has answered
    /v1/models: exit 2, the flag and both sizes named, no record."""
    pytest.importorskip("xllamacpp", reason="xllamacpp (the test extra) is not installed")
    out = tmp_path / "runs" / "llamacpp.json"
    argv = [*_readme_python_route(tiny_model, out), "--vocab-size", "32000"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    vocab = f"{tiny_model.vocab_size:,}"
    assert f"--vocab-size: is 32,000, but the served model has {vocab} tokens" in done.stderr
    assert f"set it to {tiny_model.vocab_size}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


@pytest.mark.engine
def test_the_guides_first_look_runs_as_written_against_the_tiny_llamacpp_model(
    llamacpp_server: Any, tmp_path: Path
) -> None:
    """The guide's first look (section 1: flags only, no spec, no --vocab-size) against
    llama.cpp serving the tiny 2,048-token model: only the endpoint, the model name and the
    output are put in. Every request succeeds because the token ids stay below the
    vocabulary the server reports."""
    page = REPO / "site_templates" / "guide" / "measuring-your-server.md"
    text = page.read_text(encoding="utf-8").split("## 1. A first look", 1)[1]
    block = re.findall(r"```sh\n(.*?)```", text, flags=re.S)[0].replace("\\\n", " ")
    argv = shlex.split(block)
    assert argv[:2] == ["tokenwatt", "collect"] and "--vocab-size" not in argv
    argv[argv.index("--endpoint") + 1] = llamacpp_server.endpoint
    argv[argv.index("--model") + 1] = MODEL_NAME
    out = tmp_path / "first.json"
    argv[argv.index("--out") + 1] = str(out)
    done = subprocess.run(
        [sys.executable, "-m", *argv, "--no-progress"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = RunRecord.model_validate_json(out.read_text())
    assert record.spec.model.vocab_size == 2048
    windows = [r.window for r in record.repeats]
    assert [w.rate_rps for w in windows] == [5.0, 10.0, 20.0]
    assert all(w.requests > 0 and w.errors == 0 for w in windows), windows
