"""End to end against ``tokenwatt sim``: two configurations → two run records (→ report → site).

The simulator runs as a child process on 127.0.0.1; ``collect`` runs the real load
generator, SLO search, ``/metrics`` scraper and accuracy suite against it. The SLO boundary
the search finds is checked against the simulator's model run in virtual time over the very
arrival schedule the load generator used (same seed), scanned densely in rate.

The simulators run at ``--time-scale 2`` (every step twice as long; the spec's SLO limits
twice and rates half those of ``sim.spec.yaml``): the same queueing story for half the CPU
per second, so a busy machine's scheduling jitter stays small next to the step times.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tokenwatt.collect.load.arrivals import window_schedule
from tokenwatt.collect.measure.verdict import RETRIED_PREFIX
from tokenwatt.records import RunRecord, load_spec
from tokenwatt.records.spec.spec import Spec
from tokenwatt.sim.engine import PROFILES, Profile, simulate
from tokenwatt.sim.suite import SuiteAnswers, load_suite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_process import REPO, SimProcess, start_sim

FIXTURES = REPO / "tests" / "fixtures"
SPEC = FIXTURES / "sim-x2.spec.yaml"
TIME_SCALE = 2.0
"""The simulators' ``--time-scale``; ``sim-x2.spec.yaml`` is scaled to match."""
SIM_ARGS = ("--time-scale", str(TIME_SCALE))
SUITE = FIXTURES / "sim-suite.jsonl"
ACCURACY_P = {"bf16-kv": 0.96, "fp8-kv": 0.85}


@dataclass
class Collected:
    profile: str
    record: RunRecord
    path: Path


CONFIGS = (("bf16-kv", "sim-bf16kv", "baseline"), ("fp8-kv", "sim-fp8kv", "tuned"))


def _collect_cmd(label: str, role: str, endpoint: str, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tokenwatt",
        "collect",
        "--spec",
        str(SPEC),
        "--label",
        label,
        "--role",
        role,
        "--out",
        str(out),
        "--endpoint",
        endpoint,
        "--no-progress",
        *extra,
    ]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Collected]]:
    """Collect both configurations at once: two simulators, two ``tokenwatt collect``."""
    out = tmp_path_factory.mktemp("runs")
    sims: list[SimProcess] = []
    procs: list[tuple[str, Path, subprocess.Popen[str]]] = []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        for profile, label, role in CONFIGS:
            sim = start_sim(
                *SIM_ARGS,
                "--profile",
                profile,
                "--accuracy-suite",
                str(SUITE),
                "--accuracy-p",
                str(ACCURACY_P[profile]),
            )
            sims.append(sim)
            path = out / f"{label}.json"
            kv = ["--kv-dtype", PROFILES[profile].kv_dtype]  # one spec, two KV dtypes
            cmd = _collect_cmd(label, role, sim.endpoint, path, "--mode", "quick", *kv)
            procs.append(
                (
                    profile,
                    path,
                    subprocess.Popen(
                        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
                    ),
                )
            )
        results: dict[str, Collected] = {}
        for profile, path, proc in procs:
            stdout, stderr = proc.communicate(timeout=240)
            assert proc.returncode == 0, stdout + stderr
            assert f"wrote {path}" in stdout
            results[profile] = Collected(
                profile, RunRecord.model_validate_json(path.read_text()), path
            )
        yield results
    finally:
        for _, _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        for sim in sims:
            sim.stop()


def model_first_miss(profile: Profile, spec: Spec, seed: int) -> float:
    """The lowest rate (req/s, steps of 0.5 / TIME_SCALE) at which the model misses the SLO.

    Same schedule as the load generator (``window_schedule`` with the probe seed and the
    spec's arrival process, arrivals continuing past the window while it drains), same
    constant lengths as the spec's workload, same p99 (numpy's default linear
    interpolation, type 7).
    """
    m = spec.measurement
    assert spec.workload.input_tokens is not None and spec.workload.output_tokens is not None
    prompt, out = spec.workload.input_tokens.median, spec.workload.output_tokens.median
    assert spec.workload.input_tokens.p90 == prompt and spec.workload.output_tokens.p90 == out
    warm, win = m.warmup_s, m.search_window_s
    for rate in np.arange(10.0, 150.0, 0.5) / TIME_SCALE:
        t = window_schedule(
            float(rate),
            warmup_s=warm,
            duration_s=win,
            tail_s=3.0,
            seed=seed,
            arrivals=m.arrivals,
        )
        reqs = simulate(profile, [(x * 1e3, prompt, out) for x in t])
        inside = [r for r, x in zip(reqs, t, strict=True) if warm <= x < warm + win]
        ttft = [r.first_token_ms - r.arrival_ms for r in inside if r.first_token_ms is not None]
        tpot = [
            (r.last_token_ms - r.first_token_ms) / (out - 1)
            for r in inside
            if r.last_token_ms is not None and r.first_token_ms is not None
        ]
        if (
            np.percentile(ttft, 99) > spec.slo.ttft_p99_ms
            or np.percentile(tpot, 99) > spec.slo.tpot_p99_ms
        ):
            return float(rate)
    raise AssertionError(f"the model never missed the SLO up to {150 / TIME_SCALE} req/s")


