"""The instant streaming server of the load-generator benchmarks: Debian's nginx answering
every POST with one prebuilt OpenAI-style SSE body, ``chunks`` vLLM-shaped token chunks
(``choices[0].text``), a usage chunk and ``[DONE]``, from one worker pinned to one core
(``benchmarks/loadgen.py``, ``benchmarks/peers.py``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

CHUNKS = 32
PROMPT_TOKENS = 16


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
    """Write an nginx configuration under ``folder`` that answers every POST on ``port`` with
    the prebuilt ``chunks``-chunk stream; its path."""
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
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_nginx(
    folder: Path, core: int, chunks: int = CHUNKS
) -> tuple[subprocess.Popen[bytes], str]:
    """nginx serving ``chunks``-chunk streams from ``folder``, pinned to ``core``: the process
    and its base URL; exits the script when nginx is not installed."""
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
