"""``tokenwatt replicate`` on real llama.cpp, which ``collect`` starts itself: measured
again with the command the record keeps, the note holds; with the server cut from four
slots to one (``--parallel 1``), the replication disagrees and says which figure, and
names the engine command as the setting that changed."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from engine_servers import HERE, MODEL_NAME
from tiny_model import TinyModel

from tokenwatt.records import ReplicationV1, load_spec

REPO = Path(__file__).resolve().parents[2]


def _tokenwatt(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenwatt", *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


@pytest.mark.engine
def test_replicate_on_llamacpp_holds_then_disagrees_with_fewer_slots(
    tiny_model: TinyModel, tmp_path: Path
) -> None:
    pytest.importorskip("xllamacpp", reason="xllamacpp (the test extra) is not installed")
    data = load_spec(REPO / "tests" / "fixtures" / "tiny-engine.spec.yaml").model_dump(mode="json")
    # 512-token answers at 1-2 req/s: about 1,000 tokens/s, well under what llama.cpp decodes
    # on this 2-core machine. (1,024 tokens at 2 req/s was metastable there: a burst of
    # arrivals slowed every stream's decoding, TPOT 0.8 -> 1.7 ms, holds grew, and one repeat
    # queued for a second, TTFT p50 1.1 s, beyond doubt against its own search.) A slot is held
    # 0.1-0.25 s, so four slots at 2 req/s are all busy for under 1 request in 1,000 (Erlang C,
    # 0.5 erl) and a first token comes within a few ms. With one slot, a request that arrives
    # behind another waits past the 30 ms p99 TTFT: one in ten to five at 1 req/s, one in four
    # or more at 2, so it misses at 1 req/s, or beyond doubt at 2. A contended machine's one
    # slow request on four slots is a miss not beyond doubt, which contradicts nothing
    # (methods/replication.md).
    data["measurement"].update(
        {"repeats": 2, "window_s": 8.0, "search_window_s": 8.0, "warmup_s": 1.0}
    )
    data["workload"]["output_tokens"] = {"median": 512, "p90": 512}
    data["sweep"].update({"start_rps": 1, "growth": 2, "max_rps": 2, "bisect_steps": 0})
    data["slo"].update({"ttft_p99_ms": 30, "tpot_p99_ms": 100})
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tiny.spec.yaml").write_text(yaml.safe_dump(data), "utf-8")
    serve = [sys.executable, str(HERE / "serve_llamacpp.py"), str(tiny_model.gguf)]
    base = [*serve, "--port", "{port}", "--alias", MODEL_NAME]
    done = _tokenwatt(
        tmp_path, "collect", "--spec", "specs/tiny.spec.yaml", "--label", "slots4",
        "--role", "baseline", "--mode", "full", "--out", "runs/slots4.json", "--no-progress",
        "--no-accuracy", "--engine-cmd", shlex.join([*base, "--parallel", "4"]),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    done = _tokenwatt(tmp_path, "report", "runs/slots4.json", "--title", "Tiny", "--demo")
    assert done.returncode == 0, done.stderr[-3000:]
    same = _tokenwatt(tmp_path, "replicate", "reports/tiny.json", "--no-progress")
    assert same.returncode == 0, same.stdout + same.stderr[-3000:]
    assert "replication agrees" in same.stdout
    fewer = _tokenwatt(
        tmp_path, "replicate", "reports/tiny.json", "--no-progress",
        "--engine-cmd", shlex.join([*base, "--parallel", "1"]),
    )  # fmt: skip
    assert fewer.returncode == 3, fewer.stdout + fewer.stderr[-3000:]
    assert "replication disagrees" in fewer.stdout
    goodput = next(x for x in fewer.stdout.splitlines() if x.startswith("SLO goodput"))
    # Either reason holds: a miss beyond doubt where four slots met the SLO, or a goodput
    # whose interval lies wholly lower (one slot backed off below the published rate).
    assert "→ disagree (" in goodput, goodput
    assert "the replication missed the SLO at " in goodput or "wholly lower" in goodput, goodput
    assert "settings that differ: Engine command (collect started it)" in fewer.stdout
    reps = [
        ReplicationV1.model_validate_json(p.read_text("utf-8"))
        for p in sorted((tmp_path / "replications").glob("*.json"))
    ]
    assert sorted(r.verdict for r in reps) == ["agrees", "disagrees"]