def search_bounds(record: RunRecord) -> tuple[float, float]:
    """(last pass, first miss) among the search probes (req/s), retried probes left out."""
    probes = [
        p for p in record.probes if not (p.window.failure_reason or "").startswith(RETRIED_PREFIX)
    ]
    misses = [p.window.rate_rps for p in probes if not p.window.slo_pass]
    first_miss = min(misses)
    last_pass = max(p.window.rate_rps for p in probes if p.window.rate_rps < first_miss)
    return last_pass, first_miss


def test_both_run_records_are_valid_complete_and_simulated(
    collected: dict[str, Collected],
) -> None:
    for c in collected.values():
        record = RunRecord.model_validate_json(c.path.read_text())
        assert record.complete and record.incomplete_reason is None
        assert record.simulated is True
        assert record.mode == "quick"
        assert record.environment.engine_version is not None
        assert record.environment.engine_version.startswith("tokenwatt-sim")
        assert record.environment.kv_capacity_tokens == PROFILES[c.profile].kv_capacity_tokens
        assert record.result is not None and record.result.goodput_tok_s > 0
        assert record.result.repeats >= 1 and record.result.slo_pass_count >= 1
        assert record.probes and record.repeats
        assert all(p.metrics is not None and p.metrics.scrapes > 0 for p in record.probes)
        assert record.result.gpu_seconds > 0
    baseline = collected["bf16-kv"].record
    tuned = collected["fp8-kv"].record
    assert baseline.fingerprint == tuned.fingerprint
    assert (baseline.role, tuned.role) == ("baseline", "tuned")


@pytest.mark.parametrize("profile", ["bf16-kv", "fp8-kv"])
def test_search_finds_the_model_boundary_within_ten_percent(
    collected: dict[str, Collected], profile: str
) -> None:
    record = collected[profile].record
    model = PROFILES[profile].slowed(TIME_SCALE)
    boundary = model_first_miss(model, record.spec, record.spec.workload.seed)
    last_pass, first_miss = search_bounds(record)
    assert abs(last_pass - boundary) / boundary <= 0.10, (last_pass, first_miss, boundary)


def test_the_two_configurations_fail_in_different_ways(collected: dict[str, Collected]) -> None:
    """BF16 KV runs out of cache first (TTFT); FP8 KV's bigger batches slow each token."""

    def boundary_failure(record: RunRecord) -> str:
        _, first_miss = search_bounds(record)
        probe = next(
            p
            for p in record.probes
            if p.window.rate_rps == first_miss
            and not (p.window.failure_reason or "").startswith(RETRIED_PREFIX)
        )
        assert probe.window.failure_reason is not None
        return probe.window.failure_reason

    assert boundary_failure(collected["bf16-kv"].record).startswith("queueing/KV-bound")
    assert boundary_failure(collected["fp8-kv"].record).startswith("per-token-latency-bound")
    # ... and FP8 KV holds the SLO to a higher rate.
    assert (
        search_bounds(collected["fp8-kv"].record)[0] > search_bounds(collected["bf16-kv"].record)[0]
    )


def test_accuracy_scores_are_the_simulators_coin(collected: dict[str, Collected]) -> None:
    items = load_suite(SUITE)
    for profile, c in collected.items():
        acc = c.record.accuracy
        assert acc is not None
        answers = SuiteAnswers(items, ACCURACY_P[profile], seed=0)
        limit = c.record.spec.accuracy.limit or len(items)
        expected = [answers.is_right(item, 0) for item in items[:limit]]
        assert [i.correct for i in acc.seeds[0].items] == expected
        assert acc.score_pct == pytest.approx(100 * sum(expected) / len(expected))


def _collect_cli(sim: SimProcess, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = _collect_cmd("interrupted", "baseline", sim.endpoint, out, "--no-accuracy")
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env
    )


PROBE_WAIT_S = 60.0
"""Wait for the first checkpointed probe (s): about the machine, not the tool (a quiet one
needs 3 s; a starved one needed over 20)."""


