"""End to end: the accuracy runner and the gate against ``tokenwatt sim`` in accuracy mode.

The simulated engine answers a suite item right when a coin drawn from
SHA-256("{sim seed}:{request seed}:{item id}") falls below ``--accuracy-p``; the same coin
is used at every p, so a sim at p = 0.88 gets right a subset of what one at p = 0.96 gets
right (no item goes the other way: c = 0 in McNemar's table).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gsm8k_splits import Gsm8kSplits
from tokenwatt.analysis.accuracy.paired import accuracy_summary
from tokenwatt.collect.accuracy.runner import run_suite_async
from tokenwatt.collect.accuracy.suites import build_suite_file, load_suite
from tokenwatt.records import Spec, load_spec

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"
SIM_SEED = 1
STARTUP_S = 60.0


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory, gsm8k: Gsm8kSplits) -> tuple[Path, Path]:
    """A real 5-shot GSM8K suite (the excerpt's 45 items, seed 0) and a zero-shot copy of it.

    The simulated engine's KV cache is scaled down (4,096 tokens) so an SLO search runs in
    seconds; it holds only three 5-shot prompts (~1,100 tokens each) at a time. The
    zero-shot copy has the same ids, questions and golds with prompts of ~60 tokens, so 45
    items take about a second.
    """
    folder = tmp_path_factory.mktemp("suites")
    five_shot = folder / "gsm8k-45.jsonl"
    build_suite_file(gsm8k.test, gsm8k.train, 45, 0, five_shot)
    zero_shot = folder / "gsm8k-45-0shot.jsonl"
    lines = []
    for item in load_suite(five_shot):
        prompt = f"Question: {item.question.strip()}\nAnswer:"
        row = {"id": item.id, "question": item.question, "prompt": prompt, "gold": item.gold}
        lines.append(json.dumps(row, ensure_ascii=False))
    zero_shot.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return five_shot, zero_shot


def start_sim(suite: Path, p: float) -> subprocess.Popen[bytes]:
    """Start ``tokenwatt sim`` on a free port of 127.0.0.1 (the URL comes on stdout)."""
    cmd = [sys.executable, "-m", "tokenwatt", "sim", "--host", "127.0.0.1", "--port", "0"]
    cmd += ["--profile", "fp8-kv", "--seed", str(SIM_SEED)]
    cmd += ["--accuracy-suite", str(suite), "--accuracy-p", str(p)]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def read_url(proc: subprocess.Popen[bytes]) -> str:
    """The URL from the sim's first stdout line, waiting at most ``STARTUP_S``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + STARTUP_S
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                pytest.fail(f"tokenwatt sim did not start within {STARTUP_S:g} s: {line!r}")
            chunk = proc.stdout.read1(4096)  # type: ignore[attr-defined]
            if not chunk:
                pytest.fail(f"tokenwatt sim exited: {line!r}")
            line += chunk
    text = line.decode().splitlines()[0]
    assert text.startswith("tokenwatt sim: serving"), text
    return text.rsplit(" ", 1)[1]


@pytest.fixture(scope="module")
def sims(suites: tuple[Path, Path]) -> Iterator[dict[str, str]]:
    """Three sims started together: zero-shot at p 0.96 and 0.88, five-shot at p 1."""
    five_shot, zero_shot = suites
    procs = {
        "0.96": start_sim(zero_shot, 0.96),
        "0.88": start_sim(zero_shot, 0.88),
        "5shot": start_sim(five_shot, 1.0),
    }
    try:
        yield {name: read_url(proc) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


def seed_spec() -> Spec:
    """The seed run's spec: 50 items (all 45 of the excerpt), one seed, greedy, threshold 1
    point; short answers."""
    spec = load_spec(SPEC)
    assert spec.accuracy.limit == 50 and spec.accuracy.seeds == 1
    assert spec.accuracy.max_drop_pts == 1.0
    acc = spec.accuracy.model_copy(update={"max_tokens": 32})
    return spec.model_copy(update={"accuracy": acc})


def coin(item_id: str, request_seed: int = 0) -> float:
    """The sim's documented coin for an item (uniform in [0, 1))."""
    digest = hashlib.sha256(f"{SIM_SEED}:{request_seed}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


async def test_gate_fails_at_p_088_passes_at_p_096_with_hand_computed_statistics(
    sims: dict[str, str], suites: tuple[Path, Path]
) -> None:
    _, zero_shot = suites
    spec = seed_spec()
    baseline, tuned, again = await asyncio.gather(
        run_suite_async(spec, sims["0.96"], None, zero_shot),
        run_suite_async(spec, sims["0.88"], None, zero_shot),
        run_suite_async(spec, sims["0.96"], None, zero_shot),
    )
    # The coin on the excerpt's 45 items puts 42 below 0.96 and 37 below 0.88: 93.3% ->
    # 82.2%, and the five lost items are the only discordant ones (b=5, c=0).
    ids = [it.id for it in load_suite(zero_shot)]
    assert len(ids) == 45
    assert sum(coin(i) < 0.96 for i in ids) == 42
    assert sum(coin(i) < 0.88 for i in ids) == 37
    assert [it.correct for it in baseline.seeds[0].items] == [coin(i) < 0.96 for i in ids]
    assert baseline.score_pct == pytest.approx(4200 / 45)
    assert tuned.score_pct == pytest.approx(3700 / 45)
    assert all(it.error is None for it in tuned.seeds[0].items)

    fail = accuracy_summary(baseline, tuned, spec.accuracy.max_drop_pts)
    assert fail.record.delta_pts == pytest.approx(-500 / 45)
    assert not fail.verdict.passed
    assert fail.table is not None
    assert (fail.table.baseline_only, fail.table.tuned_only) == (5, 0)
    # McNemar exact, two-sided: 2 * P(X = 0 | X ~ Binomial(5, 1/2)) = 2 / 32 = 0.0625.
    assert fail.record.mcnemar_p == pytest.approx(0.0625, abs=1e-12)
    # Bootstrap: resampled Δ = -K·100/45 points, K ~ Binomial(45, 5/45). P(K <= 1) = 0.033
    # puts the upper end at K = 1; P(K >= 10) = 0.0237 is within the 10,000 seeded
    # resamples' noise (±0.0015) of 2.5%, and they put the lower end at K = 10. The interval
    # [-22.2, -2.22] is wholly below -1 point, so no "needs the full suite" note.
    assert fail.record.ci_low_pts == pytest.approx(-1000 / 45)
    assert fail.record.ci_high_pts == pytest.approx(-100 / 45)
    assert fail.note is None and not fail.needs_full_suite

    same = accuracy_summary(baseline, again, spec.accuracy.max_drop_pts)
    assert same.verdict.passed
    assert same.record.delta_pts == 0.0
    assert same.record.mcnemar_p == 1.0
    assert (same.record.ci_low_pts, same.record.ci_high_pts) == (0.0, 0.0)


async def test_the_sim_answers_real_five_shot_prompts(
    sims: dict[str, str], suites: tuple[Path, Path]
) -> None:
    five_shot, _ = suites
    result = await run_suite_async(seed_spec(), sims["5shot"], None, five_shot, limit=3)
    items = result.seeds[0].items
    assert [it.correct for it in items] == [True, True, True]
    assert [it.answer for it in items] == [it.gold for it in items]
    assert all("####" in (it.completion or "") for it in items)
