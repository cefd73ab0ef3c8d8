"""Run llama.cpp's own C++ HTTP server (embedded in the ``xllamacpp`` wheel) on 127.0.0.1.

``xllamacpp`` has no command-line entry point, so this script is one. It serves until
SIGTERM or SIGINT and prints ``READY <address> startup_s=<s>`` once the server listens.
The parameter names are those of the pinned ``xllamacpp==2026.10.11549`` (they change
between releases, which is why the version is pinned in ``pyproject.toml``).

Usage: python serve_llamacpp.py MODEL.gguf --port P [--parallel 4] [--ctx 8192] [--alias tiny]
"""

from __future__ import annotations

import argparse
import signal
import threading
import time


def main() -> None:
    """Parse arguments, start the server, block until a termination signal."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=8192, help="total KV-cache context, tokens")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--alias", default="tiny")
    ap.add_argument("--threads-http", type=int, default=-1, help="HTTP threads (-1: default)")
    a = ap.parse_args()

    import xllamacpp as xlc

    t0 = time.perf_counter()
    p = xlc.CommonParams()
    p.model.path = a.model
    p.hostnames = ["127.0.0.1"]  # loopback only
    p.port = a.port
    p.n_parallel = a.parallel
    p.n_ctx = a.ctx
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.endpoint_metrics = True  # Prometheus /metrics (llamacpp:*)
    p.endpoint_slots = True
    p.n_threads_http = a.threads_http
    p.model_alias = {a.alias}
    srv = xlc.Server(p)
    print(f"READY {srv.listening_address} startup_s={time.perf_counter() - t0:.3f}", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    del srv


if __name__ == "__main__":
    main()