def _wait_for_probes(out: Path, proc: subprocess.Popen[str], n: int, timeout_s: float) -> None:
    """Poll the checkpointed record until it holds ``n`` probes (bounded in time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists():
            data = json.loads(out.read_text())
            if len(data["probes"]) >= n:
                return
        time.sleep(0.05)
    raise AssertionError(f"no {n} probes in {out} within {timeout_s} s")


def test_ctrl_c_leaves_a_valid_incomplete_record(tmp_path: Path) -> None:
    sim = start_sim(*SIM_ARGS, "--profile", "bf16-kv")
    out = tmp_path / "interrupted.json"
    try:
        proc = _collect_cli(sim, out)
        try:
            _wait_for_probes(out, proc, 1, timeout_s=PROBE_WAIT_S)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=PROBE_WAIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    finally:
        sim.stop()
    assert proc.returncode == 130, stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete is False
    assert record.incomplete_reason is not None and "Ctrl-C" in record.incomplete_reason
    assert len(record.probes) >= 1
    assert record.finished is not None
    assert not list(tmp_path.glob(".*.tmp")), "a temporary file was left behind"


def test_a_dying_engine_leaves_a_valid_incomplete_record(tmp_path: Path) -> None:
    sim = start_sim(*SIM_ARGS, "--profile", "bf16-kv")
    out = tmp_path / "died.json"
    proc = _collect_cli(sim, out)
    try:
        _wait_for_probes(out, proc, 1, timeout_s=PROBE_WAIT_S)
        sim.kill()
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        sim.stop()
    assert proc.returncode == 1, stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete is False
    assert record.incomplete_reason is not None
    assert "stopped answering" in record.incomplete_reason
    assert len(record.probes) >= 1
    assert any(p.window.errors > 0 for p in record.probes)


def test_spec_is_the_one_the_records_carry(collected: dict[str, Collected]) -> None:
    spec = load_spec(SPEC)
    record = collected["bf16-kv"].record
    # quick mode caps nothing in this short spec: the record's spec equals the file's,
    # except the endpoint the test pointed at the simulator.
    assert record.spec.measurement == spec.measurement
    assert record.spec.slo == spec.slo
    assert record.spec.engine.endpoint != spec.engine.endpoint


def test_report_and_site_show_both_configurations(
    collected: dict[str, Collected], tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from tokenwatt.cli import cli
    from tokenwatt.records import load_report

    reports = tmp_path / "reports"
    report_file = reports / "sim-demo.json"
    runner = CliRunner()
    runs = [str(collected[p].path) for p in ("bf16-kv", "fp8-kv")]
    title = "Simulated FP8 KV cache (demo)"
    result = runner.invoke(
        cli, ["report", *runs, "--title", title, "--demo", "--out", str(report_file)]
    )
    assert result.exit_code == 0, result.output
    report = load_report(report_file)
    labels = {c.label for c in report.configs}
    assert labels == {"sim-bf16kv", "sim-fp8kv"}

    docs = tmp_path / "docs"
    result = runner.invoke(cli, ["build", "--reports", str(reports), "--out", str(docs)])
    assert result.exit_code == 0, result.output
    pages = [p for p in docs.rglob("*.md") if "sim-bf16kv" in p.read_text(encoding="utf-8")]
    assert pages, "no page names the baseline configuration"
    text = pages[0].read_text(encoding="utf-8")
    assert "sim-fp8kv" in text


def _chart_rows(text: str, chart: str) -> list[dict[str, object]]:
    """The ``rows`` dataset of one chart's Vega-Lite spec embedded in the page."""
    start = text.index(f'<script type="application/json" id="tw-spec-{chart}">')
    body = text[text.index(">", start) + 1 : text.index("</script>", start)]
    rows: list[dict[str, object]] = json.loads(body)["datasets"]["rows"]
    return rows


def test_report_page_carries_every_figure_from_the_runs(
    collected: dict[str, Collected], tmp_path: Path
) -> None:
    """The page made from the two runs: sweep with failure modes, power per window and over
    time, MBU breakdown, accuracy with paired statistics and the gate, capacity conclusion."""
    import html

    from click.testing import CliRunner
    from scipy.stats import binomtest

    from tokenwatt.cli import cli
    from tokenwatt.records import load_report

    base_run, tuned_run = collected["bf16-kv"].record, collected["fp8-kv"].record
    reports, docs = tmp_path / "reports", tmp_path / "docs"
    runner = CliRunner()
    runs = [str(collected[p].path) for p in ("bf16-kv", "fp8-kv")]
    out = reports / "sim-page.json"
    result = runner.invoke(
        cli, ["report", *runs, "--title", "Sim page", "--demo", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = load_report(out)
    result = runner.invoke(cli, ["build", "--reports", str(reports), "--out", str(docs)])
    assert result.exit_code == 0, result.output
    raw = (docs / "reports" / "sim-page.md").read_text(encoding="utf-8")
    text = html.unescape(raw)
    base, tuned = report.configs

    # Each configuration carries its own KV dtype (--kv-dtype) under one fingerprint.
    assert base.engine.endswith("KV BF16") and tuned.engine.endswith("KV FP8")

    # Sweep: every probe, each miss with its failure mode (the two configurations differ).
    sweep = _chart_rows(raw, "sweep")
    outcomes = {(r["name"], str(r["outcome"]).split(" (")[0]) for r in sweep}
    assert ("sim-bf16kv", "queueing/KV-bound") in outcomes
    assert ("sim-fp8kv", "per-token-latency-bound") in outcomes
    assert "## SLO search, window by window" in text
    assert len([w for w in base.search if w.step == "probe"]) == len(base_run.probes)

    # Power per window: mean W, energy J, tokens/J = goodput tokens in the window / energy.
    assert "## Measurement windows" in text
    for cfg in (base, tuned):
        assert cfg.repeats_detail and cfg.power_timeline
        for rep in cfg.repeats_detail:
            assert rep.mean_power_w and rep.energy_j and rep.window_s
            assert rep.power_samples and rep.power_samples > 0
            tpj = rep.goodput_tok_s * rep.window_s / rep.energy_j
            assert f"| {rep.energy_j:,.0f} | {tpj:,.2f} |" in text
        mean_w = sum(r.mean_power_w or 0 for r in cfg.repeats_detail) / len(cfg.repeats_detail)
        assert cfg.node_power_kw == pytest.approx(mean_w / 1000, abs=1e-3)
    power = _chart_rows(raw, "power")
    assert {r["name"] for r in power} == {"sim-bf16kv", "sim-fp8kv"}
    assert all(float(r["power_w"]) > 0 and "throttle" in r for r in power)  # type: ignore[arg-type]

    # MBU: computed from the spec's geometry, drawn as weights vs KV traffic.
    assert base_run.mbu is not None and base.mbu_breakdown is not None
    mbu = _chart_rows(raw, "mbu")
    assert {(r["name"], r["part"]) for r in mbu} >= {
        ("sim-bf16kv", "weights"),
        ("sim-bf16kv", "KV cache"),
    }
    assert base.mbu_breakdown.weights_gbs == pytest.approx(
        base_run.mbu.weights_bytes_per_step * base_run.mbu.decode_steps_per_s / 1e9, abs=0.05
    )

    # Accuracy: Δ, spread, paired interval, McNemar p (checked with scipy), gate verdict.
    assert base_run.accuracy is not None and tuned_run.accuracy is not None
    b = [i.correct for i in base_run.accuracy.seeds[0].items]
    t = [i.correct for i in tuned_run.accuracy.seeds[0].items]
    only_b = sum(x and not y for x, y in zip(b, t, strict=True))
    only_t = sum(y and not x for x, y in zip(b, t, strict=True))
    assert tuned.accuracy is not None
    delta = tuned_run.accuracy.score_pct - base_run.accuracy.score_pct
    assert tuned.accuracy.delta_pts == pytest.approx(delta, abs=0.01)
    expected_p = binomtest(min(only_b, only_t), only_b + only_t, 0.5).pvalue
    assert tuned.accuracy.mcnemar_p == pytest.approx(expected_p, abs=1e-4)
    assert tuned.accuracy.ci_low_pts is not None and tuned.accuracy.ci_high_pts is not None
    assert tuned.accuracy.ci_low_pts <= delta <= tuned.accuracy.ci_high_pts
    assert f"{expected_p:.3g}" in text
    threshold = report.accuracy.threshold_pts
    assert delta < -threshold, "the simulator's coins (0.96 vs 0.85) fail the gate"
    assert "| fail |" in text
    start = raw.index('<script type="application/json" id="tw-spec-accuracy">')
    body = raw[raw.index(">", start) + 1 : raw.index("</script>", start)]
    gate = json.loads(body)["datasets"]["gate"]
    assert gate == [{"gate_pts": pytest.approx(base_run.accuracy.score_pct - threshold)}]

    # Capacity: no credit, and the conclusion names the gate as the reason.
    assert "earns no capacity saving because it failed the accuracy gate" in text
